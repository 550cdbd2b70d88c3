package controller_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
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
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// The machines of TestDeletionNeverPoolsAnUnwipedMachine: how a case enrols one, takes it to its
// point, deletes and makes again what an admin would, and waits for what follows.

// restartRound has a round of cases send their deletions while one and the same manager is
// stopped: once every case of the round is at its point, the manager is stopped, each case
// sends its deletions, and the manager is started again.
type restartRound struct {
	mu      sync.Mutex
	waiting int           // the cases not at their point yet
	down    chan struct{} // closed once the manager is stopped
	acting  sync.WaitGroup
	up      chan struct{} // closed once it is started again
	err     error
}

func newRestartRound(n int) *restartRound {
	r := &restartRound{waiting: n, down: make(chan struct{}), up: make(chan struct{})}
	r.acting.Add(n)
	return r
}

// arrive: the case is at its point. It returns once the manager is stopped.
func (r *restartRound) arrive() error {
	r.mu.Lock()
	r.waiting--
	last := r.waiting == 0
	r.mu.Unlock()
	if last {
		go r.restart()
	}
	<-r.down
	return r.err
}

// acted: the case sent its deletions. It returns once the manager is started again.
func (r *restartRound) acted() error {
	r.acting.Done()
	<-r.up
	return r.err
}

// leave: the case ended (failed) before its point, or before it acted: the round goes on.
func (r *restartRound) leave(arrived bool) {
	if !arrived {
		r.mu.Lock()
		r.waiting--
		last := r.waiting == 0
		r.mu.Unlock()
		if last {
			go r.restart()
		}
	}
	r.acting.Done()
}

func (r *restartRound) restart() {
	r.err = stopOperator()
	close(r.down)
	r.acting.Wait()
	if r.err == nil {
		r.err = startOperator()
	}
	close(r.up)
}

// startEnrolled starts a simulated BMC with one small server, at a loopback address of its own
// on the port prefixEnrol's entry names, and an Endpoint for it (named name, as its BMC and
// BMCSecret will be): the machine is enrolled as the network's DHCP would have it. It waits
// until the server is Available, and makes a namespace named name for its claims.
func startEnrolled(t *testing.T, name string, system int) (*pool, string) {
	t.Helper()
	spec := testSystem(system)
	host, err := lab.PrepareHost("small-vm", t.TempDir(), spec.UUID)
	require.NoError(t, err)
	boots.AddHost(host)
	ip := enrolIP(system)
	sim, err := bmcsim.Start(bmcsim.Options{Addr: net.JoinHostPort(ip, strconv.Itoa(endpointPort)), Username: goodUser, Password: goodPassword,
		Systems: []bmcsim.SystemSpec{spec}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	sim.OnPowerOn(boots.PowerOn)
	createEnrolEndpoint(t, name, system)
	eventually(t, 60*time.Second, func() bool { return countServers(t, name, m.ServerStateAvailable) == 1 }, "the Endpoint's server is Available")
	createNamespace(t, name)
	return &pool{name: name, sim: sim, hosts: map[string]lab.Host{host.UUID: host}}, host.UUID
}

func enrolIP(system int) string { return fmt.Sprintf("127.3.%d.%d", system>>8&0xff, system&0xff) }

func createEnrolEndpoint(t *testing.T, name string, system int) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: m.EndpointSpec{MACAddress: fmt.Sprintf("%s:%02x", prefixEnrol, system&0xff), IP: enrolIP(system)}}))
}

// reach takes the machine, claimed with the tenant's data, to the point.
func (mc *machine) reach(t *testing.T, at point, wipeBoots int) {
	ctx := context.Background()
	switch at {
	case atCleanup:
		mc.holdBoots(t)
		releaseAndWait(t, mc.claim)
		waitServer(t, mc.name, m.ServerStateCleanup, 10*time.Second)
		mc.waitWipeBoots(t, wipeBoots)
	case atMaintenance, atRediscovery:
		mc.maint = &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: mc.ns, Name: "dimm"},
			Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: mc.name}, Reason: "replace a DIMM", Policy: m.MaintenanceEnforced, Power: m.PowerOff}}
		require.NoError(t, k8s.Create(ctx, mc.maint))
		waitServer(t, mc.name, m.ServerStateMaintenance, 20*time.Second)
		if at == atRediscovery {
			releaseAndWait(t, mc.claim)
			mc.holdBoots(t)
			mc.delete(t, mc.maint)
			eventually(t, 20*time.Second, func() bool {
				s := mc.server(t)
				return s != nil && s.Status.State == m.ServerStateDiscovery
			}, "re-discovered")
			mc.waitWipeBoots(t, 1)
		}
	case atInstall:
		eventually(t, 30*time.Second, func() bool {
			s := mc.server(t)
			return s != nil && s.Status.ProvisionAttempts > 0
		}, "the install boot is under way")
	}
}

func (mc *machine) holdBoots(t *testing.T) {
	boots.Hold(mc.host.UUID)
	t.Cleanup(func() { boots.Release(mc.host.UUID) })
}

func (mc *machine) releaseBoots() { boots.Release(mc.host.UUID) }

func releaseBoots(_ *testing.T, mc *machine) { mc.releaseBoots() }

// server is the machine's Server as it is now, or nil.
func (mc *machine) server(t *testing.T) *m.Server {
	var s m.Server
	err := k8s.Get(context.Background(), client.ObjectKey{Name: mc.name}, &s)
	if apierrors.IsNotFound(err) {
		return nil
	}
	require.NoError(t, err)
	return &s
}

// servers are the Servers of the machine, whatever their names.
func (mc *machine) servers(t *testing.T) []m.Server {
	var list m.ServerList
	require.NoError(t, k8s.List(context.Background(), &list))
	var out []m.Server
	for _, s := range list.Items {
		if strings.EqualFold(s.Spec.SystemUUID, mc.host.UUID) {
			out = append(out, s)
		}
	}
	return out
}

// pxeBoots is how many network boots the machine's BMC has done.
func (mc *machine) pxeBoots(t *testing.T) int {
	n := 0
	for _, ev := range mc.pool.sim.BootLog(systemID(t, &mc.old)) {
		if ev.Boot == bmcsim.BootPxe {
			n++
		}
	}
	return n
}

// waitWipeBoots waits until the machine's BMC has network-booted it n times since it was
// claimed: the wipe's boots reached the machine.
func (mc *machine) waitWipeBoots(t *testing.T, n int) {
	t.Helper()
	// A second wipe boot comes after the first's probe timeout.
	eventually(t, 30*time.Second+time.Duration(n)*operatorDeps.Discovery.Timeout, func() bool { return mc.pxeBoots(t) >= mc.pxeAtClaim+n }, "the machine's BMC network-booted it %d time(s) for the wipe", n)
}

// waitBootAfterAct waits until the machine's BMC network-boots it again after the deletions:
// the wipe needs the BMC (its address, its credentials) after its first boot was lost.
func (mc *machine) waitBootAfterAct(t *testing.T) {
	t.Helper()
	eventually(t, 30*time.Second, func() bool { return mc.pxeBoots(t) > mc.pxeAtAct }, "the machine's BMC network-boots it for the wipe again, after the deletions")
}

func (mc *machine) delete(t *testing.T, obj client.Object, opts ...client.DeleteOption) {
	t.Helper()
	require.NoError(t, k8s.Delete(context.Background(), obj, opts...))
}

func (mc *machine) gone(t *testing.T, obj client.Object, timeout time.Duration, what string) {
	t.Helper()
	key, uid := client.ObjectKeyFromObject(obj), obj.GetUID()
	if !assert.Eventually(t, func() bool {
		fresh := obj.DeepCopyObject().(client.Object)
		err := k8s.Get(context.Background(), key, fresh)
		return apierrors.IsNotFound(err) || (err == nil && uid != "" && fresh.GetUID() != uid)
	}, timeout, 50*time.Millisecond, what) {
		s := mc.server(t)
		if s == nil {
			s = &m.Server{}
		}
		mc.explain(t, s)
		t.FailNow()
	}
}

// waitsDeleted: the deleted Server is kept, in state, while the machine may hold the tenant's data.
func (mc *machine) waitsDeleted(t *testing.T, state m.ServerState, why string) {
	t.Helper()
	eventually(t, 10*time.Second, func() bool {
		s := mc.server(t)
		return s != nil && s.UID == mc.old.UID && !s.DeletionTimestamp.IsZero() && s.Status.State == state
	}, "the deleted server waits, %s, %s", state, why)
	// It says so (events are written asynchronously: a restarted manager's may take a moment on
	// a busy machine) ...
	told := func() []eventsv1.Event {
		var evs eventsv1.EventList
		require.NoError(t, k8s.List(context.Background(), &evs))
		var out []eventsv1.Event
		for _, e := range evs.Items {
			if e.Regarding.UID == mc.old.UID && e.Reason == m.ReasonWipeBeforeDeletion {
				out = append(out, e)
			}
		}
		return out
	}
	eventually(t, 10*time.Second, func() bool { return len(told()) > 0 }, "the deleted server records why it stays (%s)", m.ReasonWipeBeforeDeletion)
	assert.Never(t, func() bool {
		s := mc.server(t)
		return s == nil || s.UID != mc.old.UID
	}, time.Second, 100*time.Millisecond, "the deleted server stays while the machine may hold the tenant's data")
	// ... once, not at every look while it waits.
	if told := told(); assert.Len(t, told, 1, "the deleted server records why it stays, once") {
		assert.Nil(t, told[0].Series, "recorded once, not at each look")
	}
}

// bmcKeepsItsClaimedServer: the BMC goes, its claimed server is kept.
func (mc *machine) bmcKeepsItsClaimedServer(t *testing.T) {
	t.Helper()
	mc.gone(t, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 30*time.Second, "the BMC goes")
	s := mc.server(t)
	require.NotNil(t, s)
	assert.Equal(t, mc.old.UID, s.UID, "the claimed server is kept")
	assert.True(t, s.DeletionTimestamp.IsZero(), "and not deleted")
	assert.NotNil(t, s.Spec.ServerClaimRef, "it is still claimed")
}

// waitsForItsBMC: a released server whose BMC is gone waits in Cleanup and says why: no wipe
// attempt is used up on a BMC that is not there.
func (mc *machine) waitsForItsBMC(t *testing.T) {
	t.Helper()
	eventually(t, 20*time.Second, func() bool {
		s := mc.server(t)
		if s == nil {
			return false
		}
		c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
		return s.Status.State == m.ServerStateCleanup && c != nil && c.Status == metav1.ConditionFalse && strings.HasPrefix(c.Reason, "BMC")
	}, "the released server waits for its BMC, and says so")
	s := mc.server(t)
	require.NotNil(t, s)
	assert.Zero(t, s.Status.CleanupAttempts, "no wipe attempt is used up meanwhile")
}

// secretAgainIfGone: the admin makes the BMCSecret again, if it went, once its BMC's servers
// say they cannot reach their BMC.
func (mc *machine) secretAgainIfGone(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	err := k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &m.BMCSecret{})
	if err == nil {
		return // kept while its BMC needs it
	}
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	eventually(t, 20*time.Second, func() bool {
		s := mc.server(t)
		if s == nil {
			return false
		}
		c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "BMCSecret")
	}, "the server says its BMC's credentials are gone")
	createSecret(t, mc.ns, goodUser, goodPassword)
}

func deleteServer(opts ...client.DeleteOption) func(t *testing.T, mc *machine) {
	return func(t *testing.T, mc *machine) {
		mc.delete(t, &m.Server{ObjectMeta: metav1.ObjectMeta{Name: mc.name}}, opts...)
	}
}

func deleteBMC(opts ...client.DeleteOption) func(t *testing.T, mc *machine) {
	return func(t *testing.T, mc *machine) {
		mc.delete(t, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, opts...)
	}
}

func deleteEndpoint(opts ...client.DeleteOption) func(t *testing.T, mc *machine) {
	return func(t *testing.T, mc *machine) {
		mc.delete(t, &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, opts...)
	}
}

func deleteSecret(t *testing.T, mc *machine) {
	mc.delete(t, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}})
}

// deleteBoot deletes the server's probe boot configuration of purpose.
func deleteBoot(purpose m.BootPurpose) func(t *testing.T, mc *machine) {
	suffix := map[m.BootPurpose]string{m.BootPurposeCleanup: "-cleanup", m.BootPurposeProvisioning: "-provision", m.BootPurposeDiscovery: "-discovery"}[purpose]
	return func(t *testing.T, mc *machine) {
		mc.delete(t, &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: mc.name + suffix}})
	}
}

// enrolAgain makes again, once they are gone, what enrolled the machine: its Endpoint, or its
// BMCSecret and BMC.
func enrolAgain(t *testing.T, mc *machine) {
	t.Helper()
	ctx := context.Background()
	if mc.viaEndpoint {
		mc.gone(t, &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 60*time.Second, "the Endpoint goes")
		mc.gone(t, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 60*time.Second, "its BMC goes")
		createEnrolEndpoint(t, mc.ns, mc.system)
		return
	}
	mc.gone(t, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: mc.ns}}, 60*time.Second, "the BMC goes once its servers are wiped and gone")
	// A BMCSecret deleted with it goes after it (as kubectl delete waits for both).
	var secret m.BMCSecret
	err := k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &secret)
	if err == nil && !secret.DeletionTimestamp.IsZero() {
		mc.gone(t, &secret, 30*time.Second, "the deleted BMCSecret goes once its BMC is gone")
		err = apierrors.NewNotFound(m.GroupVersion.WithResource("bmcsecrets").GroupResource(), mc.ns)
	}
	if apierrors.IsNotFound(err) {
		createSecret(t, mc.ns, goodUser, goodPassword)
	}
	createDirectBMC(t, mc.ns, "redfish+http://"+mc.pool.sim.Host()+"/redfish/v1", mc.ns)
}

// bmcWaitsForTheWipe: the deleted BMC stays while its server is not wiped (the server deleted
// with it, waiting in Cleanup); then both go, and the machine is enrolled again.
func bmcWaitsForTheWipe(t *testing.T, mc *machine) {
	t.Helper()
	ctx := context.Background()
	assert.Never(t, func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &m.BMC{}))
	}, 2*time.Second, 100*time.Millisecond, "the BMC waits for its server's wipe")
	s := mc.server(t)
	require.NotNil(t, s)
	assert.False(t, s.DeletionTimestamp.IsZero(), "the server is deleted with its BMC")
	assert.Equal(t, m.ServerStateCleanup, s.Status.State, "and waits, in Cleanup, for its wipe")
	// The BMC says so, once: not at each of its looks while it waits.
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs))
	var waiting []eventsv1.Event
	for _, e := range evs.Items {
		if e.Regarding.Kind == "BMC" && e.Regarding.Name == mc.ns && e.Reason == m.ReasonWaitingForServers {
			waiting = append(waiting, e)
		}
	}
	if assert.Len(t, waiting, 1, "the deleted BMC records that it waits") {
		assert.Contains(t, waiting[0].Note, s.Name)
		assert.Nil(t, waiting[0].Series, "recorded once, not at each look")
	}
	mc.releaseBoots()
	enrolAgain(t, mc)
}

// endpointWaitsForTheWipe: the wipe goes on, booting the machine through the deleted
// Endpoint's BMC (which needs the Endpoint's address and the BMCSecret's credentials); the
// Endpoint, its BMC and BMCSecret go once it is wiped; the admin makes the Endpoint again.
func endpointWaitsForTheWipe(t *testing.T, mc *machine) {
	t.Helper()
	mc.waitBootAfterAct(t)
	mc.releaseBoots()
	enrolAgain(t, mc)
}

// explain logs what is known of the machine when it did not come back.
func (mc *machine) explain(t *testing.T, s *m.Server) {
	ctx := context.Background()
	var served []string
	for _, b := range boots.Boots() {
		if b.Server == mc.name {
			served = append(served, fmt.Sprintf("%s %s err=%v", b.Time.Format("15:04:05.000"), b.Purpose, b.Err))
		}
	}
	var b m.BMC
	_ = k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &b)
	t.Logf("BMC %s: uid %s deleted %v finalizers %v state %s conditions %+v", mc.ns, b.UID, b.DeletionTimestamp, b.Finalizers, b.Status.State, b.Status.Conditions)
	var sec m.BMCSecret
	t.Logf("BMCSecret %s: %v (deleted %v, finalizers %v)", mc.ns, k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &sec), sec.DeletionTimestamp, sec.Finalizers)
	if mc.viaEndpoint {
		var ep m.Endpoint
		t.Logf("Endpoint %s: %v (deleted %v, finalizers %v, conditions %+v)", mc.ns, k8s.Get(ctx, client.ObjectKey{Name: mc.ns}, &ep), ep.DeletionTimestamp, ep.Finalizers, ep.Status.Conditions)
	}
	var events eventsv1.EventList
	_ = k8s.List(ctx, &events)
	var notes []string
	for _, ev := range events.Items {
		if ev.Regarding.Name == mc.name || ev.Regarding.Name == mc.ns {
			notes = append(notes, fmt.Sprintf("%s %s/%s %s: %s", ev.CreationTimestamp.Format("15:04:05"), ev.Regarding.Kind, ev.Regarding.Name, ev.Reason, ev.Note))
		}
	}
	t.Logf("events: %s", strings.Join(notes, "\n  "))
	t.Logf("last seen: uid %s (old %s), deleted %v, finalizers %v, state %s (%s), conditions %+v; boots served: %v; power-ons: %v",
		s.UID, mc.old.UID, s.DeletionTimestamp, s.Finalizers, s.Status.State, s.Status.LastTransitionReason, s.Status.Conditions,
		served, mc.pool.sim.BootLog(systemID(t, &mc.old)))
}
