package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// A restarted manager's cache may not have seen the probe boot it made before it died: the
// create then finds it, and the caller gets that boot configuration, not nil.
func TestEnsureProbeBootFindsOneTheCacheHadNotSeen(t *testing.T) {
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", UID: "uid-s1"}, Spec: m.ServerSpec{SystemUUID: "4c4c4544-0000-1000-8000-000000000001"}}
	existing := &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-discovery"},
		Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "s1"}, Purpose: m.BootPurposeDiscovery}}
	misses := 1
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(server, existing).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*m.ServerBootConfiguration); ok && misses > 0 {
				misses--
				return apierrors.NewNotFound(m.GroupVersion.WithResource("serverbootconfigurations").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	pb := testProbeBoot

	require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(server), server))

	sbc, err := ensureProbeBoot(context.Background(), c, c, pb, server, m.BootPurposeDiscovery, nil, probeMedium{})
	require.NoError(t, err)
	require.NotNil(t, sbc)
	assert.Equal(t, "s1-discovery", sbc.Name)
	// Its Secret was rewritten with the new boot's token: it is that boot now, on both sides
	// (the Server's side in the status its reconcile writes).
	assert.NotEmpty(t, sbc.Annotations[m.AnnotationProbeBoot])
	assert.Equal(t, sbc.Annotations[m.AnnotationProbeBoot], server.Status.ProbeBoot)

	// The status write that named it lost its lock: the next look names it again.
	server.Status.ProbeBoot = ""
	_, err = ensureProbeBoot(context.Background(), c, c, pb, server, m.BootPurposeDiscovery, nil, probeMedium{})
	require.NoError(t, err)
	assert.Equal(t, sbc.Annotations[m.AnnotationProbeBoot], server.Status.ProbeBoot)
}

// Each probe boot is named in the Server's status (which its reconcile writes once, after the
// boot's Secret and configuration), and an ignition Secret left by an attempt that died half
// way is replaced by this boot's.
func TestEnsureProbeBootNamesTheBootItsTokenIsFor(t *testing.T) {
	ctx := context.Background()
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", UID: "uid-s1"},
		Spec: m.ServerSpec{SystemUUID: "4c4c4544-0000-1000-8000-000000000001"}, Status: m.ServerStatus{ProbeBoot: "earlier"}}
	leftover := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-cleanup-ignition"},
		Data: map[string][]byte{ignition.SecretKey: []byte("an earlier boot's")}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(server, leftover).Build()
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), server))
	pb := testProbeBoot

	read := server.DeepCopy()
	_, err := ensureProbeBoot(ctx, c, c, pb, server, m.BootPurposeCleanup, nil, probeMedium{})
	require.NoError(t, err)
	boot := server.Status.ProbeBoot
	assert.NotEqual(t, "earlier", boot, "a new boot has a new name")
	var stored m.Server
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), &stored))
	assert.Equal(t, read.ResourceVersion, stored.ResourceVersion, "the Server is not written here: its reconcile's one status write names the boot")
	var secret corev1.Secret
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(leftover), &secret))
	cfg, err := ignition.Parse(secret.Data[ignition.SecretKey])
	require.NoError(t, err)
	assert.Equal(t, boot+".token", cfg.Token, "the Secret carries this boot's token")
	assert.Equal(t, ignition.ModeWipe, cfg.Mode)
}

// A manager killed between writing a new boot's Secret and renaming the boot configuration
// it found leaves the Server and Secret naming boot "b2" and the configuration "b1". The
// configuration is the record: the Secret is put back to b1's token (or made, if it is gone)
// and the Server named b1, so the probe's reports are taken.
func TestEnsureProbeBootPutsTheSecretBackToTheConfigurationsBoot(t *testing.T) {
	for _, secretLeft := range []bool{true, false} {
		ctx := context.Background()
		server, sbc := cleanupBoot("b2", "b1")
		pb := testProbeBoot
		objs := []client.Object{server, sbc}
		if secretLeft {
			objs = append(objs, cleanupIgnition(t, "b2"))
		}
		c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objs...).Build()
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), server))

		got, err := ensureProbeBoot(ctx, c, c, pb, server, m.BootPurposeCleanup, nil, probeMedium{})
		require.NoError(t, err)
		assert.Equal(t, "b1", got.Annotations[m.AnnotationProbeBoot], "the configuration keeps its boot")
		var secret corev1.Secret
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "system", Name: "s1-cleanup-ignition"}, &secret), "secret left: %v", secretLeft)
		cfg, err := ignition.Parse(secret.Data[ignition.SecretKey])
		require.NoError(t, err)
		assert.Equal(t, "b1.token", cfg.Token, "the Secret carries the configuration's boot's token (secret left: %v)", secretLeft)
		assert.Equal(t, ignition.ModeWipe, cfg.Mode)
		assert.Equal(t, "b1", server.Status.ProbeBoot, "the Server names the configuration's boot")
	}
}

// The cache may lag a rename: the Server, Secret and configuration all name boot "b2", but the
// cached configuration still says "b1". Nothing is rewritten to the stale boot.
func TestEnsureProbeBootTrustsTheConfigurationNotTheCache(t *testing.T) {
	ctx := context.Background()
	server, sbc := cleanupBoot("b2", "b2")
	pb := testProbeBoot
	secret := cleanupIgnition(t, "b2")
	b2 := append([]byte(nil), secret.Data[ignition.SecretKey]...)
	api := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(server, sbc, secret).Build()
	cache := interceptor.NewClient(api, interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if err := c.Get(ctx, key, obj, opts...); err != nil {
			return err
		}
		if sbc, ok := obj.(*m.ServerBootConfiguration); ok {
			sbc.Annotations[m.AnnotationProbeBoot] = "b1" // not yet renamed, as far as the cache knows
		}
		return nil
	}})
	require.NoError(t, api.Get(ctx, client.ObjectKeyFromObject(server), server))

	got, err := ensureProbeBoot(ctx, cache, api, pb, server, m.BootPurposeCleanup, nil, probeMedium{})
	require.NoError(t, err)
	assert.Equal(t, "b2", got.Annotations[m.AnnotationProbeBoot])
	require.NoError(t, api.Get(ctx, client.ObjectKeyFromObject(secret), secret))
	assert.Equal(t, b2, secret.Data[ignition.SecretKey], "the Secret keeps the boot's token")
	assert.Equal(t, "b2", server.Status.ProbeBoot)
}

var testProbeBoot = ProbeBoot{Namespace: "system", Image: "metalprobe:test", RegistryURL: "https://registry.example:8443",
	Token: func(_, boot string) string { return boot + ".token" }}

// cleanupBoot is server s1 and its cleanup probe boot configuration, naming the boots given.
func cleanupBoot(serverBoot, configBoot string) (*m.Server, *m.ServerBootConfiguration) {
	return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", UID: "uid-s1"},
			Spec: m.ServerSpec{SystemUUID: "4c4c4544-0000-1000-8000-000000000001"}, Status: m.ServerStatus{ProbeBoot: serverBoot}},
		&m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-cleanup", Annotations: map[string]string{m.AnnotationProbeBoot: configBoot}},
			Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "s1"}, Purpose: m.BootPurposeCleanup}}
}

// cleanupIgnition is s1's cleanup ignition Secret as a boot of that name has it.
func cleanupIgnition(t *testing.T, boot string) *corev1.Secret {
	data, err := ignition.Render(ignition.Config{RegistryURL: testProbeBoot.RegistryURL, Token: testProbeBoot.Token("s1", boot),
		Server: "s1", Mode: ignition.ModeWipe, WipePolicy: m.WipeMetadata})
	require.NoError(t, err)
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-cleanup-ignition"}, Data: map[string][]byte{ignition.SecretKey: data}}
}

// TestProbeIgnitionNamesTheServerNotItsUUID: the token is minted for the Server's name, and the
// UUID goes into the ignition only when it is the Server's identity: a Server named by a
// usable UUID. A placeholder, or a UUID shared by systems named by BMC and Id, would stop the
// probe on the right host (it compares what it reads with the ignition's).
func TestProbeIgnitionNamesTheServerNotItsUUID(t *testing.T) {
	const good = "4c4c4544-0000-1000-8000-000000000001"
	var minted []string
	pb := testProbeBoot
	pb.Token = func(server, boot string) string {
		minted = append(minted, server)
		return server + "/" + boot
	}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build()
	for _, tc := range []struct{ name, uuid, want string }{
		{good, good, good},
		{"smc-1-2", good, ""},
		{"openbmc-1-system", "", ""},
		{"03000200-0400-0500-0006-000700080009", "03000200-0400-0500-0006-000700080009", ""},
	} {
		server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: tc.name, UID: "uid"}, Spec: m.ServerSpec{SystemUUID: tc.uuid}}
		secret, err := probeIgnition(c, pb, server, m.BootPurposeCleanup, tc.name+"-cleanup", "b1", nil, probeMedium{})
		require.NoError(t, err, tc.name)
		cfg, err := ignition.Parse(secret.Data[ignition.SecretKey])
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.name+"/b1", cfg.Token, tc.name)
		assert.Equal(t, tc.name, cfg.Server)
		assert.Equal(t, tc.want, cfg.SystemUUID, tc.name)
	}
	assert.Equal(t, []string{good, "smc-1-2", "openbmc-1-system", "03000200-0400-0500-0006-000700080009"}, minted)
}

// A Server of an earlier version names its probe boot in an annotation: the operator moves it
// to status.probeBoot, where the registry now looks, so a probe booted before the upgrade still
// has its report taken; the annotation goes.
func TestAProbeBootNamedInAnAnnotationMovesToStatus(t *testing.T) {
	ctx := context.Background()
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", Annotations: map[string]string{m.AnnotationProbeBoot: "b1", "keep": "me"}}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(server).WithStatusSubresource(&m.Server{}).Build()
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), server))

	require.NoError(t, adoptProbeBootAnnotation(ctx, c, server))
	var stored m.Server
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), &stored))
	assert.Equal(t, "b1", stored.Status.ProbeBoot)
	assert.Equal(t, map[string]string{"keep": "me"}, stored.Annotations)
	assert.Equal(t, stored.ResourceVersion, server.ResourceVersion, "the caller goes on from the version that wrote")

	// Nothing to move: no write.
	require.NoError(t, adoptProbeBootAnnotation(ctx, c, server))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(server), &stored))
	assert.Equal(t, server.ResourceVersion, stored.ResourceVersion)
}

// A probe network changed while its boot configuration exists (an admin fixed an address after
// a boot that never came up) goes into the same boot's ignition, with the same token; the
// boot method follows the BMC's.
func TestEnsureProbeBootRendersAChangedProbeNetwork(t *testing.T) {
	ctx := context.Background()
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s9", UID: "uid-s9"}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(server).Build()
	ignitionOf := func(sbc *m.ServerBootConfiguration) ignition.Config {
		t.Helper()
		var secret corev1.Secret
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: sbc.Namespace, Name: sbc.Spec.IgnitionSecretRef.Name}, &secret))
		cfg, err := ignition.Parse(secret.Data[ignition.SecretKey])
		require.NoError(t, err)
		return cfg
	}
	first := &m.ProbeNetwork{Address: "10.0.0.21/24", Gateway: "10.0.0.254"}
	via := probeMedium{method: m.BootMethodVirtualMedia, network: first}
	sbc, err := ensureProbeBoot(ctx, c, c, testProbeBoot, server, m.BootPurposeDiscovery, nil, via)
	require.NoError(t, err)
	assert.Equal(t, m.BootMethodVirtualMedia, sbc.Spec.BootMethod)
	before := ignitionOf(sbc)
	assert.Equal(t, first, before.Network)

	fixed := &m.ProbeNetwork{Address: "10.0.0.21/24", Gateway: "10.0.0.1"}
	via.network = fixed
	sbc, err = ensureProbeBoot(ctx, c, c, testProbeBoot, server, m.BootPurposeDiscovery, nil, via)
	require.NoError(t, err)
	after := ignitionOf(sbc)
	assert.Equal(t, fixed, after.Network, "the fixed network is the boot's now")
	assert.Equal(t, before.Token, after.Token, "the same boot")
	assert.Equal(t, networkDigest(fixed), sbc.Annotations[m.AnnotationProbeNetwork])

	via = probeMedium{method: m.BootMethodPXE}
	sbc, err = ensureProbeBoot(ctx, c, c, testProbeBoot, server, m.BootPurposeDiscovery, nil, via)
	require.NoError(t, err)
	assert.Nil(t, ignitionOf(sbc).Network, "no network: DHCP")
	assert.Equal(t, m.BootMethodPXE, sbc.Spec.BootMethod)
}
