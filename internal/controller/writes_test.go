package controller_test

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// activeWorkers is how many reconciles of the named controller are under way.
func activeWorkers(t *testing.T, name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "controller_runtime_active_workers" {
			continue
		}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					return metric.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// reconciled waits until a reconcile of kind/name has begun after the mark and the controller
// has none under way (so that one has ended and its requests are all in the log), and returns
// the reconciles since the mark.
func reconciled(t *testing.T, l *requestLog, mark requestMark, controllerName, kind, name string) []reconcileRecord {
	t.Helper()
	eventually(t, 20*time.Second, func() bool { return len(l.Reconciles(mark, kind, name)) > 0 }, "%s %s is reconciled", kind, name)
	eventually(t, 20*time.Second, func() bool { return activeWorkers(t, controllerName) == 0 }, "the %s controller is idle", controllerName)
	return l.Reconciles(mark, kind, name)
}

// writesOf are the mutating requests of the reconciles, by "METHOD resource".
func writesOf(rs []reconcileRecord) []string {
	var out []string
	for _, r := range rs {
		for _, q := range r.Writes() {
			out = append(out, q.Method+" "+q.Resource())
		}
	}
	return out
}

// describe lists each reconcile's writes, for failure messages.
func describe(rs []reconcileRecord) string {
	var b strings.Builder
	for i, r := range rs {
		fmt.Fprintf(&b, "reconcile %d of %s %s:\n", i, r.Kind, r.Key)
		for _, q := range r.Writes() {
			fmt.Fprintf(&b, "    %s\n", q)
		}
	}
	return b.String()
}

// assertOneStatusWriteEach: no reconcile writes the status of its own object more than once.
func assertOneStatusWriteEach(t *testing.T, rs []reconcileRecord, resource string) {
	t.Helper()
	for i, r := range rs {
		n := 0
		for _, q := range r.Writes() {
			if q.Resource() == resource {
				n++
			}
		}
		assert.LessOrEqual(t, n, 1, "reconcile %d writes %s at most once:\n%s", i, resource, describe(rs))
	}
}

// annotate sets an annotation on obj, which wakes its reconciler without changing its spec.
func annotate(t *testing.T, obj client.Object, value string) {
	t.Helper()
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.ironfleet.dev/touch":%q}}}`, value)))
	require.NoError(t, k8s.Patch(context.Background(), obj, patch))
}

// TestOneWritePerTransition counts the requests each reconcile sends to the apiserver, through a
// counting transport around the operator's rest.Config: a claim from Pending to Bound, a BMC
// from an Endpoint to Enabled, a maintenance from Pending to InMaintenance and back, and the
// claim's release. Each transition is one status write of the object's own (binding adds the
// claim's intent, which its concurrency protocol needs, and the server's reference); a reconcile
// that finds nothing new writes nothing.
func TestOneWritePerTransition(t *testing.T) {
	ctx := context.Background()
	l := recordOperatorRequests(t)
	const system = 610
	serverName := strings.ToLower(testSystem(system).UUID)

	// A claim for a server that is not there yet: Pending, NoMatchingServer, in one reconcile
	// that adds the finalizer and writes status once.
	createNamespace(t, "writes")
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "writes", Name: "web"},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: serverName}}}
	mark := l.Mark()
	require.NoError(t, k8s.Create(ctx, claim))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		c := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound)
		return claim.Status.Phase == m.ClaimPhasePending && c != nil && c.Reason == m.ClaimReasonNoMatchingServer
	}, "the claim is Pending, NoMatchingServer")
	rs := reconciled(t, l, mark, "serverclaim", "ServerClaim", "web")
	assert.Equal(t, []string{"PUT serverclaims", "PATCH serverclaims/status"}, writesOf(rs), "the new claim: its finalizer, then its status once\n%s", describe(rs))

	// Nothing new: a reconcile writes nothing.
	mark = l.Mark()
	annotate(t, claim, "idle-1")
	rs = reconciled(t, l, mark, "serverclaim", "ServerClaim", "web")
	assert.Empty(t, writesOf(rs), "an idle claim reconcile writes nothing\n%s", describe(rs))

	// The server is enrolled through its Endpoint (BMC → Enabled), discovered, and bound.
	mark = l.Mark()
	enrolThroughEndpoint(t, "writes-bmc", system)
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return claim.Status.Phase == m.ClaimPhaseBound && meta.IsStatusConditionTrue(claim.Status.Conditions, m.ConditionReady)
	}, "the claim is Bound and Ready")

	// The BMC: its status written once, on its way to Enabled (no Unreachable detour while
	// its Endpoint recorded the match), and nothing else of its own; each system's Server
	// created once.
	rs = reconciled(t, l, mark, "bmc", "BMC", "writes-bmc")
	var bmcWrites, serverCreates []string
	for _, w := range writesOf(rs) {
		switch {
		case strings.Contains(w, " bmcs"):
			bmcWrites = append(bmcWrites, w)
		case w == "POST servers (collection)":
			serverCreates = append(serverCreates, w)
		}
	}
	assert.Equal(t, []string{"PATCH bmcs/status"}, bmcWrites, "the BMC writes its own status once, Pending → Enabled\n%s", describe(rs))
	assert.Len(t, serverCreates, 1, "one Server for its one system")
	for _, r := range rs {
		for _, q := range r.Writes() {
			assert.NotContains(t, q.Body, m.BMCReasonUnreachable, "the BMC never showed its Endpoint's match as a failure")
		}
	}
	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "writes-bmc"}, &b))
	assert.Equal(t, m.BMCStateEnabled, b.Status.State)

	// The claim: the reconcile that bound it wrote its intent, the server's reference and its
	// power (one patch), and its status; the server's news (Reserved) cost one status write more.
	rs = reconciled(t, l, mark, "serverclaim", "ServerClaim", "web")
	assertOneStatusWriteEach(t, filterOut(rs, isBinding), "serverclaims/status")
	var binding []reconcileRecord
	for _, r := range rs {
		if isBinding(r) {
			binding = append(binding, r)
		}
	}
	if assert.Len(t, binding, 1, "one reconcile bound the claim\n%s", describe(rs)) {
		assert.Equal(t, []string{"PATCH serverclaims/status", "PATCH servers", "PATCH serverclaims/status"}, writesOf(binding),
			"binding: the claim's intent, the server's claim reference, the claim's status")
		serverPatch := binding[0].Writes()[1]
		assert.Contains(t, serverPatch.Body, "serverClaimRef")
		assert.Contains(t, serverPatch.Body, `"path":"/spec/power","value":"On"`, "the claim's power goes with its reference")
	}
	assert.Equal(t, []string{"PATCH serverclaims/status", "PATCH servers", "PATCH serverclaims/status", "PATCH serverclaims/status"}, writesOf(rs),
		"Pending → Bound → Ready: the intent, the server's reference, Bound, then Ready once the server is Reserved\n%s", describe(rs))

	mark = l.Mark()
	annotate(t, claim, "idle-2")
	rs = reconciled(t, l, mark, "serverclaim", "ServerClaim", "web")
	assert.Empty(t, writesOf(rs), "an idle bound claim reconcile writes nothing\n%s", describe(rs))

	// An idle BMC poll writes nothing either, once the server's status shows what the BMC says
	// (its identity, written by a poll, and its power).
	eventually(t, 30*time.Second, func() bool {
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: serverName}, &s))
		return s.Status.PowerState == m.PowerStateOn && s.Status.SerialNumber == testSystem(system).SerialNumber
	}, "the claimed server is seen On, with the BMC's identity")
	mark = l.Mark()
	var secret m.BMCSecret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "writes-bmc"}, &secret))
	secret.Labels = map[string]string{"touch": "idle"}
	require.NoError(t, k8s.Update(ctx, &secret))
	rs = reconciled(t, l, mark, "bmc", "BMC", "writes-bmc")
	assert.Empty(t, writesOf(rs), "an idle BMC poll writes nothing\n%s", describe(rs))

	// A maintenance, Pending → InMaintenance: its finalizer, the server's reference, and one
	// status write per state.
	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "writes", Name: "fw"},
		Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: serverName}, Reason: "firmware", Policy: m.MaintenanceEnforced}}
	mark = l.Mark()
	require.NoError(t, k8s.Create(ctx, sm))
	waitServer(t, serverName, m.ServerStateMaintenance, 20*time.Second)
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(sm), sm))
		return sm.Status.State == m.MaintenanceStateInMaintenance
	}, "the maintenance is InMaintenance")
	rs = reconciled(t, l, mark, "servermaintenance", "ServerMaintenance", "fw")
	assertOneStatusWriteEach(t, rs, "servermaintenances/status")
	assert.Equal(t, []string{"PUT servermaintenances", "PATCH servers", "PATCH servermaintenances/status", "PATCH servermaintenances/status"}, writesOf(rs),
		"the finalizer, the server taken, Pending, InMaintenance\n%s", describe(rs))
	assert.Greater(t, len(rs), 2, "the server's moves woke the maintenance more often than it wrote")

	mark = l.Mark()
	annotate(t, sm, "idle")
	rs = reconciled(t, l, mark, "servermaintenance", "ServerMaintenance", "fw")
	assert.Empty(t, writesOf(rs), "an idle maintenance reconcile writes nothing\n%s", describe(rs))

	// And back: the server's reference cleared, the finalizer removed; no status for an object
	// that goes.
	mark = l.Mark()
	require.NoError(t, k8s.Delete(ctx, sm))
	eventually(t, 20*time.Second, func() bool { return k8s.Get(ctx, client.ObjectKeyFromObject(sm), sm) != nil }, "the maintenance is gone")
	waitServer(t, serverName, m.ServerStateReserved, 20*time.Second)
	rs = reconciled(t, l, mark, "servermaintenance", "ServerMaintenance", "fw")
	assert.Equal(t, []string{"PATCH servers", "PUT servermaintenances"}, writesOf(rs), "giving the server back\n%s", describe(rs))

	// The claim's release: Releasing written once, before anything is released (a claim that
	// says Bound holds its server), the server released, the finalizer removed. The probe
	// installs the claim's image, so the claim made no boot configuration, and none is deleted
	// by name on the off chance.
	mark = l.Mark()
	releaseAndWait(t, claim)
	rs = reconciled(t, l, mark, "serverclaim", "ServerClaim", "web")
	assert.Equal(t, []string{"PATCH serverclaims/status", "PATCH servers", "PUT serverclaims"}, writesOf(rs), "the release\n%s", describe(rs))
	if w := rs[0].Writes(); len(w) > 0 {
		assert.Contains(t, w[0].Body, `"phase":"Releasing"`)
	}
	waitServer(t, serverName, m.ServerStateAvailable, 60*time.Second)

	// The server's side of the release: Cleanup with its power-off (sent before the write that
	// records it), the wipe boot and the power-on it sent, then Available with its power-off;
	// the moment the boot service takes to mark the wipe's boot configuration Ready is not
	// written.
	eventually(t, 20*time.Second, func() bool { return activeWorkers(t, "server") == 0 }, "the server controller is idle")
	var serverWrites []string
	for _, r := range l.Reconciles(mark, "Server", serverName) {
		for _, q := range r.Writes() {
			if q.Resource() != "servers/status" {
				continue
			}
			serverWrites = append(serverWrites, q.Body)
			assert.NotContains(t, q.Body, m.ReasonWaitingForBootService, "a moment's wait for the boot service is not written")
			if !strings.Contains(q.Body, `"resourceVersion"`) {
				assert.NotContains(t, q.Body, "PoweringOff", "a power-off is recorded with its step")
			}
		}
	}
	assert.LessOrEqual(t, len(serverWrites), 4, "released, wipe booted (and its power-on), wiped and Available:\n%s", strings.Join(serverWrites, "\n"))
}

// enrolThroughEndpoint starts a simulated BMC of one bootable small server, at a loopback
// address of its own on prefixEnrol's port, and creates an Endpoint for it, as the network's
// DHCP would; unlike startEnrolled it does not wait (a claim may take the server the moment it
// is Available).
func enrolThroughEndpoint(t *testing.T, name string, system int) {
	t.Helper()
	spec := testSystem(system)
	host, err := lab.PrepareHost("small-vm", t.TempDir(), spec.UUID)
	require.NoError(t, err)
	boots.AddHost(host)
	sim, err := bmcsim.Start(bmcsim.Options{Addr: net.JoinHostPort(enrolIP(system), strconv.Itoa(endpointPort)),
		Username: goodUser, Password: goodPassword, Systems: []bmcsim.SystemSpec{spec}})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = k8s.Delete(context.Background(), &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = sim.Close()
	})
	sim.OnPowerOn(boots.PowerOn)
	createEnrolEndpoint(t, name, system)
}

// isBinding says whether a claim reconcile bound its claim: it patched a server's spec between
// two status writes of its claim.
func isBinding(r reconcileRecord) bool {
	w := r.Writes()
	return len(w) == 3 && w[1].Method == "PATCH" && w[1].Resource() == "servers"
}

func filterOut(rs []reconcileRecord, drop func(reconcileRecord) bool) []reconcileRecord {
	var out []reconcileRecord
	for _, r := range rs {
		if !drop(r) {
			out = append(out, r)
		}
	}
	return out
}

// TestRequestsPerEnrolledServer measures what enrolling a server costs the apiserver, as
// test/bench does (an Endpoint per BMC, a system per BMC, through discovery to Available), and
// logs where each request comes from. The BMC reconciler's share is checked exactly: one status
// write per BMC and the Server's create; no failure shown (nor its event) while the Endpoint
// recorded its match. The Server reconciler's: one status write per step, and one record of
// the BMC action the step took.
func TestRequestsPerEnrolledServer(t *testing.T) {
	ctx := context.Background()
	l := recordOperatorRequests(t)
	const n = 3
	mark := l.Mark()
	start := time.Now()
	for i := 0; i < n; i++ {
		startEnrolled(t, fmt.Sprintf("per-server-%d", i), 600+i)
	}
	reqs := l.Since(mark)
	var b strings.Builder
	fmt.Fprintf(&b, "%d requests for %d servers (%.1f each):\n%s", len(reqs), n, float64(len(reqs))/n, summarize(reqs))
	// By reconciler, for this test's objects only (in a full run other tests' BMCs are still
	// polled, and fail once their simulators are gone).
	ours := map[string]bool{}
	for i := 0; i < n; i++ {
		ours[fmt.Sprintf("per-server-%d", i)] = true
		ours[strings.ToLower(testSystem(600+i).UUID)] = true
	}
	for _, kind := range []string{"Endpoint", "BMC", "Server"} {
		var all []apiRequest
		reconciles := 0
		for _, r := range l.Reconciles(mark, kind, "") {
			if ours[r.Key.Name] {
				reconciles++
				all = append(all, r.Requests...)
			}
		}
		fmt.Fprintf(&b, "%s reconciler: %d reconciles, %d requests:\n%s", kind, reconciles, len(all), summarize(all))
	}
	var outside []apiRequest
	for _, q := range reqs {
		if q.Reconcile == "" {
			outside = append(outside, q)
		}
	}
	fmt.Fprintf(&b, "outside reconciles (cache, events, registry; in a full run, other tests' too): %d:\n%s", len(outside), summarize(outside))
	t.Log(b.String())

	for i := 0; i < n; i++ {
		name := fmt.Sprintf("per-server-%d", i)
		rs := l.Reconciles(mark, "BMC", name)
		var own []string
		for _, w := range writesOf(rs) {
			if strings.Contains(w, " bmcs") {
				own = append(own, w)
			}
		}
		assert.Equal(t, []string{"PATCH bmcs/status"}, own, "%s: one status write, Pending → Enabled\n%s", name, describe(rs))
	}
	// The Server reconciler: each reconcile writes its status once for its step (under the
	// optimistic lock), and once more only to record a boot it took after that write (the
	// power sent, and seen when the BMC shows it at once); never the Server's metadata (the
	// probe boot is named in status). Enrollment is: Discovery with the probe boot it named and
	// the power-on it sent, then Available with the power-off it sent (sent before the write,
	// which records it). The moment the boot service takes to mark the boot configuration Ready
	// is not written (no Initial of its own), nor is a power-off recorded apart from its step.
	for i := 0; i < n; i++ {
		name := strings.ToLower(testSystem(600 + i).UUID)
		rs := l.Reconciles(mark, "Server", name)
		total := 0
		for j, r := range rs {
			var locked, records int
			for _, q := range r.Writes() {
				switch q.Resource() {
				case "servers":
					t.Errorf("server %s: reconcile %d writes the Server's metadata: %s", name, j, q)
				case "servers/status":
					total++
					assert.NotContains(t, q.Body, m.ReasonWaitingForBootService, "server %s: reconcile %d writes a moment's wait for the boot service\n%s", name, j, describe(rs))
					if strings.Contains(q.Body, `"resourceVersion"`) {
						locked++
						assert.Zero(t, records, "server %s: reconcile %d records a BMC action before its step's write\n%s", name, j, describe(rs))
					} else {
						records++
						assert.NotContains(t, q.Body, "PoweringOff", "server %s: reconcile %d records a power-off apart from its step\n%s", name, j, describe(rs))
					}
				}
			}
			assert.LessOrEqual(t, locked, 1, "server %s: reconcile %d writes its step once\n%s", name, j, describe(rs))
			assert.LessOrEqual(t, records, locked, "server %s: reconcile %d records only the BMC action of its own step\n%s", name, j, describe(rs))
		}
		assert.LessOrEqual(t, total, 3, "server %s: 3 status writes from enrolment to Available\n%s", name, describe(rs))
	}
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs))
	for _, e := range evs.Items {
		if e.Regarding.Kind == "BMC" && strings.HasPrefix(e.Regarding.Name, "per-server-") && e.CreationTimestamp.After(start.Add(-time.Second)) {
			assert.Equal(t, "ServerCreated", e.Reason, "the enrolled BMC's only event is its Server's creation: %s", e.Note)
		}
	}
}
