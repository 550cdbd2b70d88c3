package controller_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func createVirtualMediaBMC(t *testing.T, name string, sim *bmcsim.BMC, network *m.ProbeNetwork) {
	t.Helper()
	createSecret(t, name, goodUser, goodPassword)
	require.NoError(t, k8s.Create(context.Background(), &m.BMC{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: m.BMCSpec{Access: &m.BMCAccess{Address: simAddress(sim)}, BMCSecretRef: m.LocalObjectReference{Name: name},
			BootMethod: m.BootMethodVirtualMedia, ProbeNetwork: network},
	}))
}

// discoveryBoot waits for the server's discovery boot configuration (Ready too, when ready).
func discoveryBoot(t *testing.T, server string, ready bool) *m.ServerBootConfiguration {
	t.Helper()
	var sbc m.ServerBootConfiguration
	eventually(t, 30*time.Second, func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Namespace: systemNamespace, Name: server + "-discovery"}, &sbc) == nil &&
			(!ready || sbc.Status.State == m.BootConfigurationStateReady)
	}, "the discovery boot configuration of %s is made (Ready: %t)", server, ready)
	return &sbc
}

// publishISO plays the boot service's part of publishing a boot's ISO URL: the Secret, named
// in the boot configuration's status.
func publishISO(t *testing.T, sbc *m.ServerBootConfiguration, url string) {
	t.Helper()
	ctx := context.Background()
	media := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: sbc.Name + "-boot-media"},
		Data: map[string][]byte{m.BootMediaURLKey: []byte(url)}}
	require.NoError(t, k8s.Create(ctx, media))
	t.Cleanup(func() { _ = k8s.Delete(ctx, media) })
	eventually(t, 20*time.Second, func() bool {
		var now m.ServerBootConfiguration
		if k8s.Get(ctx, client.ObjectKeyFromObject(sbc), &now) != nil {
			return false
		}
		if now.Status.BootMediaSecretRef != nil {
			return true
		}
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"bootMediaSecretRef":{"name":"`+media.Name+`"}}}`))
		_ = k8s.Status().Patch(ctx, &now, patch)
		return false
	}, "the boot media's Secret is published")
}

func serverReady(name string) *metav1.Condition {
	var s m.Server
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s) != nil {
		return nil
	}
	return meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
}

// TestAVirtualMediaBMCWithoutVirtualMediaSaysSo: a BMC whose bootMethod is VirtualMedia but
// which offers no virtual CD/DVD is Ready=False VirtualMediaUnsupported, saying what it found;
// its server waits with the same reason instead of hanging in a boot, and the BMC is never asked
// to power anything or set a boot override. Switched to PXE, the BMC is Connected.
func TestAVirtualMediaBMCWithoutVirtualMediaSaysSo(t *testing.T) {
	ctx := context.Background()
	sim := sims["novmedia"]
	createVirtualMediaBMC(t, "novmedia", sim, nil)

	eventually(t, 30*time.Second, func() bool { return readyReason("novmedia") == m.BMCReasonVirtualMediaUnsupported }, "the BMC says it has no virtual media")
	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "novmedia"}, &b))
	ready := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, "VirtualMedia", "the message says what is missing: %s", ready.Message)
	assert.Equal(t, m.BMCStateError, b.Status.State)

	name := strings.ToLower(testSystem(15).UUID)
	eventually(t, 30*time.Second, func() bool {
		c := serverReady(name)
		return c != nil && c.Reason == m.ReasonVirtualMediaUnsupported
	}, "its server waits, saying why")
	assert.Contains(t, serverReady(name).Message, "novmedia")
	// Waiting is what it keeps doing: nothing is powered or booted.
	assert.Never(t, func() bool {
		st := sim.Stats()
		return st.Resets > 0 || st.BootPatches > 0 || st.MediaInserts > 0
	}, 2*time.Second, 100*time.Millisecond, "a BMC without virtual media is never asked to boot its server")

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"bootMethod":"PXE"}}`))
	require.NoError(t, k8s.Patch(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "novmedia"}}, patch))
	eventually(t, 30*time.Second, func() bool { return readyReason("novmedia") == m.BMCReasonConnected }, "PXE needs no virtual media")
}

// TestAVirtualMediaServersProbeBootInsertsItsISO: a discovery on a VirtualMedia BMC makes a boot
// configuration that boots by VirtualMedia, whose ignition carries the BMC's probe network; once
// the boot service has published the ISO's URL, the operator has the BMC insert it (the BMC
// fetches it from the URL), sets CD once and powers the server on. The test plays the boot
// service's part of publishing the URL.
func TestAVirtualMediaServersProbeBootInsertsItsISO(t *testing.T) {
	ctx := context.Background()
	sim := sims["vmedia"]
	iso := []byte("an ISO, as far as the BMC can tell")
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "probe.iso", time.Time{}, strings.NewReader(string(iso)))
	}))
	t.Cleanup(files.Close)
	network := &m.ProbeNetwork{InterfaceMAC: "52:54:00:aa:bb:cc", Address: "10.20.0.7/24", Gateway: "10.20.0.1", DNS: []string{"10.20.0.2"}}
	createVirtualMediaBMC(t, "vmedia", sim, network)
	eventually(t, 30*time.Second, func() bool { return readyReason("vmedia") == m.BMCReasonConnected }, "a BMC with a virtual CD is Ready")

	name := strings.ToLower(testSystem(16).UUID)
	sbc := discoveryBoot(t, name, true)
	assert.Equal(t, m.BootMethodVirtualMedia, sbc.Spec.BootMethod)
	var ign corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: sbc.Spec.IgnitionSecretRef.Name}, &ign))
	cfg, err := ignition.Parse(ign.Data[ignition.SecretKey])
	require.NoError(t, err)
	assert.Equal(t, network, cfg.Network, "the probe's ignition carries the BMC's probe network")
	assert.Never(t, func() bool { return sim.Stats().Resets > 0 }, time.Second, 100*time.Millisecond,
		"nothing boots before the boot service has published the ISO")

	url := files.URL + "/boot/token/probe.iso"
	publishISO(t, sbc, url)

	system := sim.SystemIDs()[0]
	var inserted bmcsim.MediaEvent
	eventually(t, 30*time.Second, func() bool {
		if now := sim.Media(system); now.Inserted {
			inserted = now
		}
		log := sim.BootLog(system)
		return inserted.Inserted && len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootCd
	}, "the ISO inserted, then powered on booting the CD")
	assert.Equal(t, url, inserted.Image)
	assert.NotEmpty(t, inserted.Path, "the BMC fetched the ISO")
	var server m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &server))
	assert.True(t, server.Status.ProbeMediaInserted, "the server records the insert")

	// Nothing reports (no probe runs here): the attempt times out, and the step that ends it
	// ejects the ISO first. The BMC fails every request just then: the eject is not lost, the
	// server keeps saying the ISO is in, and ejects it once the BMC answers again.
	sim.SetFaults(bmcsim.Faults{ErrorRate: 1})
	eventually(t, 30*time.Second, func() bool {
		var evs eventsv1.EventList
		if k8s.List(ctx, &evs) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && strings.Contains(e.Note, "ejecting the probe's ISO") {
				return true
			}
		}
		return false
	}, "the attempt times out, and its eject fails (an event says so)")
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &server))
	assert.True(t, sim.Media(system).Inserted, "the eject failed: the ISO is still in")
	assert.True(t, server.Status.ProbeMediaInserted, "and the server still says so")
	sim.SetFaults(bmcsim.Faults{})
	eventually(t, 60*time.Second, func() bool {
		return sim.Stats().MediaEjects > 0 && !sim.Media(system).Inserted &&
			k8s.Get(ctx, client.ObjectKey{Name: name}, &server) == nil && !server.Status.ProbeMediaInserted
	}, "the ISO is ejected once the BMC answers, and the server records it")
}

// TestAProbeBootWhoseBMCActionFailedIsTakenAgain: the BMC refuses a probe boot's action after
// the status write that began the boot (it cannot fetch the ISO: the URL published answers
// 404): the boot is not left to its discovery timeout. The action is taken again, made anew
// from the boot as it then is — the URL published since, which the BMC can fetch — and the
// server boots in the same attempt.
func TestAProbeBootWhoseBMCActionFailedIsTakenAgain(t *testing.T) {
	withDiscoveryTimeout(t, 2*time.Minute)
	ctx := context.Background()
	sim := sims["bootretry"]
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/boot/fixed/") {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "probe.iso", time.Time{}, strings.NewReader("an ISO"))
	}))
	t.Cleanup(files.Close)
	createVirtualMediaBMC(t, "bootretry", sim, nil)
	name := strings.ToLower(testSystem(34).UUID)
	sbc := discoveryBoot(t, name, true)
	publishISO(t, sbc, files.URL+"/boot/broken/probe.iso")
	eventually(t, 30*time.Second, func() bool {
		var evs eventsv1.EventList
		if k8s.List(ctx, &evs) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && strings.Contains(e.Note, "BMC action failed") {
				return true
			}
		}
		return false
	}, "the boot's action fails, and an event says so")

	fixed := files.URL + "/boot/fixed/probe.iso"
	var media corev1.Secret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: sbc.Name + "-boot-media"}, &media))
	media.Data[m.BootMediaURLKey] = []byte(fixed)
	require.NoError(t, k8s.Update(ctx, &media))
	system := sim.SystemIDs()[0]
	eventually(t, 30*time.Second, func() bool {
		log := sim.BootLog(system)
		return len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootCd
	}, "booted from the ISO after all")
	assert.Equal(t, fixed, sim.Media(system).Image, "the URL as published now")
	var server m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &server))
	assert.EqualValues(t, 1, server.Status.DiscoveryAttempts, "in its first attempt, not after its timeout")
}
