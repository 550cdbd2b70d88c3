package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/test/lab"
)

// enrollHost gives the boot service a copy of a fixture tree with the system's UUID.
func enrollHost(t *testing.T, fixture string, system int) lab.Host {
	t.Helper()
	host, err := lab.PrepareHost(fixture, t.TempDir(), testSystem(system).UUID)
	require.NoError(t, err)
	boots.AddHost(host)
	return host
}

func serverOf(t *testing.T, system int) *m.Server {
	t.Helper()
	var s m.Server
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: strings.ToLower(testSystem(system).UUID)}, &s); err != nil {
		return nil
	}
	return &s
}

func waitForState(t *testing.T, system int, state m.ServerState, timeout time.Duration) *m.Server {
	t.Helper()
	var s *m.Server
	if !assert.Eventually(t, func() bool {
		s = serverOf(t, system)
		return s != nil && s.Status.State == state
	}, timeout, 50*time.Millisecond, "server of system %d reaches %s", system, state) {
		if s != nil {
			t.Logf("last seen: state %s, reason %s, attempts %d, conditions %+v", s.Status.State, s.Status.LastTransitionReason, s.Status.DiscoveryAttempts, s.Status.Conditions)
		}
		t.FailNow()
	}
	return s
}

func probeBoots(t *testing.T, server string) []m.ServerBootConfiguration {
	t.Helper()
	var list m.ServerBootConfigurationList
	require.NoError(t, k8s.List(context.Background(), &list, client.MatchingLabels{m.LabelServer: server}))
	return list.Items
}

// TestDiscoveryFillsTheInventoryFromTheHost: a Server created by the BMC reconciler reaches
// Available on its own, and its inventory is what its host's hardware tree holds.
func TestDiscoveryFillsTheInventoryFromTheHost(t *testing.T) {
	fixtureOf := map[int]string{10: "small-vm", 11: "dual-socket"}
	for system, fixture := range fixtureOf {
		enrollHost(t, fixture, system)
	}
	createSecret(t, "discovery", goodUser, goodPassword)
	createDirectBMC(t, "discovery", simAddress(sims["discovery"]), "discovery")

	for system, fixture := range fixtureOf {
		s := waitForState(t, system, m.ServerStateAvailable, 60*time.Second)
		want, err := fixtures.LoadExpected(fixture)
		require.NoError(t, err)
		want.SystemUUID = s.Spec.SystemUUID
		got := &report.Report{SystemUUID: s.Spec.SystemUUID, Inventory: *s.Status.Inventory, Warnings: s.Status.Inventory.Warnings}
		assert.Empty(t, want.Diff(got), "the status inventory equals fixture %s", fixture)
		assert.Equal(t, "Probe", s.Status.Inventory.Source)

		assert.Equal(t, int32(0), s.Status.DiscoveryAttempts, "attempts reset on success")
		assert.Equal(t, m.ReasonReportReceived, s.Status.LastTransitionReason)
		assert.NotNil(t, s.Status.LastTransitionTime)
		discovered := meta.FindStatusCondition(s.Status.Conditions, m.ConditionDiscovered)
		require.NotNil(t, discovered)
		assert.Equal(t, metav1.ConditionTrue, discovered.Status)

		eventually(t, 10*time.Second, func() bool { return len(probeBoots(t, s.Name)) == 0 }, "the discovery boot configuration is removed")
		eventually(t, 10*time.Second, func() bool {
			return sims["discovery"].PowerState(systemID(t, s)) == "Off"
		}, "the server is powered off after discovery")
	}
}

// systemID is the simulator's Id of a server's system, from the end of its Redfish URI.
func systemID(t *testing.T, s *m.Server) string {
	t.Helper()
	uri := strings.TrimSuffix(s.Spec.SystemURI, "/")
	return uri[strings.LastIndex(uri, "/")+1:]
}

// TestManagerRestartDuringDiscovery: a manager killed while a server is in Discovery, and a new
// one started, still bring it to Available with one boot configuration and one boot.
func TestManagerRestartDuringDiscovery(t *testing.T) {
	host := enrollHost(t, "small-vm", 13)
	boots.Hold(host.UUID)
	createSecret(t, "restart", goodUser, goodPassword)
	createDirectBMC(t, "restart", simAddress(sims["restart"]), "restart")
	s := waitForState(t, 13, m.ServerStateDiscovery, 30*time.Second)
	require.Len(t, probeBoots(t, s.Name), 1)

	require.NoError(t, stopOperator())
	require.NoError(t, startOperator())

	// The new manager finds the server mid-discovery and neither reboots it nor makes a
	// second boot configuration while the probe is still on its way.
	eventually(t, 10*time.Second, func() bool {
		cur := serverOf(t, 13)
		return cur != nil && cur.Status.ObservedGeneration == cur.Generation
	})
	assert.Len(t, probeBoots(t, s.Name), 1, "one boot configuration, not two")

	boots.Release(host.UUID)
	s = waitForState(t, 13, m.ServerStateAvailable, 30*time.Second)
	if !assert.Len(t, sims["restart"].BootLog(systemID(t, s)), 1, "the host was booted once") {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, s.Name) {
				t.Log(line)
			}
		}
	}
	assert.Empty(t, probeBoots(t, s.Name))
}

// TestSilentProbeEndsInErrorAndRetryBringsItBack: a probe that never reports sends the server
// to Error after the configured attempts, with the reason in a condition; the retry annotation
// brings it back to Initial, and with a working host it then reaches Available.
func TestSilentProbeEndsInErrorAndRetryBringsItBack(t *testing.T) {
	ctx := context.Background()
	createSecret(t, "silent", goodUser, goodPassword)
	createDirectBMC(t, "silent", simAddress(sims["silent"]), "silent")

	s := waitForState(t, 12, m.ServerStateError, 3*discoveryTimeout+30*time.Second)
	assert.Equal(t, m.ReasonAttemptsExhausted, s.Status.LastTransitionReason)
	assert.Equal(t, int32(2), s.Status.DiscoveryAttempts)
	ready := meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Equal(t, m.ReasonAttemptsExhausted, ready.Reason)
	assert.Contains(t, ready.Message, "no probe report after 2 discovery boots")
	assert.Len(t, sims["silent"].BootLog(systemID(t, s)), 2, "one boot per attempt")

	enrollHost(t, "dual-socket", 12)
	before := s.DeepCopy()
	s.Annotations = map[string]string{m.AnnotationRetry: "please"}
	require.NoError(t, k8s.Patch(ctx, s, client.MergeFrom(before)))

	s = waitForState(t, 12, m.ServerStateAvailable, 30*time.Second)
	_, stillAnnotated := s.Annotations[m.AnnotationRetry]
	assert.False(t, stillAnnotated, "the retry annotation is consumed")
	var retried bool
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs))
	for _, e := range evs.Items {
		if e.Regarding.Name == s.Name && e.Reason == "RetryRequested" && strings.Contains(e.Note, "Error → Initial") {
			retried = true
		}
	}
	assert.True(t, retried, "an event records Error → Initial on retry")
}

// TestProbeTroubleShowsOnTheServer: a probe that booted but cannot reach the registry tells the
// boot service, which records it on the boot configuration (BootProgress False); the Server,
// still in Discovery, says why it waits in its Ready condition, and the discovery is retried
// until a report arrives.
func TestProbeTroubleShowsOnTheServer(t *testing.T) {
	ctx := context.Background()
	host := enrollHost(t, "small-vm", 14)
	boots.Hold(host.UUID)
	createSecret(t, "probetrouble", goodUser, goodPassword)
	createDirectBMC(t, "probetrouble", simAddress(sims["probetrouble"]), "probetrouble")
	s := waitForState(t, 14, m.ServerStateDiscovery, 30*time.Second)
	sbcs := probeBoots(t, s.Name)
	require.Len(t, sbcs, 1)

	sbc := sbcs[0].DeepCopy()
	before := sbc.DeepCopy()
	meta.SetStatusCondition(&sbc.Status.Conditions, metav1.Condition{Type: m.ConditionBootProgress, Status: metav1.ConditionFalse,
		Reason: "RegistryUnreachable", Message: "https://10.0.0.1:8443: connection refused"})
	require.NoError(t, k8s.Status().Patch(ctx, sbc, client.MergeFrom(before)))

	eventually(t, 10*time.Second, func() bool {
		cur := serverOf(t, 14)
		ready := meta.FindStatusCondition(cur.Status.Conditions, m.ConditionReady)
		return cur.Status.State == m.ServerStateDiscovery && ready != nil && ready.Reason == "RegistryUnreachable" &&
			strings.Contains(ready.Message, "connection refused")
	}, "the server in Discovery says the probe cannot reach the registry")

	boots.Release(host.UUID)
	waitForState(t, 14, m.ServerStateAvailable, 30*time.Second)
}
