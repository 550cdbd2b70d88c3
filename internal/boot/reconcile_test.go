package boot_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

func TestReadyWhenEverythingIsThere(t *testing.T) {
	createServer(t, "ready-1", nil, "52:54:00:aa:00:01", "52:54:00:AA:00:02")
	createSecret(t, nsAll, "ready-1-ignition", ignitionJSON)
	sbc := createSBC(t, nsAll, "ready-1-discovery", "ready-1", metalv1alpha1.BootPurposeDiscovery, "ready-1-ignition")
	c := waitFor(t, nsAll, sbc.Name, metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Contains(t, c.Message, "52:54:00:aa:00:02", "MACs are named in lower case")
	assert.Equal(t, sbc.Generation, c.ObservedGeneration)

	// Cleanup boots are served the same way.
	createSecret(t, nsAll, "ready-1-cleanup-ignition", ignitionJSON)
	createSBC(t, nsAll, "ready-1-cleanup", "ready-1", metalv1alpha1.BootPurposeCleanup, "ready-1-cleanup-ignition")
	waitFor(t, nsAll, "ready-1-cleanup", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

func TestServerNotFoundThenCreated(t *testing.T) {
	createSecret(t, nsAll, "late-ignition", ignitionJSON)
	createSBC(t, nsAll, "late-discovery", "late", metalv1alpha1.BootPurposeDiscovery, "late-ignition")
	c := waitFor(t, nsAll, "late-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonServerNotFound)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "server late does not exist", c.Message)

	createServer(t, "late", nil, "52:54:00:aa:01:01")
	waitFor(t, nsAll, "late-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

func TestMACsUnknownThenInventoried(t *testing.T) {
	createServer(t, "nomac", nil)
	createSecret(t, nsAll, "nomac-ignition", ignitionJSON)
	createSBC(t, nsAll, "nomac-discovery", "nomac", metalv1alpha1.BootPurposeDiscovery, "nomac-ignition")
	c := waitFor(t, nsAll, "nomac-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonMACsUnknown)
	assert.Contains(t, c.Message, "no NIC MAC address")

	setMACs(t, "nomac", "52:54:00:aa:02:01")
	waitFor(t, nsAll, "nomac-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

// TestABootMACAddressServesAServerWhoseBMCListsNoNICs: a server of an IPMI BMC has no NICs in
// its inventory before the probe reports; its spec.bootMACAddress is what DHCP knows it by.
func TestABootMACAddressServesAServerWhoseBMCListsNoNICs(t *testing.T) {
	createServer(t, "ipmihost", nil)
	createSecret(t, nsAll, "ipmihost-ignition", ignitionJSON)
	createSBC(t, nsAll, "ipmihost-discovery", "ipmihost", metalv1alpha1.BootPurposeDiscovery, "ipmihost-ignition")
	c := waitFor(t, nsAll, "ipmihost-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonMACsUnknown)
	assert.Contains(t, c.Message, "set spec.bootMACAddress")

	var s metalv1alpha1.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "ipmihost"}, &s))
	s.Spec.BootMACAddress = "52:54:00:AA:09:01"
	require.NoError(t, k8s.Update(context.Background(), &s))
	c = waitFor(t, nsAll, "ipmihost-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Contains(t, c.Message, "52:54:00:aa:09:01", "served by its boot MAC, in DHCP's form")
}

func TestIgnitionUnreadableThenWritten(t *testing.T) {
	createServer(t, "noign", nil, "52:54:00:aa:03:01")
	createSBC(t, nsAll, "noign-discovery", "noign", metalv1alpha1.BootPurposeDiscovery, "noign-ignition")
	c := waitFor(t, nsAll, "noign-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionUnreadable)
	assert.Equal(t, `ignition Secret boot-all/noign-ignition does not exist`, c.Message)

	// A Secret without the key is no better.
	createSecret(t, nsAll, "noign-ignition", nil)
	require.Eventually(t, func() bool {
		sbc := getSBC(t, nsAll, "noign-discovery")
		return strings.Contains(sbc.Status.Conditions[0].Message, "has no")
	}, wait, poll)

	var sec corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "noign-ignition"}, &sec))
	sec.Data = map[string][]byte{ignition.SecretKey: ignitionJSON}
	require.NoError(t, k8s.Update(context.Background(), &sec))
	waitFor(t, nsAll, "noign-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)

	// No ignition reference at all.
	createSBC(t, nsAll, "noign-noref", "noign", metalv1alpha1.BootPurposeCleanup, "")
	c = waitFor(t, nsAll, "noign-noref", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionUnreadable)
	assert.Contains(t, c.Message, "ignitionSecretRef is not set")
}

// A provisioning boot is the probe in provision mode, which installs the claim's image; a
// Provisioning configuration that asks this boot service to network-boot an OS image itself
// (its ignition is not the probe's) is refused, naming why.
func TestProvisioningServesTheProbeNotAnOSImage(t *testing.T) {
	createServer(t, "prov", nil, "52:54:00:aa:04:01")
	provision := []byte(`{"registryURL":"https://registry.test","token":"probe-secret-token","systemUUID":"x","mode":"provision","install":{"image":"https://images.test/os.raw.gz","imageChecksum":"sha256:` + strings.Repeat("ab", 32) + `"}}`)
	createSecret(t, nsAll, "prov-ignition", provision)
	createSBC(t, nsAll, "prov-install", "prov", metalv1alpha1.BootPurposeProvisioning, "prov-ignition")
	waitFor(t, nsAll, "prov-install", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)

	createServer(t, "prov-os", nil, "52:54:00:aa:04:02")
	createSecret(t, nsAll, "prov-os-ignition", ignitionJSON)
	createSBC(t, nsAll, "prov-os-install", "prov-os", metalv1alpha1.BootPurposeProvisioning, "prov-os-ignition")
	c := waitFor(t, nsAll, "prov-os-install", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonImageNotSupported)
	assert.Contains(t, c.Message, "is not the probe's provision-mode ignition")
}

// A missing artifact is named; the boot configuration recovers when the file appears, with
// nothing in Kubernetes changing (the file is re-checked, not watched).
func TestArtifactMissingThenRestored(t *testing.T) {
	createServer(t, "art", nil, "52:54:00:aa:05:01")
	createSecret(t, nsAll, "art-ignition", ignitionJSON)
	createSBC(t, nsAll, "art-discovery", "art", metalv1alpha1.BootPurposeDiscovery, "art-ignition")
	waitFor(t, nsAll, "art-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)

	initramfs := filepath.Join(probeDir, boot.ArtifactInitramfs)
	require.NoError(t, os.Rename(initramfs, initramfs+".away"))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			require.NoError(t, os.Rename(initramfs+".away", initramfs))
		}
	}
	defer restore()
	c := waitFor(t, nsAll, "art-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonArtifactMissing)
	assert.Equal(t, initramfs+": no such file", c.Message)

	restore()
	waitFor(t, nsAll, "art-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

// A Ready boot configuration's status is not rewritten by reconciles that change nothing.
func TestStatusIsWrittenOnlyWhenItChanges(t *testing.T) {
	createServer(t, "quiet", nil, "52:54:00:aa:06:01")
	createSecret(t, nsAll, "quiet-ignition", ignitionJSON)
	createSBC(t, nsAll, "quiet-discovery", "quiet", metalv1alpha1.BootPurposeDiscovery, "quiet-ignition")
	waitFor(t, nsAll, "quiet-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	// Counted from here: a cache that had not seen the Secret yet may have written Error first.
	base := statusWritesOf(nsAll, "quiet-discovery")

	// Events that each make the service look again, and re-checks every recheckInterval; the
	// last event changes the verdict, so once it shows, the ones before it were reconciled.
	var sec corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "quiet-ignition"}, &sec))
	sec.Labels = map[string]string{"touched": "1"}
	require.NoError(t, k8s.Update(context.Background(), &sec))
	var sbc metalv1alpha1.ServerBootConfiguration
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "quiet-discovery"}, &sbc))
	sbc.Labels = map[string]string{"touched": "1"}
	require.NoError(t, k8s.Update(context.Background(), &sbc))
	setMACs(t, "quiet", "52:54:00:aa:06:01") // the same MACs
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "quiet-ignition"}, &sec))
	sec.Data = map[string][]byte{}
	require.NoError(t, k8s.Update(context.Background(), &sec))
	waitFor(t, nsAll, "quiet-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionUnreadable)
	assert.Equal(t, base+1, statusWritesOf(nsAll, "quiet-discovery"), "one write: Error; none for the reconciles that changed nothing")
}

// The filtered service boots only the servers its filter picks: the others' boot
// configurations are left alone, and their MACs are not answered.
func TestServerFilterLeavesOthersAlone(t *testing.T) {
	createServer(t, "theirs", nil, "52:54:00:aa:07:01")
	createSecret(t, nsFiltered, "theirs-ignition", ignitionJSON)
	createSBC(t, nsFiltered, "theirs-discovery", "theirs", metalv1alpha1.BootPurposeDiscovery, "theirs-ignition")
	// Created after, so reconciled after (one queue, one worker).
	createServer(t, "ours", map[string]string{filterLabel: "ours"}, "52:54:00:aa:07:02")
	createSecret(t, nsFiltered, "ours-ignition", ignitionJSON)
	createSBC(t, nsFiltered, "ours-discovery", "ours", metalv1alpha1.BootPurposeDiscovery, "ours-ignition")
	waitFor(t, nsFiltered, "ours-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)

	theirs := getSBC(t, nsFiltered, "theirs-discovery")
	assert.Empty(t, theirs.Status.State)
	assert.Empty(t, theirs.Status.Conditions)

	// A boot configuration of a server that does not exist may be another service's: left alone.
	createSecret(t, nsFiltered, "ghost-ignition", ignitionJSON)
	createSBC(t, nsFiltered, "ghost-discovery", "ghost", metalv1alpha1.BootPurposeDiscovery, "ghost-ignition")
	createSBC(t, nsFiltered, "ours-cleanup", "ours", metalv1alpha1.BootPurposeCleanup, "ours-ignition")
	waitFor(t, nsFiltered, "ours-cleanup", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Empty(t, getSBC(t, nsFiltered, "ghost-discovery").Status.State)

	// Labelled later, the server becomes this service's.
	var s metalv1alpha1.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "theirs"}, &s))
	s.Labels = map[string]string{filterLabel: "ours"}
	require.NoError(t, k8s.Update(context.Background(), &s))
	waitFor(t, nsFiltered, "theirs-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

// A boot configuration for another boot operator (its boot-operator label) is left alone:
// not reconciled, and its server's MAC not answered; one labelled ironfleet is served.
func TestAnotherBootOperatorsConfigurationIsLeftAlone(t *testing.T) {
	createServer(t, "elsewhere", nil, "52:54:00:aa:08:01")
	createSecret(t, nsAll, "elsewhere-ignition", ignitionJSON)
	labelled := func(name string, purpose metalv1alpha1.BootPurpose, operator string) {
		sbc := &metalv1alpha1.ServerBootConfiguration{
			ObjectMeta: metav1.ObjectMeta{Namespace: nsAll, Name: name, Labels: map[string]string{metalv1alpha1.LabelBootOperator: operator},
				Annotations: map[string]string{metalv1alpha1.AnnotationProbeBoot: "boot-" + name}},
			Spec: metalv1alpha1.ServerBootConfigurationSpec{ServerRef: metalv1alpha1.LocalObjectReference{Name: "elsewhere"}, Purpose: purpose,
				IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: "elsewhere-ignition"}},
		}
		require.NoError(t, k8s.Create(context.Background(), sbc))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), sbc) })
	}
	labelled("elsewhere-discovery", metalv1alpha1.BootPurposeDiscovery, "another-boot-operator")
	// Created after, so reconciled after (one queue, one worker).
	labelled("elsewhere-cleanup", metalv1alpha1.BootPurposeCleanup, metalv1alpha1.BootOperatorIronfleet)
	waitFor(t, nsAll, "elsewhere-cleanup", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Empty(t, getSBC(t, nsAll, "elsewhere-discovery").Status.State, "another boot operator's configuration is not touched")
}
