package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/lab"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// tenantData is what a tenant leaves at the start of its server's disk.
var tenantData = bytes.Repeat([]byte("tenant secret "), 4096)

func writeTenantData(t *testing.T, host lab.Host) {
	t.Helper()
	f, err := os.OpenFile(wipe.DevicePath(host.Root, host.Disks[0]), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(tenantData, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func holdsTenantData(t *testing.T, host lab.Host) bool {
	t.Helper()
	f, err := os.Open(wipe.DevicePath(host.Root, host.Disks[0]))
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, len(tenantData))
	_, err = f.ReadAt(buf, 0)
	require.NoError(t, err)
	return bytes.Equal(buf, tenantData)
}

// watchPool fails the test whenever it sees the machine's Server (whichever object holds its
// name) Available while its disk still holds the tenant's data, until stop.
func watchPool(t *testing.T, name string, host lab.Host) (stop func() []string) {
	done := make(chan struct{})
	var mu sync.Mutex
	var seen []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			var s m.Server
			if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s) == nil && s.Status.State == m.ServerStateAvailable && s.Spec.ServerClaimRef == nil {
				f, err := os.ReadFile(wipe.DevicePath(host.Root, host.Disks[0]))
				if err == nil && bytes.HasPrefix(f, tenantData) {
					mu.Lock()
					seen = append(seen, fmt.Sprintf("server %s (uid %s) Available with the tenant's data on %s", name, s.UID, host.Disks[0]))
					mu.Unlock()
				}
			}
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(done)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// TestDeletionNeverPoolsAnUnwipedMachine deletes a claimed machine's Server or BMC (and its
// claim) at each point of its lifecycle, with and without a manager restart there: the machine
// comes back Available only once its disk is wiped, which the host's disk file shows; an admin
// who deletes without a wipe gets what was asked, and an event says so.
func TestDeletionNeverPoolsAnUnwipedMachine(t *testing.T) {
	ctx := context.Background()
	deleteServer := func(t *testing.T, name string) {
		require.NoError(t, k8s.Delete(ctx, &m.Server{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	}
	deleteBMC := func(t *testing.T, pool string) {
		require.NoError(t, k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: pool}}))
	}
	bmcGoneAndBack := func(t *testing.T, p *pool) {
		eventually(t, 60*time.Second, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: p.name}, &m.BMC{}))
		}, "the BMC goes once its server is wiped and gone")
		createDirectBMC(t, p.name, "redfish+http://"+p.sim.Host()+"/redfish/v1", p.name) // enrolled again
	}
	// The claim is released, and the wipe boot held back: the server stays in Cleanup.
	releasedAndHeld := func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
		boots.Hold(p.hosts[name].UUID)
		t.Cleanup(func() { boots.Release(p.hosts[name].UUID) })
		releaseAndWait(t, claim)
		waitServer(t, name, m.ServerStateCleanup, 10*time.Second)
	}
	// The deleted BMC stays while its server is not wiped; then both go, and the BMC is
	// enrolled again.
	bmcWaitsForTheWipe := func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
		assert.Never(t, func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: p.name}, &m.BMC{}))
		}, 2*time.Second, 100*time.Millisecond, "the BMC waits for its server's wipe")
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
		assert.False(t, s.DeletionTimestamp.IsZero(), "the server is deleted with its BMC")
		assert.Equal(t, m.ServerStateCleanup, s.Status.State, "and waits, in Cleanup, for its wipe")
		boots.Release(p.hosts[name].UUID)
		bmcGoneAndBack(t, p)
	}
	// before runs with the manager; act sends the deletions (the manager may be stopped
	// meanwhile); then waits for what follows, with the manager running.
	for i, tc := range []struct {
		name    string
		restart bool
		before  func(t *testing.T, p *pool, name string, claim *m.ServerClaim)
		act     func(t *testing.T, p *pool, name string, claim *m.ServerClaim)
		then    func(t *testing.T, p *pool, name string, claim *m.ServerClaim)
		forced  bool
	}{
		{name: "server-while-claimed", act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			deleteServer(t, name)
		}, then: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			s := waitServer(t, name, m.ServerStateReserved, 5*time.Second)
			assert.False(t, s.DeletionTimestamp.IsZero(), "it waits, deleted, for its claim")
			releaseAndWait(t, claim)
		}},
		{name: "server-while-claimed-restart", restart: true, act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			deleteServer(t, name)
		}, then: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			releaseAndWait(t, claim)
		}},
		{name: "server-and-claim-together", act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			require.NoError(t, k8s.Delete(ctx, claim))
			deleteServer(t, name)
		}},
		{name: "server-and-claim-together-restart", restart: true, act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			require.NoError(t, k8s.Delete(ctx, claim))
			deleteServer(t, name)
		}},
		{name: "bmc-during-cleanup", before: releasedAndHeld, act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			deleteBMC(t, p.name)
		}, then: bmcWaitsForTheWipe},
		{name: "bmc-during-cleanup-restart", restart: true, before: releasedAndHeld, act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			deleteBMC(t, p.name)
		}, then: bmcWaitsForTheWipe},
		{name: "bmc-and-claim-together", act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			require.NoError(t, k8s.Delete(ctx, claim))
			deleteBMC(t, p.name)
		}, then: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) { bmcGoneAndBack(t, p) }},
		{name: "forced", forced: true, act: func(t *testing.T, p *pool, name string, claim *m.ServerClaim) {
			var s m.Server
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
			before := s.DeepCopy()
			s.Annotations = map[string]string{m.AnnotationDeleteWithoutWipe: "true"}
			require.NoError(t, k8s.Patch(ctx, &s, client.MergeFrom(before)))
			deleteServer(t, name)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "delete-" + tc.name
			p, name := startOneServer(t, ns, 300+i)
			host := p.hosts[name]
			var old m.Server
			require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &old))
			claim := claimServer(t, ns, "tenant", name, nil)
			writeTenantData(t, host)
			var stop func() []string
			if !tc.forced {
				stop = watchPool(t, name, host)
			}
			if tc.before != nil {
				tc.before(t, p, name, claim)
			}
			if tc.restart {
				require.NoError(t, stopOperator())
				tc.act(t, p, name, claim)
				require.NoError(t, startOperator())
			} else {
				tc.act(t, p, name, claim)
			}
			if tc.then != nil {
				tc.then(t, p, name, claim)
			}
			// The machine is Available again: as a new Server, enrolled again and discovered; or,
			// when its BMC went while a claim still held it (claimed Servers are kept), as the
			// same Server, released and wiped.
			var s m.Server
			if !assert.Eventually(t, func() bool {
				return k8s.Get(ctx, client.ObjectKey{Name: name}, &s) == nil && s.Status.State == m.ServerStateAvailable && s.DeletionTimestamp.IsZero() &&
					(s.UID != old.UID || meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned))
			}, 90*time.Second, 50*time.Millisecond, "the machine is Available again") {
				var served []string
				for _, b := range boots.Boots() {
					if b.Server == name {
						served = append(served, fmt.Sprintf("%s %s err=%v", b.Time.Format("15:04:05.000"), b.Purpose, b.Err))
					}
				}
				var b m.BMC
				_ = k8s.Get(ctx, client.ObjectKey{Name: p.name}, &b)
				t.Logf("BMC %s: uid %s deleted %v finalizers %v state %s conditions %+v", p.name, b.UID, b.DeletionTimestamp, b.Finalizers, b.Status.State, b.Status.Conditions)
				t.Fatalf("last seen: uid %s (old %s), deleted %v, finalizers %v, state %s (%s), conditions %+v; boots served: %v; power-ons: %v",
					s.UID, old.UID, s.DeletionTimestamp, s.Finalizers, s.Status.State, s.Status.LastTransitionReason, s.Status.Conditions,
					served, p.sim.BootLog(systemID(t, &old)))
			}
			if tc.forced {
				assert.True(t, holdsTenantData(t, host), "deleted without a wipe, as the admin said")
				var evs eventsv1.EventList
				require.NoError(t, k8s.List(ctx, &evs))
				found := false
				for _, ev := range evs.Items {
					found = found || (ev.Regarding.UID == old.UID && ev.Reason == controller.ReasonDeletedWithoutWipe)
				}
				assert.True(t, found, "an event records the deletion without a wipe")
				return
			}
			assert.Empty(t, stop(), "never Available with the tenant's data")
			assert.False(t, holdsTenantData(t, host), "the disk was wiped before the machine came back")
			assert.True(t, s.DeletionTimestamp.IsZero())
			if c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionCleaned); c != nil {
				assert.NotEqual(t, "False", string(c.Status))
			}
		})
	}
}

// A deleted Server that holds nothing of a tenant goes at once.
func TestDeletingAnUnclaimedServerIsImmediate(t *testing.T) {
	ctx := context.Background()
	_, name := startOneServer(t, "delete-clean", 310)
	var old m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &old))
	assert.Contains(t, old.Finalizers, controller.ServerFinalizer, "servers are made with the finalizer")
	require.NoError(t, k8s.Delete(ctx, &old))
	eventually(t, 10*time.Second, func() bool {
		var s m.Server
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &s)
		return apierrors.IsNotFound(err) || (err == nil && s.UID != old.UID)
	}, "gone at once")
}
