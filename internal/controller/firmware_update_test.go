package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/firmware"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// firmwarePool is a pool whose hosts' firmware publishes the BIOS version their BMC boots them
// with, as the lab's VMs do, behind a BMC whose updates take 300 ms.
func firmwarePool(t *testing.T, name string, first, n int) *pool {
	t.Helper()
	fixtures := make([]string, n)
	for i := range fixtures {
		fixtures[i] = "small-vm"
	}
	return startPoolOf(t, name, first, fixtures, bmcsim.Options{UpdateDuration: 300 * time.Millisecond},
		func(_ int, host *lab.Host) { host.PublishesBIOSVersion = true })
}

// outOfService watches, from before a rollout starts, how many of a pool's servers are out of
// service at once: the most ServerMaintenances of the baseline that existed together, and the
// most of the pool's servers in Maintenance together. It reads every watch event, so a peak
// between two polls is not missed.
type outOfService struct {
	mu                    sync.Mutex
	maintenances, servers map[string]bool
	maxMaint, maxServers  int
	// stateChanges are, per server, the states it went through (claimed-server checks).
	stateChanges map[string][]m.ServerState
	powerOff     map[string]bool
	stop         func()
}

func watchOutOfService(t *testing.T, baseline, poolName string) *outOfService {
	t.Helper()
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	o := &outOfService{maintenances: map[string]bool{}, servers: map[string]bool{}, stateChanges: map[string][]m.ServerState{},
		powerOff: map[string]bool{}}
	mw, err := wc.Watch(ctx, &m.ServerMaintenanceList{}, client.MatchingLabels{firmware.LabelBaseline: baseline})
	require.NoError(t, err)
	sw, err := wc.Watch(ctx, &m.ServerList{}, client.MatchingLabels{m.LabelBMC: poolName})
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for ev := range mw.ResultChan() {
			sm, ok := ev.Object.(*m.ServerMaintenance)
			if !ok {
				continue
			}
			o.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(o.maintenances, sm.Name)
			} else {
				o.maintenances[sm.Name] = true
			}
			o.maxMaint = max(o.maxMaint, len(o.maintenances))
			o.mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for ev := range sw.ResultChan() {
			s, ok := ev.Object.(*m.Server)
			if !ok {
				continue
			}
			o.mu.Lock()
			if s.Status.State == m.ServerStateMaintenance && ev.Type != watch.Deleted {
				o.servers[s.Name] = true
			} else {
				delete(o.servers, s.Name)
			}
			o.maxServers = max(o.maxServers, len(o.servers))
			if h := o.stateChanges[s.Name]; len(h) == 0 || h[len(h)-1] != s.Status.State {
				o.stateChanges[s.Name] = append(h, s.Status.State)
			}
			if s.Status.PowerState == m.PowerStateOff || s.Spec.Power == m.PowerOff {
				o.powerOff[s.Name] = true
			}
			o.mu.Unlock()
		}
	}()
	o.stop = func() { mw.Stop(); sw.Stop(); cancel(); wg.Wait() }
	t.Cleanup(o.stop)
	return o
}

func (o *outOfService) peaks() (maint, servers int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.maxMaint, o.maxServers
}

func updatesOf(t *testing.T, p *pool) map[string]*m.FirmwareUpdate {
	t.Helper()
	out := map[string]*m.FirmwareUpdate{}
	for name := range p.hosts {
		var sfw m.ServerFirmware
		if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &sfw) == nil {
			out[name] = sfw.Status.Update
		}
	}
	return out
}

func biosBaseline(name, poolName, version, url string, mutate func(*m.FirmwareBaseline)) *m.FirmwareBaseline {
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: poolName}},
		Components:     []m.BaselineComponent{{Component: "BIOS", Version: version, Image: m.FirmwareImage{URL: url}}},
	}}
	if mutate != nil {
		mutate(b)
	}
	return b
}

// TestARolloutNeverExceedsMaxUnavailable: a baseline raising the BIOS version of 20 pool
// servers and setting a BIOS attribute takes at most maxUnavailable (20%: 4) of them out of
// service at once, each through its own ServerMaintenance and a NoClaim taint; each is updated
// by its BMC (SimpleUpdate, a task, the settings staged), re-discovered (its probe boot is the
// reset that applies the update), and counts as done only when its probe's SMBIOS agrees with
// its BMC. All end Available, untainted, FirmwareCompliant, with the attribute set.
func TestARolloutNeverExceedsMaxUnavailable(t *testing.T) {
	ctx := context.Background()
	const n = 20
	p := firmwarePool(t, "rollout", 800, n)
	url, _ := images.Add("rollout-bios-3.0.0.bin", bmcsim.FirmwareImage("BIOS", "3.0.0"))
	seen := watchOutOfService(t, "rollout", "rollout")

	start := time.Now()
	b := biosBaseline("rollout", "rollout", "3.0.0", url, func(b *m.FirmwareBaseline) {
		b.Spec.Settings = &m.BaselineSettings{BIOS: map[string]string{"ProcVirtualization": "Disabled"}}
		b.Spec.Rollout.MaxUnavailable = ptrIntOrString(intstr.FromString("20%"))
	})
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })

	eventually(t, 300*time.Second, func() bool {
		var cur m.FirmwareBaseline
		return k8s.Get(ctx, client.ObjectKey{Name: "rollout"}, &cur) == nil && cur.Status.Rollout == m.RolloutComplete &&
			cur.Status.Compliant == n && cur.Status.Matched == n
	}, "the rollout completes: %d servers compliant", n)
	t.Logf("rollout of %d servers took %v", n, time.Since(start).Round(time.Millisecond))
	maint, servers := seen.peaks()
	assert.LessOrEqual(t, maint, 4, "at most maxUnavailable (20%% of %d) maintenances at once", n)
	assert.LessOrEqual(t, servers, 4, "at most maxUnavailable servers in Maintenance at once")
	assert.GreaterOrEqual(t, maint, 2, "the rollout takes several servers at once, up to maxUnavailable")

	for name, u := range updatesOf(t, p) {
		require.NotNil(t, u, "server %s has an update", name)
		assert.Equal(t, m.FirmwareUpdateSucceeded, u.State, "server %s: %s %s", name, u.Reason, u.Message)
		assert.Contains(t, u.Message, "the host's own SMBIOS agrees (BIOS 3.0.0)")
		assert.True(t, u.HostReset)
		var sfw m.ServerFirmware
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &sfw))
		assert.Equal(t, "3.0.0", sfw.Status.BIOSVersion)
		require.NotNil(t, sfw.Status.BIOS)
		assert.Equal(t, "Disabled", sfw.Status.BIOS.Attributes["ProcVirtualization"])
		assert.Equal(t, metav1.ConditionTrue, conditionOf(sfw.Status.Conditions, m.ConditionFirmwareCompliant).Status)

		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
		assert.Equal(t, m.ServerStateAvailable, s.Status.State)
		assert.Empty(t, s.Spec.Taints, "the update's taint is removed")
		require.NotNil(t, s.Status.Inventory.DMI)
		assert.Equal(t, "3.0.0", s.Status.Inventory.DMI.BIOS.Version, "the host itself reports the new BIOS")
		assert.Equal(t, metav1.ConditionTrue, conditionOf(s.Status.Conditions, m.ConditionServerFirmwareCompliant).Status)
		// What firmware management adds to a Server stays small: the summary condition (the
		// taint is gone by now); the inventory and attributes are in the ServerFirmware.
		bare := s.DeepCopy()
		meta.RemoveStatusCondition(&bare.Status.Conditions, m.ConditionServerFirmwareCompliant)
		whole, err := json.Marshal(&s)
		require.NoError(t, err)
		without, err := json.Marshal(bare)
		require.NoError(t, err)
		assert.LessOrEqual(t, len(whole)-len(without), 1024, "a Server grows by at most 1 KiB")
	}
	var left m.ServerMaintenanceList
	require.NoError(t, k8s.List(ctx, &left, client.MatchingLabels{firmware.LabelBaseline: "rollout"}))
	assert.Empty(t, left.Items, "every update's maintenance is gone")
	eventually(t, 10*time.Second, func() bool {
		return baselineGauge(t, "rollout", "compliant") == n && baselineGauge(t, "rollout", "updating") == 0
	}, "the baseline's metrics count %d compliant servers", n)
}

// baselineGauge is the ironfleet_firmware_baseline_servers series of a baseline and count, as
// the in-process manager exports it; -1 when there is none.
func baselineGauge(t *testing.T, baseline, count string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "ironfleet_firmware_baseline_servers" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range s.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["baseline"] == baseline && labels["count"] == count {
				return s.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// editBaseline changes a baseline's spec, as a person would (again on a conflict: its status
// is written all the time).
func editBaseline(t *testing.T, name string, mutate func(*m.FirmwareBaseline)) {
	t.Helper()
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cur m.FirmwareBaseline
		if err := k8s.Get(context.Background(), client.ObjectKey{Name: name}, &cur); err != nil {
			return err
		}
		mutate(&cur)
		return k8s.Update(context.Background(), &cur)
	}))
}

// retryUpdate sets the retry-update annotation on a ServerFirmware, as a person would.
func retryUpdate(t *testing.T, name string) {
	t.Helper()
	var sfw m.ServerFirmware
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &sfw))
	patch := client.MergeFrom(sfw.DeepCopy())
	metav1.SetMetaDataAnnotation(&sfw.ObjectMeta, m.AnnotationRetryUpdate, "true")
	require.NoError(t, k8s.Patch(context.Background(), &sfw, patch))
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }

// TestAFailedUpdateStopsTheRollout: the simulator's task fails for the first server admitted
// (maxUnavailable 1, maxFailures 1): that server stays in maintenance, tainted, with the BMC's
// reason; the rollout is Stopped and no other server is taken. A person's retry sends it again:
// it succeeds, and the rest follow.
func TestAFailedUpdateStopsTheRollout(t *testing.T) {
	ctx := context.Background()
	const n = 3
	p := firmwarePool(t, "fwfail", 830, n)
	url, _ := images.Add("fwfail-bios-3.1.0.bin", bmcsim.FirmwareImage("BIOS", "3.1.0"))
	p.sim.FailNextUpdate("flash verification failed at block 7")
	b := biosBaseline("fwfail", "fwfail", "3.1.0", url, nil)
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })

	var failed string
	eventually(t, 60*time.Second, func() bool {
		waiting := 0
		failed = ""
		for name, u := range updatesOf(t, p) {
			switch {
			case u == nil:
			case u.State == m.FirmwareUpdateFailed:
				failed = name
			case u.State == m.FirmwareUpdateWaiting && u.Reason == m.ReasonRolloutStopped:
				waiting++
			}
		}
		return failed != "" && waiting == n-1
	}, "one update failed, the others stopped")
	u := updatesOf(t, p)[failed]
	assert.Equal(t, m.ReasonUpdateTaskFailed, u.Reason)
	assert.Contains(t, u.Message, "flash verification failed at block 7")
	assert.Contains(t, u.Message, "stays in ServerMaintenance")
	s := waitServer(t, failed, m.ServerStateMaintenance, 10*time.Second)
	assert.True(t, m.HasTaint(s.Spec.Taints, m.TaintFirmwareUpdate, m.TaintNoClaim), "tainted: no claim takes it")
	baselineAt(t, "fwfail", func(b *m.FirmwareBaseline) bool {
		return b.Status.Rollout == m.RolloutStopped && b.Status.Failed == 1
	}, "the rollout stopped with one failure")
	var maints m.ServerMaintenanceList
	require.NoError(t, k8s.List(ctx, &maints, client.MatchingLabels{firmware.LabelBaseline: "fwfail"}))
	require.Len(t, maints.Items, 1, "only the failed server is out of service")
	assert.Equal(t, failed, maints.Items[0].Spec.ServerRef.Name)

	// Pausing the stopped rollout to look at it retries nothing: the failure still counts.
	editBaseline(t, "fwfail", func(b *m.FirmwareBaseline) { b.Spec.Rollout.Paused = true })
	baselineAt(t, "fwfail", func(b *m.FirmwareBaseline) bool { return b.Status.Rollout == m.RolloutStopped && b.Status.Failed == 1 },
		"still stopped, paused")
	assert.Equal(t, m.FirmwareUpdateFailed, updatesOf(t, p)[failed].State)
	editBaseline(t, "fwfail", func(b *m.FirmwareBaseline) { b.Spec.Rollout.Paused = false })

	// A person retries: it goes through, and the others follow.
	retryUpdate(t, failed)
	var sfw m.ServerFirmware
	eventually(t, 120*time.Second, func() bool {
		var cur m.FirmwareBaseline
		return k8s.Get(ctx, client.ObjectKey{Name: "fwfail"}, &cur) == nil && cur.Status.Rollout == m.RolloutComplete && cur.Status.Compliant == n
	}, "the rollout completes after the retry")
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: failed}, &sfw))
	assert.NotContains(t, sfw.Annotations, m.AnnotationRetryUpdate, "the retry request is removed")
	for name := range p.hosts {
		waitServer(t, name, m.ServerStateAvailable, 10*time.Second)
	}

	// A failed update given back by hand: its maintenance deleted, the server returns as the
	// failure left it, untainted (the rollout, paused, starts nothing new on it).
	url2, _ := images.Add("fwfail-bios-3.2.0.bin", bmcsim.FirmwareImage("BIOS", "3.2.0"))
	p.sim.FailNextUpdate("power loss during flash")
	editBaseline(t, "fwfail", func(b *m.FirmwareBaseline) {
		b.Spec.Components[0].Version, b.Spec.Components[0].Image.URL = "3.2.0", url2
	})
	eventually(t, 60*time.Second, func() bool {
		failed = ""
		for name, u := range updatesOf(t, p) {
			if u != nil && u.State == m.FirmwareUpdateFailed {
				failed = name
			}
		}
		return failed != ""
	}, "the next update fails")
	editBaseline(t, "fwfail", func(b *m.FirmwareBaseline) { b.Spec.Rollout.Paused = true })
	require.NoError(t, k8s.Delete(ctx, &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: "firmware-" + failed}}))
	sfw = *firmwareUpdate(t, failed, func(u *m.FirmwareUpdate) bool {
		return u.State == m.FirmwareUpdateWaiting && u.Reason == m.ReasonRolloutPaused && u.Maintenance == nil
	})
	s = waitServer(t, failed, m.ServerStateAvailable, 60*time.Second)
	assert.Empty(t, s.Spec.Taints, "given back: untainted")
}

// TestAClaimedServersUpdates: a BMC update keeps its claimed host Reserved and powered
// throughout; a BIOS update under OwnerApproval waits for the claim's owner, then takes the
// server, updates it, gives it back to its claim, and is verified by the BMC after the claim
// powered it on again.
func TestAClaimedServersUpdates(t *testing.T) {
	ctx := context.Background()
	p, server := startOneServerWith(t, "fwclaim", 840, bmcsim.Options{UpdateDuration: 300 * time.Millisecond})
	claim := claimServer(t, "fwclaim", "tenant", server, nil)
	eventually(t, 30*time.Second, func() bool {
		var s m.Server
		return k8s.Get(ctx, client.ObjectKey{Name: server}, &s) == nil && s.Status.PowerState == m.PowerStateOn
	}, "the claimed server is on")
	seen := watchOutOfService(t, "fwclaim", "fwclaim")

	bmcURL, _ := images.Add("fwclaim-bmc-1.3.0.bin", bmcsim.FirmwareImage("BMC", "1.3.0"))
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "fwclaim"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: "fwclaim"}},
		Components:     []m.BaselineComponent{{Component: "BMC", Version: "1.3.0", Image: m.FirmwareImage{URL: bmcURL}}},
	}}
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })
	sfw := firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateSucceeded })
	assert.False(t, sfw.Status.Update.HostReset, "a BMC's firmware alone needs no host downtime")
	assert.Nil(t, sfw.Status.Update.Maintenance)
	assert.Equal(t, "1.3.0", p.sim.FirmwareVersion())
	seen.mu.Lock()
	assert.Equal(t, []m.ServerState{m.ServerStateReserved}, seen.stateChanges[server], "the claimed host stays Reserved throughout")
	assert.False(t, seen.powerOff[server], "and powered")
	seen.mu.Unlock()
	maint, _ := seen.peaks()
	assert.Zero(t, maint, "no maintenance for a BMC update")

	// A BIOS update, the owner's approval awaited.
	biosURL, _ := images.Add("fwclaim-bios-3.2.0.bin", bmcsim.FirmwareImage("BIOS", "3.2.0"))
	editBaseline(t, "fwclaim", func(b *m.FirmwareBaseline) {
		b.Spec.Components = append(b.Spec.Components, m.BaselineComponent{Component: "BIOS", Version: "3.2.0", Image: m.FirmwareImage{URL: biosURL}})
	})
	sfw = firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool {
		return u.State == m.FirmwareUpdateEnteringMaintenance && strings.Contains(u.Message, "approv")
	})
	assert.Equal(t, m.ReasonWaitingForMaintenance, sfw.Status.Update.Reason)
	s := waitServer(t, server, m.ServerStateReserved, time.Second)
	assert.Equal(t, claim.Name, s.Spec.ServerClaimRef.Name, "still its claim's")

	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
	patch := client.MergeFrom(claim.DeepCopy())
	metav1.SetMetaDataAnnotation(&claim.ObjectMeta, m.AnnotationApproveMaintenance, "true")
	require.NoError(t, k8s.Patch(ctx, claim, patch))
	sfw = firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateSucceeded })
	assert.Contains(t, sfw.Status.Update.Message, "next probe boot", "the host's own word is awaited for a claimed server")
	assert.Equal(t, "3.2.0", sfw.Status.BIOSVersion)
	s = waitServer(t, server, m.ServerStateReserved, 10*time.Second)
	assert.Equal(t, claim.Name, s.Spec.ServerClaimRef.Name, "back with its claim")
	seen.mu.Lock()
	assert.Contains(t, seen.stateChanges[server], m.ServerStateMaintenance, "the BIOS update took it out of service")
	seen.mu.Unlock()
	assert.Equal(t, metav1.ConditionTrue, conditionOf(s.Status.Conditions, m.ConditionServerFirmwareCompliant).Status,
		fmt.Sprintf("%+v", meta.FindStatusCondition(s.Status.Conditions, m.ConditionServerFirmwareCompliant)))
}

// TestAnImageIsPushedToABMCWithoutSimpleUpdate: an HPE BMC offers only the multipart push: the
// manager fetches the image and pushes it, but only once it matches the baseline's checksum; a
// mismatch fails the update (nothing pushed), and the corrected baseline retries it.
func TestAnImageIsPushedToABMCWithoutSimpleUpdate(t *testing.T) {
	ctx := context.Background()
	p, server := startOneServerWith(t, "fwpush", 850, bmcsim.Options{Profile: bmcsim.ProfileHPE, UpdateDuration: 300 * time.Millisecond})
	url, checksum := images.Add("fwpush-bmc-2.0.0.bin", bmcsim.FirmwareImage("BMC", "2.0.0"))
	wrong := "sha256:" + strings.Repeat("0", 64)
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "fwpush"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: "fwpush"}},
		Components:     []m.BaselineComponent{{Component: "BMC", Version: "2.0.0", Image: m.FirmwareImage{URL: url, Checksum: wrong}}},
	}}
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })
	sfw := firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateFailed })
	assert.Equal(t, m.ReasonImageUnavailable, sfw.Status.Update.Reason)
	assert.Contains(t, sfw.Status.Update.Message, "not the baseline's "+wrong+": not pushed")
	assert.Contains(t, sfw.Status.Update.Message, "the host stays in service")
	assert.Zero(t, p.sim.Stats().Updates, "nothing was pushed")

	// The checksum fixed (what is wanted is the same: nothing retries by itself), a person
	// retries.
	editBaseline(t, "fwpush", func(b *m.FirmwareBaseline) { b.Spec.Components[0].Image.Checksum = checksum })
	retryUpdate(t, server)
	sfw = firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateSucceeded })
	assert.Equal(t, "2.0.0", p.sim.FirmwareVersion())
	assert.Equal(t, "2.0.0", sfw.Status.BMCVersion)
}

// TestAnImageServedByTheBootService: an image the BMC cannot reach at its origin is asked of
// the boot service (a Secret in its namespace with the origin, the checksum and no more), the
// BMC fetches it where the boot service says it serves it, and the Secret goes with the install:
// the URL dies with the update. The test plays the boot service.
func TestAnImageServedByTheBootService(t *testing.T) {
	ctx := context.Background()
	p, server := startOneServerWith(t, "fwserved", 860, bmcsim.Options{UpdateDuration: 300 * time.Millisecond})
	served, checksum := images.Add("fwserved-bmc-2.1.0.bin", bmcsim.FirmwareImage("BMC", "2.1.0"))
	origin := "http://127.0.0.1:1/firmware/bmc-2.1.0.bin" // nothing listens: only the boot service could fetch it
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "fwserved"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: "fwserved"}},
		Components: []m.BaselineComponent{{Component: "BMC", Version: "2.1.0",
			Image: m.FirmwareImage{URL: origin, Checksum: checksum, ServedBy: m.ImageServedByBootService}}},
	}}
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })

	var secret corev1.Secret
	key := client.ObjectKey{Namespace: systemNamespace, Name: "firmware-image-" + server + "-0"}
	eventually(t, 30*time.Second, func() bool { return k8s.Get(ctx, key, &secret) == nil }, "the image is asked of the boot service")
	assert.Equal(t, "true", secret.Labels[m.LabelFirmwareImage])
	assert.Equal(t, origin, string(secret.Data[m.FirmwareImageURLKey]))
	assert.Equal(t, checksum, string(secret.Data[m.FirmwareImageChecksumKey]))
	sfw := firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.Message == "waiting for the boot service to serve the image" })
	assert.Equal(t, m.FirmwareUpdateStaging, sfw.Status.Update.State)

	patch := client.MergeFrom(secret.DeepCopy())
	secret.Data[m.FirmwareImageServedURLKey] = []byte(served)
	require.NoError(t, k8s.Patch(ctx, &secret, patch))
	firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateSucceeded })
	assert.Equal(t, "2.1.0", p.sim.FirmwareVersion())
	eventually(t, 10*time.Second, func() bool { return apierrors.IsNotFound(k8s.Get(ctx, key, &secret)) }, "the Secret, and the URL, die with the install")
}

// TestTheBMCsOwnSettings: a baseline's settings.bmc on a Dell (whose iDRAC exposes its
// attributes, ManagerAttributeRegistry): a value out of the registry's range is refused on the
// baseline before any call to the BMC; the corrected one is applied at once, without taking the
// claimed host out of service or powering it off, and verified by reading the BMC again.
func TestTheBMCsOwnSettings(t *testing.T) {
	ctx := context.Background()
	p, server := startOneServerWith(t, "fwbmcset", 870, bmcsim.Options{Profile: bmcsim.ProfileDell})
	claimServer(t, "fwbmcset", "tenant", server, nil)
	eventually(t, 30*time.Second, func() bool {
		var s m.Server
		return k8s.Get(ctx, client.ObjectKey{Name: server}, &s) == nil && s.Status.PowerState == m.PowerStateOn
	}, "the claimed server is on")
	sfw := firmwareRead(t, server, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool { return f.Status.BMC != nil })
	assert.Equal(t, "ManagerAttributeRegistry.v1_0_0", sfw.Status.BMC.Registry)
	assert.Equal(t, "1800", sfw.Status.BMC.Attributes["WebServer.1.Timeout"])
	assert.Contains(t, conditionOf(sfw.Status.Conditions, m.ConditionFirmwareRead).Message, "6 BMC attributes")
	seen := watchOutOfService(t, "fwbmcset", "fwbmcset")

	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "fwbmcset"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: "fwbmcset"}},
		Settings:       &m.BaselineSettings{BMC: map[string]string{"WebServer.1.Timeout": "5", "NTPConfigGroup.1.NTPEnable": "Enabled"}},
	}}
	require.NoError(t, k8s.Create(ctx, b))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), b) })
	b = baselineAt(t, "fwbmcset", func(b *m.FirmwareBaseline) bool {
		return conditionOf(b.Status.Conditions, m.ConditionBaselineValid).Reason == m.ReasonInvalidSetting
	}, "its BMC setting refused")
	assert.Contains(t, conditionOf(b.Status.Conditions, m.ConditionBaselineValid).Message, "WebServer.1.Timeout must be within 60..10800, not 5")
	assert.Never(t, func() bool {
		var f m.ServerFirmware
		return k8s.Get(ctx, client.ObjectKey{Name: server}, &f) == nil && f.Status.Update != nil && f.Status.Update.State != m.FirmwareUpdateWithdrawn
	}, 2*time.Second, 100*time.Millisecond, "no update while a setting is refused")
	assert.Zero(t, p.sim.Stats().ManagerPatches, "nothing sent to the BMC")

	editBaseline(t, "fwbmcset", func(b *m.FirmwareBaseline) { b.Spec.Settings.BMC["WebServer.1.Timeout"] = "3600" })
	sfw = firmwareUpdate(t, server, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateSucceeded })
	assert.False(t, sfw.Status.Update.HostReset, "the BMC's settings need no host downtime")
	assert.Nil(t, sfw.Status.Update.Maintenance)
	for _, s := range sfw.Status.Update.Steps {
		assert.Equal(t, m.FirmwareDifferenceBMCSetting, s.Kind)
		assert.Equal(t, "Applied", s.TaskState)
		require.NotNil(t, s.Read, "verified by reading the BMC again")
		assert.Equal(t, s.To, *s.Read)
	}
	assert.Equal(t, int64(3600), p.sim.ManagerAttribute("WebServer.1.Timeout"))
	assert.Equal(t, "Enabled", p.sim.ManagerAttribute("NTPConfigGroup.1.NTPEnable"))
	assert.Equal(t, int64(1), p.sim.Stats().ManagerPatches, "both in one write")
	seen.mu.Lock()
	assert.NotContains(t, seen.stateChanges[server], m.ServerStateMaintenance, "the claimed host stays in service")
	assert.False(t, seen.powerOff[server], "and powered")
	seen.mu.Unlock()
	eventually(t, 30*time.Second, func() bool {
		var f m.ServerFirmware
		return k8s.Get(ctx, client.ObjectKey{Name: server}, &f) == nil &&
			conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonFirmwareCompliant
	}, "compliant")
}
