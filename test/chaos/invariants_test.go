package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// The invariants, by the names violations are reported under: the five of issue #9 first,
// then four that the same observations decide and that a crash could break as well.

const (
	invTwoClaims  = "server referenced by two claims"
	invTwoServers = "claim bound to two servers"
	invOrphanBoot = "boot configuration without a live owner"
	invUnwiped    = "released server Available before its wipe was verified"
	invStuck      = "server stuck without a condition saying why"

	invBindingSides  = "bound claim and its server disagree"
	invNeverBooted   = "claim Ready but its image never booted"
	invBootElsewhere = "claim's boot configuration boots a server it does not hold"
	invProbeAtRest   = "probe boot configuration for a server at rest"
)

// violation is one invariant broken at one observation.
type violation struct {
	At        time.Time
	Invariant string
	// Detail names the objects involved and what was seen.
	Detail string
}

func (v violation) String() string {
	return fmt.Sprintf("%s  %s: %s", v.At.Format("15:04:05.000"), v.Invariant, v.Detail)
}

// snapshot is one consistent observation: every list was read at the same resourceVersion, so
// that a claim deleted between two lists is not mistaken for a broken invariant.
type snapshot struct {
	At      time.Time
	RV      string
	Servers []m.Server
	Claims  []m.ServerClaim
	Boots   []m.ServerBootConfiguration
	Maints  []m.ServerMaintenance
	Secrets []corev1.Secret // in the system namespace: probe boots' ignition
	Elapsed time.Duration   // how long reading the snapshot took
	// ServersElapsed is how long of that listing Servers took (none when the watch had them).
	ServersElapsed time.Duration
}

// settled states are where a server rests until someone acts (as the server reconciler says).
func settled(s m.ServerState) bool {
	switch s {
	case m.ServerStateAvailable, m.ServerStateReserved, m.ServerStateMaintenance:
		return true
	}
	return false
}

// unenrolledGrace is how long a new Server may stay without a state (and so without any
// condition) once the kills have stopped. The BMC reconciler creates it with no status; the
// server reconciler's first look at it may wait: a restarted manager queues every object of its
// initial list at low priority, behind the work the fleet's events bring.
const unenrolledGrace = time.Minute

// checkSnapshot checks the invariants that one consistent observation can decide.
// unenrolledFor says how long a server has been seen without a state.
func checkSnapshot(s *snapshot, unenrolledFor func(name string) time.Duration) []violation {
	var out []violation
	add := func(inv, format string, args ...any) {
		out = append(out, violation{At: s.At, Invariant: inv, Detail: fmt.Sprintf(format, args...) + " (rv " + s.RV + ")"})
	}
	servers := map[string]*m.Server{}
	for i := range s.Servers {
		servers[s.Servers[i].Name] = &s.Servers[i]
	}
	claims := map[string]*m.ServerClaim{}
	for i := range s.Claims {
		c := &s.Claims[i]
		claims[c.Namespace+"/"+c.Name] = c
	}

	// A server is referenced by a claim through the claim's status (Bound to it) and held by
	// one through its spec.serverClaimRef; both sides must name one and the same claim.
	boundTo := map[string][]string{}
	for _, c := range s.Claims {
		if c.Status.Phase != m.ClaimPhaseBound || c.Status.ServerRef == nil {
			continue
		}
		key := c.Namespace + "/" + c.Name
		boundTo[c.Status.ServerRef.Name] = append(boundTo[c.Status.ServerRef.Name], key)
		srv := servers[c.Status.ServerRef.Name]
		switch {
		case srv == nil:
			add(invBindingSides, "claim %s is Bound to server %s, which does not exist", key, c.Status.ServerRef.Name)
		case srv.Spec.ServerClaimRef == nil:
			add(invBindingSides, "claim %s is Bound to server %s, which holds no claim (state %s)", key, srv.Name, srv.Status.State)
		case !refersTo(srv.Spec.ServerClaimRef, &c):
			ref := srv.Spec.ServerClaimRef
			add(invTwoClaims, "claim %s is Bound to server %s, which is held by claim %s/%s (uid %s)", key, srv.Name, ref.Namespace, ref.Name, ref.UID)
		}
	}
	for _, name := range sortedKeys(boundTo) {
		if cs := boundTo[name]; len(cs) > 1 {
			add(invTwoClaims, "server %s: claims %s are all Bound to it", name, strings.Join(cs, ", "))
		}
	}

	holders := map[string][]string{}
	for _, srv := range s.Servers {
		if ref := srv.Spec.ServerClaimRef; ref != nil {
			key := ref.Namespace + "/" + ref.Name + " (uid " + ref.UID + ")"
			holders[key] = append(holders[key], srv.Name)
		}
	}
	for _, key := range sortedKeys(holders) {
		if ss := holders[key]; len(ss) > 1 {
			add(invTwoServers, "claim %s is held by servers %s", key, strings.Join(ss, ", "))
		}
	}

	// Every boot configuration (and every probe boot's ignition Secret) has owners, and they
	// exist: envtest has no garbage collector, so nothing would ever remove an orphan.
	ownerLive := func(ns string, ref metav1.OwnerReference) bool {
		switch ref.Kind {
		case "Server":
			o := servers[ref.Name]
			return o != nil && o.UID == ref.UID
		case "ServerClaim":
			o := claims[ns+"/"+ref.Name]
			return o != nil && o.UID == ref.UID
		}
		return false
	}
	for _, b := range s.Boots {
		key := b.Namespace + "/" + b.Name
		// A claim's boot configuration is owned by its claim; a probe boot is owned by no one
		// (a foreground deletion of its Server must not take it mid-wipe: docs/deletion.md) and
		// is labelled with its Server, which must exist (below).
		if len(b.OwnerReferences) == 0 && b.Labels[m.LabelServer] != b.Spec.ServerRef.Name {
			add(invOrphanBoot, "boot configuration %s (%s, server %s) has no owner and is not labelled as that server's probe boot", key, b.Spec.Purpose, b.Spec.ServerRef.Name)
		}
		for _, ref := range b.OwnerReferences {
			if !ownerLive(b.Namespace, ref) {
				add(invOrphanBoot, "boot configuration %s (%s, server %s): owner %s %s (uid %s) is gone", key, b.Spec.Purpose, b.Spec.ServerRef.Name, ref.Kind, ref.Name, ref.UID)
			}
		}
		srv := servers[b.Spec.ServerRef.Name]
		if srv == nil {
			add(invOrphanBoot, "boot configuration %s boots server %s, which does not exist", key, b.Spec.ServerRef.Name)
			continue
		}
		// A probe boot lives from the start of a discovery or cleanup to its end; a server at
		// rest that PXE-boots (a claim's image, a pending one-time boot) would be served it.
		if b.Spec.Purpose != m.BootPurposeProvisioning && settled(srv.Status.State) {
			add(invProbeAtRest, "%s boot configuration %s exists while server %s is %s", b.Spec.Purpose, key, srv.Name, srv.Status.State)
		}
		// A claim's image is for the server it holds (until it is deleted: the release frees
		// the server first, then deletes the boot configuration).
		for _, ref := range b.OwnerReferences {
			c := claims[b.Namespace+"/"+ref.Name]
			if ref.Kind != "ServerClaim" || c == nil || c.UID != ref.UID || !c.DeletionTimestamp.IsZero() {
				continue
			}
			if held := srv.Spec.ServerClaimRef; held == nil || held.UID != string(c.UID) {
				add(invBootElsewhere, "boot configuration %s of claim %s/%s boots server %s (%s), which holds %s", key, c.Namespace, c.Name, srv.Name, srv.Status.State, describeRef(held))
			}
		}
	}
	for _, sec := range s.Secrets {
		if name := sec.Labels[m.LabelServer]; name != "" && servers[name] == nil {
			add(invOrphanBoot, "ignition Secret %s/%s of server %s, which does not exist", sec.Namespace, sec.Name, name)
		}
		for _, ref := range sec.OwnerReferences {
			if ref.Kind == "Server" && !ownerLive(sec.Namespace, ref) {
				add(invOrphanBoot, "ignition Secret %s/%s: owner Server %s (uid %s) is gone", sec.Namespace, sec.Name, ref.Name, ref.UID)
			}
		}
	}

	// A server on its way somewhere (or in Error) says why in its Ready condition.
	for _, srv := range s.Servers {
		st := srv.Status.State
		if st == "" {
			if d := unenrolledFor(srv.Name); d > unenrolledGrace {
				add(invStuck, "server %s has had no state (and no condition) for %v", srv.Name, d.Round(time.Second))
			}
			continue
		}
		if settled(st) {
			continue
		}
		ready := meta.FindStatusCondition(srv.Status.Conditions, m.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason == "" || ready.Message == "" {
			add(invStuck, "server %s is %s but its Ready condition does not say why: %s", srv.Name, st, describeCondition(ready))
		}
	}
	return out
}

func refersTo(ref *m.ObjectReference, c *m.ServerClaim) bool {
	return ref.Namespace == c.Namespace && ref.Name == c.Name && (ref.UID == "" || ref.UID == string(c.UID))
}

func describeCondition(c *metav1.Condition) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprintf("%s=%s reason %q message %q", c.Type, c.Status, c.Reason, c.Message)
}

func sortedKeys[V any](mp map[string]V) []string {
	keys := make([]string, 0, len(mp))
	for k := range mp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// wipeRun is one probe boot in wipe mode, as the lab's boot service ran it. The instant probe
// "wipes" (and collects its report) when it starts, before it posts; Err is how the posting
// ended (a registry that stored the report and died before answering leaves the probe
// retrying into an error, so Err says nothing about whether the wipe happened).
type wipeRun struct {
	UUID       string
	Start, End time.Time
	Err        error
}

// release is one claim's tenure of a server ending: from the moment its claim was deleted (the
// earliest the server can have been released) to the moment the server was seen Available.
type release struct {
	Server, UUID string
	Claim        m.ObjectReference
	// Deleted is when the workload asked to delete the claim; Known is false when it never did.
	Deleted time.Time
	Known   bool
	// Available is when the server's first Available version after the claim was observed.
	Available time.Time
}

// wipeTracker follows every version of every Server (from a watch, so no state is missed) and
// checks that a server once Reserved is not Available again before a wipe done after its
// release was verified.
//
// Two checks, one per source of truth:
//   - the API (at once, at the Available version): Cleaned=True, and status.lastWipe was
//     received no earlier than the claim's deletion and reports every disk wiped;
//   - the lab (at the end, Verify): a wipe-mode probe boot of that host started (and so
//     wiped) after the claim's deletion and before the server was seen Available. This
//     catches a stale report (an older wipe's, delivered late) being taken for this one.
type wipeTracker struct {
	inUse map[string]*m.ObjectReference // server → the claim it was last Reserved for
	// history keeps each server's last transitions, to say how a violation came about.
	history    map[string][]string
	probeBoots map[string]string
	// heldSince is when each server was first seen holding each claim (server/claim UID).
	heldSince map[string]time.Time
	// claimDeleted says when the workload deleted the claim with this UID.
	claimDeleted func(uid string) (time.Time, bool)
	// hostOf names the host behind a server, as wipe runs name it (lab.Host.UUID); nil: its
	// spec.systemUUID.
	hostOf   func(*m.Server) string
	Releases []release
}

func newWipeTracker(claimDeleted func(uid string) (time.Time, bool)) *wipeTracker {
	return &wipeTracker{inUse: map[string]*m.ObjectReference{}, history: map[string][]string{}, heldSince: map[string]time.Time{}, claimDeleted: claimDeleted}
}

// Observe takes the next version of a server, seen at at.
func (w *wipeTracker) Observe(s *m.Server, at time.Time) []violation {
	w.remember(s, at)
	switch s.Status.State {
	case m.ServerStateReserved:
		if ref := s.Spec.ServerClaimRef; ref != nil {
			w.inUse[s.Name] = ref.DeepCopy()
		} else if _, ok := w.inUse[s.Name]; !ok {
			w.inUse[s.Name] = &m.ObjectReference{} // Reserved without a claim: released already
		}
	case m.ServerStateAvailable:
		claim, ok := w.inUse[s.Name]
		if !ok {
			return nil
		}
		delete(w.inUse, s.Name)
		host := s.Spec.SystemUUID
		if w.hostOf != nil {
			host = w.hostOf(s)
		}
		rel := release{Server: s.Name, UUID: host, Claim: *claim, Available: at}
		rel.Deleted, rel.Known = w.claimDeleted(claim.UID)
		w.Releases = append(w.Releases, rel)
		vs := checkWipeInAPI(s, rel)
		for i := range vs {
			vs[i].Detail += "; history: " + strings.Join(w.history[s.Name], " → ")
		}
		return vs
	}
	return nil
}

// noteProbeBoots notes, from a snapshot, which probe boot configurations each server has
// when that changed.
func (w *wipeTracker) noteProbeBoots(s *snapshot) {
	now := map[string]string{}
	for _, b := range s.Boots {
		if b.Spec.Purpose != m.BootPurposeProvisioning {
			now[b.Spec.ServerRef.Name] += fmt.Sprintf("[%s %s created %s]", b.Spec.Purpose, string(b.UID)[:8], b.CreationTimestamp.Format("15:04:05"))
		}
	}
	if w.probeBoots == nil {
		w.probeBoots = map[string]string{}
	}
	for _, srv := range s.Servers {
		if now[srv.Name] == w.probeBoots[srv.Name] {
			continue
		}
		w.probeBoots[srv.Name] = now[srv.Name]
		entry := "probe boots " + now[srv.Name]
		if now[srv.Name] == "" {
			entry = "no probe boot"
		}
		w.history[srv.Name] = append(w.history[srv.Name], s.At.Format("15:04:05.000")+" "+entry)
	}
}

// remember notes a server's version when its state, reason, claim or maintenance changed.
func (w *wipeTracker) remember(s *m.Server, at time.Time) {
	if ref := s.Spec.ServerClaimRef; ref != nil {
		key := s.Name + "/" + ref.UID
		if _, ok := w.heldSince[key]; !ok {
			w.heldSince[key] = at
		}
	}
	entry := string(s.Status.State) + " (" + s.Status.LastTransitionReason
	if ref := s.Spec.ServerClaimRef; ref != nil {
		entry += ", claim " + ref.Name
	}
	if ref := s.Spec.MaintenanceRef; ref != nil {
		entry += ", maintenance " + ref.Name
	}
	entry += ")"
	h := w.history[s.Name]
	if len(h) > 0 && strings.HasSuffix(h[len(h)-1], entry) {
		return
	}
	h = append(h, at.Format("15:04:05.000")+" "+entry)
	if len(h) > 16 {
		h = h[len(h)-16:]
	}
	w.history[s.Name] = h
}

// checkWipeInAPI checks what the Available server's status says about its wipe.
func checkWipeInAPI(s *m.Server, rel release) []violation {
	var problems []string
	who := fmt.Sprintf("server %s (claim %s/%s)", s.Name, rel.Claim.Namespace, rel.Claim.Name)
	if !rel.Known {
		problems = append(problems, "its claim was never deleted, yet it was released")
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, m.ConditionCleaned); c == nil || c.Status != metav1.ConditionTrue {
		problems = append(problems, "Cleaned is not True: "+describeCondition(c))
	}
	lw := s.Status.LastWipe
	switch {
	case lw == nil || lw.ReportedAt == nil:
		problems = append(problems, "no wipe report at all")
	case rel.Known && lw.ReportedAt.Time.Before(rel.Deleted.Truncate(time.Second)):
		problems = append(problems, fmt.Sprintf("its last wipe report (received %s) predates the claim's deletion (%s)",
			lw.ReportedAt.UTC().Format(time.RFC3339), rel.Deleted.UTC().Format("15:04:05.000")))
	default:
		if len(lw.Disks) == 0 {
			problems = append(problems, "the wipe report lists no disk")
		}
		for _, d := range lw.Disks {
			if !d.Succeeded {
				problems = append(problems, "disk "+d.Name+" not wiped: "+d.Message)
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return []violation{{At: rel.Available, Invariant: invUnwiped, Detail: who + ": " + strings.Join(problems, "; ")}}
}

// Verify checks every release against the wipe boots the lab ran.
func (w *wipeTracker) Verify(runs []wipeRun) []violation {
	byHost := map[string][]wipeRun{}
	for _, r := range runs {
		byHost[r.UUID] = append(byHost[r.UUID], r)
	}
	var out []violation
	for _, rel := range w.Releases {
		if !rel.Known {
			continue // reported by the API check already
		}
		ok := false
		for _, r := range byHost[rel.UUID] {
			if !r.Start.Before(rel.Deleted) && !r.Start.After(rel.Available) {
				ok = true
				break
			}
		}
		if ok {
			continue
		}
		var seen []string
		for _, r := range byHost[rel.UUID] {
			end := "running"
			if !r.End.IsZero() {
				end = r.End.Format("15:04:05.000")
			}
			seen = append(seen, fmt.Sprintf("%s–%s err=%v", r.Start.Format("15:04:05.000"), end, r.Err))
		}
		out = append(out, violation{At: rel.Available, Invariant: invUnwiped, Detail: fmt.Sprintf(
			"server %s (claim %s/%s deleted at %s): no wipe boot of its host started between that and Available; its wipe boots: [%s]",
			rel.Server, rel.Claim.Namespace, rel.Claim.Name, rel.Deleted.Format("15:04:05.000"), strings.Join(seen, "; "))})
	}
	return out
}

func describeRef(ref *m.ObjectReference) string {
	if ref == nil {
		return "no claim"
	}
	return "claim " + ref.Namespace + "/" + ref.Name
}
