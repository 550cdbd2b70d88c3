package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func createURIBootBMC(t *testing.T, name string, sim *bmcsim.BMC) {
	t.Helper()
	createSecret(t, name, goodUser, goodPassword)
	require.NoError(t, k8s.Create(context.Background(), &m.BMC{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: m.BMCSpec{Access: &m.BMCAccess{Address: simAddress(sim)}, BMCSecretRef: m.LocalObjectReference{Name: name},
			BootMethod: m.BootMethodUefiHttp},
	}))
}

func httpBootCondition(name string) *metav1.Condition {
	var b m.BMC
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b) != nil {
		return nil
	}
	return meta.FindStatusCondition(b.Status.Conditions, m.ConditionHTTPBoot)
}

// TestAUefiHttpBMCBootsItsServerFromAURI: a BMC whose bootMethod is UefiHttp, whose system offers
// the UefiHttp override and HttpBootUri, is HTTPBoot=True; its server's discovery boot boots by
// UefiHttp, and once the boot service has published the boot's ISO URL (the test plays that
// part), the BMC is told to boot it once, by URI, and the server is powered on.
func TestAUefiHttpBMCBootsItsServerFromAURI(t *testing.T) {
	sim := sims["urihttp"]
	createURIBootBMC(t, "urihttp", sim)
	eventually(t, 30*time.Second, func() bool {
		c := httpBootCondition("urihttp")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == m.ReasonHTTPBootURI
	}, "the BMC can boot a URI")
	assert.Equal(t, m.BMCReasonConnected, readyReason("urihttp"))

	name := strings.ToLower(testSystem(32).UUID)
	sbc := discoveryBoot(t, name, true)
	assert.Equal(t, m.BootMethodUefiHttp, sbc.Spec.BootMethod)
	system := sim.SystemIDs()[0]
	assert.Never(t, func() bool { return len(sim.BootLog(system)) > 0 }, time.Second, 100*time.Millisecond,
		"nothing boots before the boot service has published the ISO")

	url := "http://10.20.0.1:8080/boot/t0ken/probe.iso"
	publishISO(t, sbc, url)
	eventually(t, 30*time.Second, func() bool {
		log := sim.BootLog(system)
		return len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootUefiHttp && log[len(log)-1].HTTPBootURI == url
	}, "powered on, booting the ISO by URI")
	assert.Zero(t, sim.Stats().MediaInserts, "no virtual media")
	eventually(t, 10*time.Second, func() bool {
		c := serverReady(name)
		return c != nil && strings.Contains(c.Message, "UEFI HTTP boot")
	}, "the server says how it boots")
	assert.NotContains(t, serverReady(name).Message, "t0ken", "the URL is not in the server's status")
}

// TestAUefiHttpBMCWithoutHttpBootUriFallsBackToPXE: a BMC whose bootMethod is UefiHttp, but
// whose system has no HttpBootUri and no UefiHttp target, is HTTPBoot=False saying what is
// missing and that its servers boot by PXE, and stays Ready; its server's discovery boots by
// PXE, saying why.
func TestAUefiHttpBMCWithoutHttpBootUriFallsBackToPXE(t *testing.T) {
	sim := sims["nourihttp"]
	createURIBootBMC(t, "nourihttp", sim)
	eventually(t, 30*time.Second, func() bool {
		c := httpBootCondition("nourihttp")
		return c != nil && c.Reason == m.ReasonHTTPBootURIUnsupported
	}, "the BMC says it cannot boot a URI")
	c := httpBootCondition("nourihttp")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "UefiHttp", "what is missing: %s", c.Message)
	assert.Contains(t, c.Message, "boot by PXE instead")
	eventually(t, 30*time.Second, func() bool { return readyReason("nourihttp") == m.BMCReasonConnected }, "and is Ready all the same")

	name := strings.ToLower(testSystem(33).UUID)
	sbc := discoveryBoot(t, name, false)
	assert.Equal(t, m.BootMethodPXE, sbc.Spec.BootMethod, "a PXE boot")
	bootsByPXE(t, sim, name, "not by a URI from BMC nourihttp")
}

// TestAUefiHttpBMCThatRefusesTheURIFallsBackToPXE: a BMC that shows UefiHttp and HttpBootUri
// but refuses the URI of a boot (400) is HTTPBoot=False from then on, saying what it refused
// (without the URL's token); that attempt times out, and the next boots the server by PXE.
func TestAUefiHttpBMCThatRefusesTheURIFallsBackToPXE(t *testing.T) {
	sim := sims["urirefuse"]
	createURIBootBMC(t, "urirefuse", sim)
	eventually(t, 30*time.Second, func() bool {
		c := httpBootCondition("urirefuse")
		return c != nil && c.Status == metav1.ConditionTrue
	}, "the BMC shows it can boot a URI")
	name := strings.ToLower(testSystem(35).UUID)
	sbc := discoveryBoot(t, name, true)
	// Not an http(s) URL: the simulator refuses it with 400, as a BMC refusing HttpBootUri does.
	publishISO(t, sbc, "tftp://10.20.0.1/boot/s3cr3t/probe.iso")
	eventually(t, 30*time.Second, func() bool {
		c := httpBootCondition("urirefuse")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == m.ReasonHTTPBootURIUnsupported
	}, "the refusal turns the BMC's HTTPBoot False")
	c := httpBootCondition("urirefuse")
	assert.Contains(t, c.Message, name, "naming the server: %s", c.Message)
	assert.NotContains(t, c.Message, "s3cr3t")
	system := sim.SystemIDs()[0]
	eventually(t, 60*time.Second, func() bool {
		log := sim.BootLog(system)
		return len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootPxe
	}, "the next attempt boots by PXE")
	for _, ev := range sim.BootLog(system) {
		assert.NotEqual(t, bmcsim.BootUefiHttp, ev.Boot, "never booted by the refused URI")
	}
}

// TestAUefiHttpBMCsLegacyServerBootsByPXE: UEFI HTTP boot is UEFI's: a server of a UefiHttp BMC
// that boots Legacy (as its BMC says) is not switched to UEFI for its probe: it boots by PXE,
// saying why.
func TestAUefiHttpBMCsLegacyServerBootsByPXE(t *testing.T) {
	sim := sims["urilegacy"]
	createURIBootBMC(t, "urilegacy", sim)
	name := strings.ToLower(testSystem(36).UUID)
	sbc := discoveryBoot(t, name, false)
	assert.Equal(t, m.BootMethodPXE, sbc.Spec.BootMethod)
	bootsByPXE(t, sim, name, "boots Legacy")
}

// bootsByPXE waits for the server of sim's one system to be powered on booting by PXE, and to
// say why in its Ready message.
func bootsByPXE(t *testing.T, sim *bmcsim.BMC, name, why string) {
	t.Helper()
	system := sim.SystemIDs()[0]
	eventually(t, 30*time.Second, func() bool {
		log := sim.BootLog(system)
		return len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootPxe
	}, "powered on, booting by PXE")
	eventually(t, 10*time.Second, func() bool {
		c := serverReady(name)
		return c != nil && strings.Contains(c.Message, why)
	}, "the server says why it boots by PXE: %q", why)
}
