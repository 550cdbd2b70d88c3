package controller_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// delivery waits until the server's power delivery is in state, and returns the server.
func delivery(t *testing.T, name string, want m.Power, state m.PowerDeliveryState, timeout time.Duration) *m.Server {
	t.Helper()
	var s m.Server
	if !assert.Eventually(t, func() bool {
		if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s) != nil {
			return false
		}
		d := s.Status.PowerDelivery
		return d != nil && d.Want == want && d.State == state
	}, timeout, 50*time.Millisecond, "server %s: power %s %s", name, want, state) {
		t.Logf("last seen: powerState %s, delivery %+v, conditions %+v", s.Status.PowerState, s.Status.PowerDelivery, s.Status.Conditions)
		t.FailNow()
	}
	return &s
}

// serverEvents lists the notes of a server's events with a reason.
func serverEvents(t *testing.T, name, reason string) []string {
	t.Helper()
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(context.Background(), &evs))
	var notes []string
	for _, ev := range evs.Items {
		if ev.Regarding.Name == name && ev.Reason == reason {
			notes = append(notes, ev.Note)
		}
	}
	return notes
}

// TestABMCThatTakesResetsAndIgnoresThemIsNoticedWithoutALoop: a BMC that answers every reset
// with 204 and never changes the power gets the claim's power-on twice (once more after the
// confirmation timeout), then no more: the delivery is Unconfirmed, Powered=False says so, a
// Warning event records it, and no further reset is sent.
func TestABMCThatTakesResetsAndIgnoresThemIsNoticedWithoutALoop(t *testing.T) {
	p, name := startOneServerWith(t, "ignores-resets", 320, bmcsim.Options{})
	var s m.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	id := systemID(t, &s)
	delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second) // the power-off that ended discovery
	p.sim.SetIgnoresResets(true)
	before := p.sim.Stats().Resets
	claimServer(t, "ignores-resets", "web", name, func(c *m.ServerClaim) { c.Spec.Power = m.PowerOn })

	got := delivery(t, name, m.PowerOn, m.PowerUnconfirmed, 60*time.Second)
	assert.Equal(t, int32(2), got.Status.PowerDelivery.Attempts, "sent once, then once more")
	c := meta.FindStatusCondition(got.Status.Conditions, m.ConditionPowered)
	require.NotNil(t, c)
	assert.Equal(t, "False", string(c.Status))
	assert.Equal(t, "PowerOnUnconfirmed", c.Reason)
	assert.Contains(t, c.Message, "not sent again")
	assert.Equal(t, m.PowerStateOff, got.Status.PowerState, "what the BMC reports, not Powering* for ever")
	assert.Equal(t, before+2, p.sim.Stats().Resets, "two resets reached the BMC")
	assert.Len(t, serverEvents(t, name, m.ReasonPowerResent), 1)
	assert.Len(t, serverEvents(t, name, m.ReasonPowerUnconfirmed), 1)
	// No loop: over twice the confirmation timeout, nothing more is sent.
	assert.Never(t, func() bool { return p.sim.Stats().Resets != before+2 }, 2*operatorDeps.Settings.Power.Confirm, 100*time.Millisecond,
		"no reset is sent after Unconfirmed")
	assert.Equal(t, "Off", p.sim.PowerState(id))

	// The BMC recovers and someone powers the server on there: the request, still watched
	// (once per confirmation timeout), is confirmed, with no reset sent.
	p.sim.SetIgnoresResets(false)
	p.sim.SetPowerState(id, "On")
	delivery(t, name, m.PowerOn, m.PowerConfirmed, 30*time.Second)
	assert.Equal(t, before+2, p.sim.Stats().Resets)
}

// TestAGracefulShutdownTheOSIgnoresIsForced: a claim's power Off asks the OS to shut down
// (GracefulShutdown); an OS that does is left to do it, one that does not is forced off after
// the grace period, with a Warning event.
func TestAGracefulShutdownTheOSIgnoresIsForced(t *testing.T) {
	for i, tc := range []struct {
		name     string
		osStops  bool
		escalate bool
	}{
		{"os-stops", true, false},
		{"os-ignores", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "shutdown-" + tc.name
			p, name := startOneServerWith(t, ns, 330+i, bmcsim.Options{})
			var s m.Server
			require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
			id := systemID(t, &s)
			// The power-off that ended discovery is sent after the write that made the server
			// Available: only the resets after it are this test's.
			delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second)
			var mu sync.Mutex
			var resets []string
			p.sim.OnPowerAction(func(a bmcsim.PowerAction) {
				if a.SystemID != id || a.ResetType == "" {
					return
				}
				mu.Lock()
				resets = append(resets, a.ResetType)
				mu.Unlock()
			})
			claim := claimServer(t, ns, "web", name, func(c *m.ServerClaim) { c.Spec.Power = m.PowerOn })
			delivery(t, name, m.PowerOn, m.PowerConfirmed, 30*time.Second)
			require.True(t, p.sim.SetHostShutsDown(id, true), "the host decides whether it stops")

			setClaimPower(t, claim, m.PowerOff)
			shutting := delivery(t, name, m.PowerOff, m.PowerShuttingDown, 30*time.Second)
			assert.True(t, shutting.Status.PowerDelivery.Graceful)
			if c := meta.FindStatusCondition(shutting.Status.Conditions, m.ConditionPowered); assert.NotNil(t, c) {
				assert.Equal(t, "PowerOffShuttingDown", c.Reason)
			}
			if tc.osStops {
				p.sim.SetPowerState(id, "Off") // the OS shuts down, in its own time
			}
			done := delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second)
			assert.Equal(t, m.PowerStateOff, done.Status.PowerState)
			assert.Equal(t, "Off", p.sim.PowerState(id))
			mu.Lock()
			sent := slices.Clone(resets)
			mu.Unlock()
			assert.Contains(t, sent, "GracefulShutdown")
			if tc.escalate {
				assert.Equal(t, "ForceOff", sent[len(sent)-1], "forced after the grace period: %v", sent)
				assert.False(t, done.Status.PowerDelivery.Graceful)
				assert.Len(t, serverEvents(t, name, m.ReasonGracefulShutdownIgnored), 1)
			} else {
				assert.NotContains(t, sent, "ForceOff", "an OS that stops is not forced: %v", sent)
				assert.Empty(t, serverEvents(t, name, m.ReasonGracefulShutdownIgnored))
			}
		})
	}
}

// TestAPowerStateThatLagsIsObservedNotAssumed: a BMC that shows the old power state for
// seconds after a reset (iLO) gets the request once; the server shows PoweringOn until the BMC
// shows On, then the delivery is Confirmed.
func TestAPowerStateThatLagsIsObservedNotAssumed(t *testing.T) {
	lag := operatorDeps.Settings.Power.Confirm / 2
	p, name := startOneServerWith(t, "power-lag", 340, bmcsim.Options{Quirks: &bmcsim.Quirks{PowerStateLag: lag}})
	delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second) // the power-off that ended discovery
	before := p.sim.Stats().Resets
	claimServer(t, "power-lag", "web", name, func(c *m.ServerClaim) { c.Spec.Power = m.PowerOn })
	sent := delivery(t, name, m.PowerOn, m.PowerSent, 30*time.Second)
	assert.Equal(t, m.PowerStatePoweringOn, sent.Status.PowerState, "not assumed On while the BMC shows Off")
	done := delivery(t, name, m.PowerOn, m.PowerConfirmed, 30*time.Second)
	assert.Equal(t, m.PowerStateOn, done.Status.PowerState)
	assert.Equal(t, int32(1), done.Status.PowerDelivery.Attempts, "sent once: the lag is not taken for a lost request")
	assert.Equal(t, before+1, p.sim.Stats().Resets)
	assert.Empty(t, serverEvents(t, name, m.ReasonPowerResent))
}

// TestAPowerRequestTheBMCFailsToTakeSaysWhy: a power request whose BMC call fails shows why in
// the Powered condition, not only in a Warning event; it is sent once the BMC answers again, and
// the server is Ready, with no error left over from the failures.
func TestAPowerRequestTheBMCFailsToTakeSaysWhy(t *testing.T) {
	p, name := startOneServerWith(t, "power-refused", 325, bmcsim.Options{})
	delivery(t, name, m.PowerOff, m.PowerConfirmed, 30*time.Second) // the power-off that ended discovery
	p.sim.SetFaults(bmcsim.Faults{ErrorRate: 1})
	claimServer(t, "power-refused", "web", name, func(c *m.ServerClaim) { c.Spec.Power = m.PowerOn })

	var s m.Server
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
		c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionPowered)
		return c != nil && c.Reason == "PowerOnRequested" && strings.Contains(c.Message, "the BMC call to send it failed (")
	}, "Powered says the request is not sent, and why")
	p.sim.SetFaults(bmcsim.Faults{})

	done := delivery(t, name, m.PowerOn, m.PowerConfirmed, 60*time.Second)
	assert.NotContains(t, meta.FindStatusCondition(done.Status.Conditions, m.ConditionPowered).Message, "failed", "the failure is over")
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
		return s.Status.State == m.ServerStateReserved && meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionReady)
	}, "Reserved and Ready, no error left in Ready")
}
