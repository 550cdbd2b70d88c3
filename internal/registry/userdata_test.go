package registry_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// probeNamespace holds the test's probe boot configurations (the operator's system namespace).
const probeNamespace = "ironfleet-probes"

// installFixture is a server held by a claim whose ignition Secret holds userData, with its
// probe boot configuration of purpose, named boot, current.
func installFixture(t *testing.T, name, uuid string, purpose m.BootPurpose, userData []byte) (boot string) {
	t.Helper()
	ctx := context.Background()
	c := env.Client
	boot = "boot-" + name
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-" + name}}
	require.NoError(t, c.Create(ctx, ns))
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: name}}}
	if userData != nil {
		require.NoError(t, c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web-ignition"},
			Data: map[string][]byte{m.IgnitionSecretKey: userData}}))
		claim.Spec.IgnitionSecretRef = &m.LocalObjectReference{Name: "web-ignition"}
	}
	require.NoError(t, c.Create(ctx, claim))
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: m.ServerSpec{SystemUUID: uuid,
		ServerClaimRef: &m.ObjectReference{Namespace: ns.Name, Name: claim.Name, UID: string(claim.UID)}}}
	require.NoError(t, c.Create(ctx, server))
	server.Status.ProbeBoot = boot
	require.NoError(t, c.Status().Update(ctx, server))
	suffix := map[m.BootPurpose]string{m.BootPurposeProvisioning: "-provision", m.BootPurposeCleanup: "-cleanup", m.BootPurposeDiscovery: "-discovery"}[purpose]
	require.NoError(t, c.Create(ctx, &m.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: name + suffix, Annotations: map[string]string{m.AnnotationProbeBoot: boot}},
		Spec:       m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: name}, Image: "metalprobe:test", Purpose: purpose},
	}))
	return boot
}

// fetchUserData asks the registry for the user data as a probe does: over TLS, with token.
func fetchUserData(t *testing.T, token, systemUUID string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(registry.UserDataRequest{SystemUUID: systemUUID})
	require.NoError(t, err)
	status, msg := post(t, "/v1/userdata", token, body)
	return status, []byte(msg)
}

// TestUserDataOnlyToTheCurrentInstallBootsToken: the registry hands the claim's user data, byte
// for byte, to the probe of the server's current install boot, and to no one else: no token, a
// token it did not mint, an ended boot's, a discovery or cleanup boot's, or a host that reads
// another system UUID.
func TestUserDataOnlyToTheCurrentInstallBootsToken(t *testing.T) {
	ctx := context.Background()
	ensureProbeNamespace(t)
	userData := []byte("#cloud-config\nkubeadm join --token abcdef.0123456789abcdef\n\x00\xff")
	const uuid = "7d1c3a52-93c4-4f2e-8e0b-1a2b3c4d5e6f"
	// Named by its UUID: the UUID is the server's identity, which a request is checked against.
	boot := installFixture(t, uuid, uuid, m.BootPurposeProvisioning, userData)
	token := signer.Token(uuid, boot)

	status, got := fetchUserData(t, token, uuid)
	require.Equal(t, http.StatusOK, status, string(got))
	assert.Equal(t, userData, got, "byte for byte")
	status, got = fetchUserData(t, token, "")
	require.Equal(t, http.StatusOK, status, "a host that reads no UUID: %s", got)

	otherKey, err := registry.NewSigner([]byte(strings.Repeat("x", 32)))
	require.NoError(t, err)
	cleanupBoot := installFixture(t, "cleanup-1", "", m.BootPurposeCleanup, userData)
	discoveryBoot := installFixture(t, "discovery-1", "", m.BootPurposeDiscovery, userData)
	for name, tc := range map[string]struct {
		token, uuid string
		want        int
	}{
		"no token":               {"", uuid, http.StatusUnauthorized},
		"another registry's":     {otherKey.Token(uuid, boot), uuid, http.StatusForbidden},
		"an ended boot's":        {signer.Token(uuid, "boot-0"), uuid, http.StatusForbidden},
		"another system UUID":    {token, "4c4c4544-0042-4a10-8039-b4c04f4d3732", http.StatusForbidden},
		"a cleanup boot's":       {signer.Token("cleanup-1", cleanupBoot), "", http.StatusForbidden},
		"a discovery boot's":     {signer.Token("discovery-1", discoveryBoot), "", http.StatusForbidden},
		"another server's token": {signer.Token("discovery-1", boot), "", http.StatusForbidden},
	} {
		t.Run(name, func(t *testing.T) {
			status, got := fetchUserData(t, tc.token, tc.uuid)
			assert.Equal(t, tc.want, status, string(got))
			assert.NotContains(t, string(got), "kubeadm join", "no refusal carries the user data")
		})
	}

	// The boot ends (the operator deletes its configuration first, then the server stops
	// naming it): from the first step on, its token gets nothing more.
	require.NoError(t, env.Client.Delete(ctx, &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: probeNamespace, Name: uuid + "-provision"}}))
	status, got = fetchUserData(t, token, uuid)
	assert.Equal(t, http.StatusForbidden, status, string(got))
}

// TestUserDataOfAClaimWithoutIgnition: a claim with no ignition Secret has no user data: 204.
func TestUserDataOfAClaimWithoutIgnition(t *testing.T) {
	ensureProbeNamespace(t)
	boot := installFixture(t, "install-2", "", m.BootPurposeProvisioning, nil)
	status, got := fetchUserData(t, signer.Token("install-2", boot), "")
	assert.Equal(t, http.StatusNoContent, status, string(got))
	assert.Empty(t, got)
}

// TestUserDataRequestIsBounded: the request body is bounded as every request's is, and the
// answer is never larger than a config drive takes.
func TestUserDataRequestIsBounded(t *testing.T) {
	ensureProbeNamespace(t)
	big := make([]byte, m.MaxUserDataBytes+1)
	boot := installFixture(t, "install-3", "", m.BootPurposeProvisioning, big)
	token := signer.Token("install-3", boot)
	status, got := fetchUserData(t, token, "")
	assert.Equal(t, http.StatusConflict, status, "a Secret over the bound is refused, not served")
	assert.Less(t, len(got), 4096)

	req, err := http.NewRequest(http.MethodPost, url+"/v1/userdata", io.MultiReader(strings.NewReader(`{"systemUUID":"`), strings.NewReader(strings.Repeat("a", registry.MaxBodyBytes)), strings.NewReader(`"}`)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := https.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

func ensureProbeNamespace(t *testing.T) {
	t.Helper()
	err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: probeNamespace}})
	require.NoError(t, client.IgnoreAlreadyExists(err))
}
