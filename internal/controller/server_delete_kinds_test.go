package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
)

// point is where in a tenant's tenure of a machine the deletions come.
type point string

const (
	// atReserved: claimed, the tenant's data on the disk.
	atReserved point = "Reserved"
	// atCleanup: released, its wipe boot on its way but held back (a probe booting that has
	// not reported yet).
	atCleanup point = "Cleanup"
	// atMaintenance: taken from its tenant into maintenance (Enforced), the claim still there.
	atMaintenance point = "Maintenance"
	// atRediscovery: its claim went while it was in maintenance; back from it, it is
	// re-discovered with the wipe probe, whose boot is held back.
	atRediscovery point = "Rediscovery"
	// atInstall: the claim's image being installed, its install boot held back; the tenant's
	// data comes after the install.
	atInstall point = "Install"
)

// machine is one simulated machine a tenant has used, and what the test made for it.
type machine struct {
	ns, name string // the namespace of its claims; its Server's name (its system UUID)
	pool     *pool
	host     lab.Host
	old      m.Server // its Server before the deletions
	claim    *m.ServerClaim
	maint    *m.ServerMaintenance
	// viaEndpoint: enrolled through an Endpoint named ns, which made its BMC and BMCSecret
	// (both named ns too); else a BMC given by address, and its BMCSecret, named ns.
	viaEndpoint bool
	guard       *guard
	system      int
	// pxeAtClaim and pxeAtAct are how many network boots its BMC had done when it was claimed,
	// and when the deletions were sent.
	pxeAtClaim, pxeAtAct int
}

// deletionCase deletes some kinds at one point, with the manager running or stopped.
type deletionCase struct {
	name        string
	at          point
	viaEndpoint bool
	// restart: the manager is stopped while act runs and started again after.
	restart bool
	// gc runs the garbage collector's part (envtest has none) on the machine's objects.
	gc bool
	// act sends the deletions; then, with the manager running, follows what comes of them
	// (and re-creates what an admin would).
	act, then func(t *testing.T, mc *machine)
	// forced: deleted without a wipe, as an admin may ask.
	forced bool
	// wipeBoots is how many wipe boots have reached the machine (held) at atCleanup, before
	// the act: 1 unless said.
	wipeBoots int
}

// TestDeletionNeverPoolsAnUnwipedMachine deletes each kind a machine's tenancy involves —
// Server, ServerClaim, ServerBootConfiguration, ServerMaintenance, BMC, BMCSecret and Endpoint,
// alone or together, in background or foreground cascade (the garbage collector's part played
// by the test) — at each point of the tenancy: claimed with the tenant's data on its disk, mid
// wipe, in maintenance, re-discovered with the wipe probe, mid install; each with the manager
// running and, most also, stopped there and started again. Where an admin would, the test
// makes again what it deleted (the BMC and its BMCSecret, the Endpoint: the machine is enrolled
// again). At every version of every Server of the machine, none is Available (or held by
// another claim) while the host's disk file still holds the tenant's data; the machine ends
// Available, once, with its disk wiped. An admin who deletes without a wipe gets what was asked,
// and an event says so.
func TestDeletionNeverPoolsAnUnwipedMachine(t *testing.T) {
	ctx := context.Background()
	// The cases hold a wipe boot while they delete objects, then let it run: with the suite's
	// 4-second probe timeout a loaded machine spends both attempts while a case is still
	// deleting, and the server goes to Error instead of being wiped. No case waits for a probe
	// timeout but one, which waits for the second wipe boot: this operator waits 15 seconds.
	withDiscoveryTimeout(t, 15*time.Second)
	var cases []deletionCase
	add := func(c deletionCase, withRestart bool) {
		cases = append(cases, c)
		if withRestart {
			c.name += "-restart"
			c.restart = true
			cases = append(cases, c)
		}
	}
	fg := client.PropagationPolicy(metav1.DeletePropagationForeground)

	// Server.
	add(deletionCase{name: "server-while-claimed", act: deleteServer(), then: func(t *testing.T, mc *machine) {
		mc.waitsDeleted(t, m.ServerStateReserved, "for its claim")
		releaseAndWait(t, mc.claim)
	}}, true)
	add(deletionCase{name: "server-and-claim-together", act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.claim)
		deleteServer()(t, mc)
	}}, true)
	add(deletionCase{name: "server-during-cleanup", at: atCleanup, act: deleteServer(), then: func(t *testing.T, mc *machine) {
		mc.waitsDeleted(t, m.ServerStateCleanup, "for its wipe")
		mc.releaseBoots()
	}}, true)
	add(deletionCase{name: "server-during-maintenance", at: atMaintenance, act: deleteServer(), then: func(t *testing.T, mc *machine) {
		mc.waitsDeleted(t, m.ServerStateMaintenance, "in maintenance")
		releaseAndWait(t, mc.claim)
		mc.delete(t, mc.maint) // re-discovered with the wipe probe, then it goes
	}}, true)
	// kubectl delete --cascade=foreground: the garbage collector deletes what the Server owns
	// at once, while its finalizer keeps it for the wipe. The second (last) wipe boot is under
	// way: a wipe whose boot configuration went would cost the last attempt.
	add(deletionCase{name: "server-foreground-during-cleanup", at: atCleanup, wipeBoots: 2, gc: true, act: deleteServer(fg), then: func(t *testing.T, mc *machine) {
		mc.waitsDeleted(t, m.ServerStateCleanup, "for its wipe")
		mc.releaseBoots()
	}}, true)
	// The machine is scrapped, its tenant's claim with it (a claim left would bind the
	// Server made again under the name it asks for).
	add(deletionCase{name: "forced", forced: true, act: func(t *testing.T, mc *machine) {
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: mc.name}, &s))
		before := s.DeepCopy()
		s.Annotations = map[string]string{m.AnnotationDeleteWithoutWipe: "true"}
		require.NoError(t, k8s.Patch(ctx, &s, client.MergeFrom(before)))
		deleteServer()(t, mc)
		mc.delete(t, mc.claim)
	}}, false)

	// ServerClaim: the tenant's goes, a claim of the same name comes; it gets the machine
	// only wiped.
	add(deletionCase{name: "claim-deleted-and-made-again", act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.claim)
	}, then: func(t *testing.T, mc *machine) {
		mc.gone(t, mc.claim, 30*time.Second, "the tenant's claim goes")
		again := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: mc.ns, Name: mc.claim.Name},
			Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: mc.name}}}
		require.NoError(t, k8s.Create(ctx, again))
		eventually(t, 60*time.Second, func() bool {
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(again), again))
			return again.Status.Phase == m.ClaimPhaseBound
		}, "the new claim binds the machine once it is wiped")
		assert.False(t, holdsTenantData(t, mc.host), "the new claim got the machine wiped")
		releaseAndWait(t, again)
	}}, true)
	add(deletionCase{name: "claim-during-maintenance", at: atMaintenance, act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.claim)
	}, then: func(t *testing.T, mc *machine) {
		mc.gone(t, mc.claim, 30*time.Second, "the claim goes, its server in maintenance")
		mc.delete(t, mc.maint)
	}}, true)

	// ServerBootConfiguration: the probe's, at each probe boot that follows a tenant.
	add(deletionCase{name: "bootconfig-during-cleanup", at: atCleanup, act: deleteBoot(m.BootPurposeCleanup), then: releaseBoots}, true)
	add(deletionCase{name: "bootconfig-during-rediscovery", at: atRediscovery, act: deleteBoot(m.BootPurposeCleanup), then: releaseBoots}, true)
	add(deletionCase{name: "bootconfig-during-install", at: atInstall, act: deleteBoot(m.BootPurposeProvisioning), then: func(t *testing.T, mc *machine) {
		mc.releaseBoots()
		eventually(t, 60*time.Second, func() bool {
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(mc.claim), mc.claim))
			return meta.IsStatusConditionTrue(mc.claim.Status.Conditions, m.ConditionProvisioned)
		}, "the image is installed with a new boot")
		writeTenantData(t, mc.host)
		releaseAndWait(t, mc.claim)
	}}, true)

	// ServerMaintenance.
	add(deletionCase{name: "maintenance-while-claimed", at: atMaintenance, act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.maint)
	}, then: func(t *testing.T, mc *machine) {
		waitServer(t, mc.name, m.ServerStateReserved, 20*time.Second)
		releaseAndWait(t, mc.claim)
	}}, true)
	add(deletionCase{name: "maintenance-and-claim-together", at: atMaintenance, act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.maint)
		mc.delete(t, mc.claim)
	}}, true)

	// BMC (and its BMCSecret), made again as an admin re-enrolling the machine would.
	add(deletionCase{name: "bmc-during-cleanup", at: atCleanup, act: deleteBMC(), then: bmcWaitsForTheWipe}, true)
	add(deletionCase{name: "bmc-foreground-during-cleanup", at: atCleanup, gc: true, act: deleteBMC(fg), then: bmcWaitsForTheWipe}, false)
	add(deletionCase{name: "bmc-and-claim-together", act: func(t *testing.T, mc *machine) {
		mc.delete(t, mc.claim)
		deleteBMC()(t, mc)
	}, then: enrolAgain}, true)
	add(deletionCase{name: "bmc-while-claimed", act: deleteBMC(), then: func(t *testing.T, mc *machine) {
		mc.bmcKeepsItsClaimedServer(t)
		enrolAgain(t, mc)
		releaseAndWait(t, mc.claim)
	}}, true)
	// The BMC and its credentials go together while the wipe needs them for another boot.
	add(deletionCase{name: "bmc-and-secret-during-cleanup", at: atCleanup, act: func(t *testing.T, mc *machine) {
		deleteBMC()(t, mc)
		mc.delete(t, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}})
	}, then: func(t *testing.T, mc *machine) {
		mc.waitBootAfterAct(t)
		bmcWaitsForTheWipe(t, mc)
	}}, true)
	add(deletionCase{name: "bmc-and-secret-while-claimed", act: func(t *testing.T, mc *machine) {
		deleteBMC()(t, mc)
		mc.delete(t, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}})
	}, then: func(t *testing.T, mc *machine) {
		mc.bmcKeepsItsClaimedServer(t)
		mc.gone(t, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 30*time.Second, "the BMCSecret goes with its BMC")
		releaseAndWait(t, mc.claim)
		mc.waitsForItsBMC(t)
		enrolAgain(t, mc)
	}}, true)

	// The BMC deleted while claimed (its server kept), the machine is enrolled again by a BMC
	// of another name. The new BMC takes over the Server its deleted BMC left (same machine:
	// same system UUID) rather than making a second: the claim keeps its machine untouched, and
	// its release wipes it through the new BMC.
	add(deletionCase{name: "bmc-enrolled-again-under-another-name", act: deleteBMC(), then: func(t *testing.T, mc *machine) {
		mc.bmcKeepsItsClaimedServer(t)
		again := mc.ns + "-again"
		createSecret(t, again, goodUser, goodPassword)
		createDirectBMC(t, again, "redfish+http://"+mc.pool.sim.Host()+"/redfish/v1", again)
		eventually(t, 30*time.Second, func() bool {
			s := mc.server(t)
			return s != nil && s.Spec.BMCRef != nil && s.Spec.BMCRef.Name == again
		}, "the new BMC takes over the Server its deleted BMC left")
		s := mc.server(t)
		assert.Equal(t, mc.old.UID, s.UID, "the same Server")
		assert.Equal(t, again, s.Labels[m.LabelBMC])
		assert.Equal(t, m.ServerStateReserved, s.Status.State, "still its claim's")
		assert.Never(t, func() bool { return mc.pxeBoots(t) > mc.pxeAtAct || len(mc.servers(t)) != 1 }, 3*time.Second, 100*time.Millisecond,
			"the tenant's machine is not booted, and has no second Server")
		releaseAndWait(t, mc.claim) // wiped through the new BMC
	}}, true)

	// A second BMC for a machine whose first BMC holds it for a claim (two BMCs report the same
	// system UUID): its Server neither boots the tenant's machine nor pools it while the first
	// may hold the tenant's data, and says why.
	add(deletionCase{name: "second-bmc-while-claimed", act: func(t *testing.T, mc *machine) {
		again := mc.ns + "-again"
		createSecret(t, again, goodUser, goodPassword)
		createDirectBMC(t, again, "redfish+http://"+mc.pool.sim.Host()+"/redfish/v1", again)
	}, then: func(t *testing.T, mc *machine) {
		var second m.Server
		eventually(t, 30*time.Second, func() bool {
			for _, s := range mc.servers(t) {
				if s.Name != mc.name && s.Status.State != "" {
					second = s
					return true
				}
			}
			return false
		}, "the second BMC makes a second Server for the machine")
		assert.Never(t, func() bool { return mc.pxeBoots(t) > mc.pxeAtAct }, 3*time.Second, 100*time.Millisecond,
			"the tenant's machine is not booted for the second Server's discovery")
		eventually(t, 10*time.Second, func() bool {
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(&second), &second))
			c := meta.FindStatusCondition(second.Status.Conditions, m.ConditionReady)
			return second.Status.State == m.ServerStateInitial && c != nil && c.Reason == m.ReasonMachineHeldElsewhere
		}, "the second Server waits, and says why")
		mc.delete(t, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: mc.ns + "-again"}})
		mc.gone(t, &second, 30*time.Second, "the second Server, which never booted the machine, goes with its BMC")
		releaseAndWait(t, mc.claim)
	}}, false)

	// BMCSecret: an admin who deletes it by mistake makes it again once its BMC is stuck.
	add(deletionCase{name: "secret-while-claimed", act: deleteSecret, then: func(t *testing.T, mc *machine) {
		releaseAndWait(t, mc.claim)
		mc.secretAgainIfGone(t)
	}}, true)
	add(deletionCase{name: "secret-during-cleanup", at: atCleanup, act: deleteSecret, then: func(t *testing.T, mc *machine) {
		mc.secretAgainIfGone(t)
		mc.waitBootAfterAct(t)
		mc.releaseBoots()
	}}, true)

	// Endpoint: its BMC and BMCSecret are its dependents; the garbage collector takes them
	// when it goes (background) or before it goes (foreground). The admin enrols the machine
	// again by making the Endpoint again.
	add(deletionCase{name: "endpoint-while-claimed", viaEndpoint: true, gc: true, act: deleteEndpoint(), then: func(t *testing.T, mc *machine) {
		mc.gone(t, &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 30*time.Second, "the Endpoint goes")
		mc.bmcKeepsItsClaimedServer(t)
		enrolAgain(t, mc)
		releaseAndWait(t, mc.claim)
	}}, true)
	add(deletionCase{name: "endpoint-during-cleanup", at: atCleanup, viaEndpoint: true, gc: true, act: deleteEndpoint(), then: endpointWaitsForTheWipe}, true)
	add(deletionCase{name: "endpoint-foreground-during-cleanup", at: atCleanup, viaEndpoint: true, gc: true, act: deleteEndpoint(fg), then: endpointWaitsForTheWipe}, false)
	// The Endpoint's BMCSecret lost outright (the garbage collector taking the one an earlier
	// Endpoint left just as this one took it over; one deleted before its BMC was seen): the
	// Endpoint makes it again, and the wipe goes on.
	add(deletionCase{name: "endpoint-secret-lost-while-claimed", viaEndpoint: true, act: func(t *testing.T, mc *machine) {
		secret := &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret))
		mc.delete(t, secret)
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(secret), secret))
		before := secret.DeepCopy()
		secret.Finalizers = nil
		require.NoError(t, k8s.Patch(ctx, secret, client.MergeFrom(before)))
	}, then: func(t *testing.T, mc *machine) {
		var secret m.BMCSecret
		eventually(t, 30*time.Second, func() bool {
			return k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &secret) == nil && secret.DeletionTimestamp.IsZero()
		}, "the Endpoint makes its BMC's BMCSecret again")
		releaseAndWait(t, mc.claim)
	}}, true)

	// The Endpoint's BMC: the Endpoint makes it again once it went.
	add(deletionCase{name: "endpoint-bmc-during-cleanup", at: atCleanup, viaEndpoint: true, act: deleteBMC(), then: func(t *testing.T, mc *machine) {
		mc.waitsDeleted(t, m.ServerStateCleanup, "for its wipe")
		mc.releaseBoots()
	}}, true)

	// Each case has its own machine, BMC and namespace, so cases run side by side; but a
	// restart takes the registry down with the manager, and a probe's report that comes late
	// costs its attempt: a case's last wipe attempt must not meet another case's restart. So
	// the cases without a restart run side by side (six at a time, whatever -parallel says);
	// then those whose point does not run out (Reserved, Maintenance, Install) side by side,
	// sharing one restart once they are all at their point; then those whose held probe boot
	// times out (Cleanup, Rediscovery), one at a time.
	var alone, together, oneByOne []int
	for i, tc := range cases {
		switch {
		case !tc.restart:
			alone = append(alone, i)
		case tc.at == atCleanup || tc.at == atRediscovery:
			oneByOne = append(oneByOne, i)
		default:
			together = append(together, i)
		}
	}
	run := func(indexes []int, width int, round *restartRound) {
		sem := make(chan struct{}, width)
		var wg sync.WaitGroup
		for _, i := range indexes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				ran := false
				t.Run(cases[i].name, func(t *testing.T) {
					ran = true
					runDeletionCase(t, 500+i, cases[i], round)
				})
				if !ran && round != nil {
					round.leave(false) // not run (-run): the round does not wait for it
				}
			}()
		}
		wg.Wait()
	}
	run(alone, 6, nil)
	run(together, len(together), newRestartRound(len(together)))
	run(oneByOne, 1, nil)
}

func runDeletionCase(t *testing.T, system int, tc deletionCase, round *restartRound) {
	ctx := context.Background()
	start := time.Now()
	if round != nil {
		// Whatever becomes of this case, the round is not held up.
		arrived, acted := false, false
		defer func() {
			if !acted {
				round.leave(arrived)
			}
		}()
		tc.restart = false
		act := tc.act
		tc.act = func(t *testing.T, mc *machine) {
			arrived = true
			require.NoError(t, round.arrive())
			act(t, mc)
			acted = true
			require.NoError(t, round.acted())
		}
	}
	ns := "delete-" + tc.name
	var p *pool
	var name string
	if tc.viaEndpoint {
		p, name = startEnrolled(t, ns, system)
	} else {
		p, name = startOneServer(t, ns, system)
	}
	mc := &machine{ns: ns, name: name, pool: p, host: p.hosts[name], viaEndpoint: tc.viaEndpoint, system: system}
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &mc.old))
	// When the case is over, its BMC (or Endpoint) goes, before its simulator does.
	t.Cleanup(func() {
		if tc.viaEndpoint {
			_ = k8s.Delete(ctx, &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
		_ = k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		_ = k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: ns + "-again"}})
	})

	if tc.at == atInstall {
		mc.holdBoots(t)
		mc.claim = claimServer(t, ns, "tenant", name, func(c *m.ServerClaim) { c.Spec.Image, c.Spec.ImageChecksum = images.SimImage() })
	} else {
		mc.claim = claimServer(t, ns, "tenant", name, nil)
		writeTenantData(t, mc.host)
	}
	var stop func() []string
	if !tc.forced {
		mc.guard, stop = guardMachine(t, mc.host, mc.claim)
	}
	mc.pxeAtClaim = mc.pxeBoots(t)
	mc.reach(t, tc.at, max(tc.wipeBoots, 1))
	if tc.gc {
		collectGarbage(t, owner{"Endpoint", ns}, owner{"BMC", ns}, owner{"Server", name})
	}
	mc.pxeAtAct = mc.pxeBoots(t)
	if tc.restart {
		require.NoError(t, stopOperator())
		tc.act(t, mc)
		require.NoError(t, startOperator())
	} else {
		tc.act(t, mc)
	}
	if tc.then != nil {
		tc.then(t, mc)
	}

	// The machine is Available again: as a new Server, enrolled again and discovered; or, when
	// its Server was kept (claimed when its BMC went, or never deleted), as the same Server,
	// released and wiped.
	name = mc.name // a second Server may have the machine now
	var s m.Server
	if !assert.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Name: name}, &s) == nil && s.Status.State == m.ServerStateAvailable && s.DeletionTimestamp.IsZero() &&
			s.Spec.ServerClaimRef == nil && (s.UID != mc.old.UID || meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned))
	}, 120*time.Second, 100*time.Millisecond, "the machine is Available again") {
		mc.explain(t, &s)
		t.FailNow()
	}
	t.Logf("%s: Available again after %v", tc.name, time.Since(start).Round(100*time.Millisecond))
	var ofMachine []string
	for _, other := range mc.servers(t) {
		ofMachine = append(ofMachine, fmt.Sprintf("%s (%s, deleted %v)", other.Name, other.Status.State, other.DeletionTimestamp))
	}
	assert.Len(t, ofMachine, 1, "one Server for the machine: %v", ofMachine)
	// Every boot the machine's BMC made has run its course (a probe still posting when the
	// suite ends would keep it waiting).
	eventually(t, 60*time.Second, func() bool {
		served := 0
		for _, b := range boots.Boots() {
			if b.Server == name || b.Server == mc.old.Name {
				served++
			}
		}
		return served >= mc.pxeBoots(t)
	}, "the boots of the machine are over")
	if tc.forced {
		assert.True(t, holdsTenantData(t, mc.host), "deleted without a wipe, as the admin said")
		var evs eventsv1.EventList
		require.NoError(t, k8s.List(ctx, &evs))
		found := false
		for _, ev := range evs.Items {
			found = found || (ev.Regarding.UID == mc.old.UID && ev.Reason == m.ReasonDeletedWithoutWipe)
		}
		assert.True(t, found, "an event records the deletion without a wipe")
		return
	}
	assert.Empty(t, stop(), "never Available with the tenant's data")
	assert.False(t, holdsTenantData(t, mc.host), "the disk was wiped before the machine came back")
	if c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionCleaned); c != nil {
		assert.NotEqual(t, metav1.ConditionFalse, c.Status)
	}
}
