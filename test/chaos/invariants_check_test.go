package chaos

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// The checkers must be able to fail: each invariant, broken on purpose, is reported.

func server(name string, state m.ServerState, claim *m.ServerClaim) m.Server {
	s := m.Server{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
		Spec: m.ServerSpec{SystemUUID: "uuid-" + name}, Status: m.ServerStatus{State: state}}
	if claim != nil {
		s.Spec.ServerClaimRef = &m.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
	}
	if !settled(state) {
		s.Status.Conditions = []metav1.Condition{{Type: m.ConditionReady, Status: metav1.ConditionFalse, Reason: "Waiting", Message: "waiting for something"}}
	}
	return s
}

func boundClaim(name, serverName string) m.ServerClaim {
	return m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Status: m.ServerClaimStatus{Phase: m.ClaimPhaseBound, ServerRef: &m.LocalObjectReference{Name: serverName}}}
}

func bootOwnedBy(name, serverName, kind, owner string) m.ServerBootConfiguration {
	return m.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: owner, UID: types.UID("uid-" + owner)}}},
		Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: serverName}, Purpose: m.BootPurposeProvisioning}}
}

func invariantsOf(vs []violation) map[string]int {
	out := map[string]int{}
	for _, v := range vs {
		out[v.Invariant]++
	}
	return out
}

func never(string) time.Duration { return 0 }

func TestCheckSnapshotPassesAConsistentFleet(t *testing.T) {
	a := boundClaim("a", "s1")
	s := &snapshot{At: time.Now(),
		Servers: []m.Server{server("s1", m.ServerStateReserved, &a), server("s2", m.ServerStateCleanup, nil), server("s3", m.ServerStateAvailable, nil)},
		Claims:  []m.ServerClaim{a},
		Boots:   []m.ServerBootConfiguration{bootOwnedBy("a", "s1", "ServerClaim", "a"), bootOwnedBy("s2-cleanup", "s2", "Server", "s2")},
	}
	assert.Empty(t, checkSnapshot(s, never))
}

func TestCheckSnapshotCatchesEachBrokenInvariant(t *testing.T) {
	a, b := boundClaim("a", "s1"), boundClaim("b", "s1")
	c := boundClaim("c", "s2")
	stuck := server("s4", m.ServerStateDiscovery, nil)
	stuck.Status.Conditions = nil
	errored := server("s5", m.ServerStateError, nil)
	errored.Status.Conditions[0].Message = ""
	s := &snapshot{At: time.Now(),
		Servers: []m.Server{
			server("s1", m.ServerStateReserved, &a),
			server("s2", m.ServerStateReserved, &c), server("s3", m.ServerStateReserved, &c), // c held twice
			stuck, errored, server("s6", "", nil),
		},
		Claims: []m.ServerClaim{a, b, c},
		Boots: []m.ServerBootConfiguration{
			bootOwnedBy("gone", "s1", "ServerClaim", "deleted-claim"),
			{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "ownerless"}, Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "s1"}, Purpose: m.BootPurposeProvisioning}},
		},
	}
	got := invariantsOf(checkSnapshot(s, func(name string) time.Duration {
		if name == "s6" {
			return 2 * unenrolledGrace
		}
		return 0
	}))
	assert.Equal(t, map[string]int{
		invTwoClaims:  2, // b is Bound to s1, which a holds; and s1 has two Bound claims
		invTwoServers: 1,
		invOrphanBoot: 2,
		invStuck:      3, // no condition, an empty message, no state for a minute
	}, got)
}

func TestCheckSnapshotCatchesAClaimsImageForAnotherServer(t *testing.T) {
	a := boundClaim("a", "s1")
	s := &snapshot{At: time.Now(),
		Servers: []m.Server{server("s1", m.ServerStateReserved, &a), server("s2", m.ServerStateCleanup, nil)},
		Claims:  []m.ServerClaim{a},
		Boots:   []m.ServerBootConfiguration{bootOwnedBy("a", "s2", "ServerClaim", "a")},
	}
	assert.Equal(t, map[string]int{invBootElsewhere: 1}, invariantsOf(checkSnapshot(s, never)))
}

func TestCheckSnapshotCatchesAProbeBootForAServerAtRest(t *testing.T) {
	a := boundClaim("a", "s1")
	probe := bootOwnedBy("s1-cleanup", "s1", "Server", "s1")
	probe.Spec.Purpose = m.BootPurposeCleanup
	s := &snapshot{At: time.Now(), Servers: []m.Server{server("s1", m.ServerStateReserved, &a)}, Claims: []m.ServerClaim{a},
		Boots: []m.ServerBootConfiguration{probe}}
	assert.Equal(t, map[string]int{invProbeAtRest: 1}, invariantsOf(checkSnapshot(s, never)))
}

func TestCheckSnapshotCatchesABoundClaimItsServerDropped(t *testing.T) {
	a := boundClaim("a", "s1")
	s := &snapshot{At: time.Now(), Servers: []m.Server{server("s1", m.ServerStateAvailable, nil)}, Claims: []m.ServerClaim{a}}
	assert.Equal(t, map[string]int{invBindingSides: 1}, invariantsOf(checkSnapshot(s, never)))
}

// history replays a server's versions through a wipe tracker.
type history struct {
	t       *testing.T
	w       *wipeTracker
	deleted map[string]time.Time
	now     time.Time
	vs      []violation
}

func newHistory(t *testing.T) *history {
	h := &history{t: t, deleted: map[string]time.Time{}, now: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	h.w = newWipeTracker(func(uid string) (time.Time, bool) { at, ok := h.deleted[uid]; return at, ok })
	return h
}

func (h *history) see(s m.Server, after time.Duration) {
	h.now = h.now.Add(after)
	h.vs = append(h.vs, h.w.Observe(&s, h.now)...)
}

func wiped(s m.Server, at time.Time, ok bool) m.Server {
	s.Status.LastWipe = &m.WipeReport{ReportedAt: &metav1.Time{Time: at.Truncate(time.Second)}, Policy: m.WipeMetadata,
		Disks: []m.DiskWipe{{Name: "sda", Method: "metadata", Succeeded: ok}}}
	s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: m.ConditionCleaned, Status: metav1.ConditionTrue, Reason: "WipeVerified"})
	return s
}

func TestWipeTrackerPassesAWipedRelease(t *testing.T) {
	h := newHistory(t)
	c := boundClaim("a", "s1")
	h.see(server("s1", m.ServerStateAvailable, nil), 0)
	h.see(server("s1", m.ServerStateReserved, &c), time.Second)
	h.deleted[string(c.UID)] = h.now.Add(2 * time.Second)
	h.see(server("s1", m.ServerStateCleanup, nil), 3*time.Second)
	wipeStart := h.now.Add(500 * time.Millisecond)
	h.see(wiped(server("s1", m.ServerStateAvailable, nil), h.now.Add(time.Second), true), 2*time.Second)
	assert.Empty(t, h.vs)
	assert.Empty(t, h.w.Verify([]wipeRun{{UUID: "uuid-s1", Start: wipeStart, End: wipeStart.Add(100 * time.Millisecond)}}))
}

func TestWipeTrackerCatchesAReleasedServerPooledUnwiped(t *testing.T) {
	// Taken into maintenance from its claim, the claim deleted meanwhile, re-discovered
	// without a wipe: Available with no wipe at all.
	h := newHistory(t)
	c := boundClaim("a", "s1")
	h.see(server("s1", m.ServerStateReserved, &c), 0)
	h.see(server("s1", m.ServerStateMaintenance, &c), time.Second)
	h.deleted[string(c.UID)] = h.now.Add(time.Second)
	h.see(server("s1", m.ServerStateMaintenance, nil), 2*time.Second)
	h.see(server("s1", m.ServerStateInitial, nil), time.Second)
	h.see(server("s1", m.ServerStateDiscovery, nil), time.Second)
	h.see(server("s1", m.ServerStateAvailable, nil), time.Second)
	require.Len(t, h.vs, 1)
	assert.Equal(t, invUnwiped, h.vs[0].Invariant)
	assert.Len(t, h.w.Verify(nil), 1, "and no wipe boot ran for it")
}

func TestWipeTrackerCatchesAStaleWipeReport(t *testing.T) {
	h := newHistory(t)
	c := boundClaim("a", "s1")
	before := h.now
	h.see(wiped(server("s1", m.ServerStateAvailable, nil), before, true), 0)
	h.see(wiped(server("s1", m.ServerStateReserved, &c), before, true), 3*time.Second)
	h.deleted[string(c.UID)] = h.now.Add(2 * time.Second)
	h.see(wiped(server("s1", m.ServerStateAvailable, nil), before, true), 5*time.Second)
	require.Len(t, h.vs, 1, "the report predates the claim's deletion")
	assert.Contains(t, h.vs[0].Detail, "predates")
}

func TestWipeTrackerVerifyCatchesALateReportOfAnOlderWipe(t *testing.T) {
	// The API looks right (a report received after the release), but the only wipe boot that
	// reported started before the claim was deleted: its report arrived late.
	h := newHistory(t)
	c := boundClaim("a", "s1")
	h.see(server("s1", m.ServerStateReserved, &c), 0)
	oldWipe := h.now.Add(-time.Minute)
	h.deleted[string(c.UID)] = h.now.Add(time.Second)
	h.see(server("s1", m.ServerStateCleanup, nil), 2*time.Second)
	h.see(wiped(server("s1", m.ServerStateAvailable, nil), h.now.Add(time.Second), true), 2*time.Second)
	assert.Empty(t, h.vs)
	runs := []wipeRun{
		{UUID: "uuid-s1", Start: oldWipe, End: h.now},
		{UUID: "uuid-s1", Start: h.deleted[string(c.UID)].Add(-time.Second), End: h.now, Err: errors.New("registry answered 403")},
		{UUID: "uuid-s2", Start: h.now.Add(-time.Second), End: h.now}, // another host's
	}
	assert.Len(t, h.w.Verify(runs), 1)
}

func TestWipeTrackerCatchesAFailedDisk(t *testing.T) {
	h := newHistory(t)
	c := boundClaim("a", "s1")
	h.see(server("s1", m.ServerStateReserved, &c), 0)
	h.deleted[string(c.UID)] = h.now.Add(time.Second)
	h.see(server("s1", m.ServerStateCleanup, nil), 2*time.Second)
	h.see(wiped(server("s1", m.ServerStateAvailable, nil), h.now.Add(time.Second), false), 2*time.Second)
	require.Len(t, h.vs, 1)
	assert.Contains(t, h.vs[0].Detail, "not wiped")
}

// A probe boot has no owner (a foreground deletion of its Server must not take it mid-wipe): it
// passes while its Server is there, and is an orphan, with its ignition Secret, once it is gone.
func TestCheckSnapshotCatchesAProbeBootOfAGoneServer(t *testing.T) {
	probe := m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "ironfleet-system", Name: "s1-cleanup",
		Labels: map[string]string{m.LabelServer: "s1"}, Annotations: map[string]string{m.AnnotationProbeBoot: "b1"}},
		Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "s1"}, Purpose: m.BootPurposeCleanup}}
	ignition := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ironfleet-system", Name: "s1-cleanup-ignition",
		Labels: map[string]string{m.LabelServer: "s1"}}}
	s := &snapshot{At: time.Now(), Servers: []m.Server{server("s1", m.ServerStateCleanup, nil)},
		Boots: []m.ServerBootConfiguration{probe}, Secrets: []corev1.Secret{ignition}}
	assert.Empty(t, checkSnapshot(s, never))
	s.Servers = nil
	assert.Equal(t, map[string]int{invOrphanBoot: 2}, invariantsOf(checkSnapshot(s, never)))
}
