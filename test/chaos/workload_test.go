package chaos

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
)

const (
	claimNamespace = "default"
	waveLength     = 15 * time.Second
)

// workload plays the fleet's users: it creates claims and deletes them in waves, and takes
// free and claimed servers into maintenance and gives them back, all drawn from its own seeded
// random source.
type workload struct {
	c client.Client
	// image and checksum are what the claims install (the lab's SimImage).
	image, checksum string
	rng             *rand.Rand
	// obs picks servers for maintenance from what it has seen.
	obs *observer

	// targetClaims is how many claims it keeps around at the crest of a wave (a fifth of that
	// in the trough); targetMaints how many maintenances.
	targetClaims, targetMaints int
	started                    time.Time

	mu      sync.Mutex
	deleted map[types.UID]time.Time // claim UID → when its deletion was asked for
	claims  map[string]*claimInfo
	maints  map[string]*maintInfo
	seq     int
	stats   workloadStats
	// steps counts the workload's steps; enrolment faults come every enrolEvery of them, of
	// each kind in turn.
	steps, faults int
	// unenrolled are the Endpoints it deleted, to make again once they are gone.
	unenrolled map[string]*m.Endpoint
}

type claimInfo struct {
	uid     types.UID
	created time.Time
	bound   time.Time
	hold    time.Duration
	deleted bool
	// ready is set when the claim was first seen Ready with an image to boot and power On:
	// the server it names must have PXE-booted while it held the claim.
	ready   time.Time
	server  string
	boundAt time.Time
}

type maintInfo struct {
	created time.Time
	hold    time.Duration
	deleted bool
}

type workloadStats struct {
	ClaimsCreated, ClaimsDeleted, FlashClaims, MaintsCreated, MaintsDeleted, MaintsOnClaimed, Approvals, ServersDeleted int
	// What enrolled the machines, deleted (and the Endpoints made again).
	BMCsDeleted, BMCSecretsDeleted, EndpointsDeleted, EndpointsRecreated int
	Errors                                                               int
}

func newWorkload(c client.Client, image, checksum string, seed uint64, targetClaims, targetMaints int) *workload {
	return &workload{c: c, image: image, checksum: checksum, rng: rand.New(rand.NewPCG(seed, 0x636c61696d73)),
		targetClaims: targetClaims, targetMaints: targetMaints, started: time.Now(),
		deleted: map[types.UID]time.Time{}, claims: map[string]*claimInfo{}, maints: map[string]*maintInfo{}, unenrolled: map[string]*m.Endpoint{}}
}

// claimDeleted says when the workload asked to delete the claim with this UID.
func (w *workload) claimDeleted(uid string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.deleted[types.UID(uid)]
	return at, ok
}

// history says when the workload made a claim, saw it Bound and Ready, and asked to delete it.
func (w *workload) history(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	info := w.claims[name]
	if info == nil {
		return "not made by the workload"
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.Format("15:04:05.000")
	}
	return fmt.Sprintf("uid %s, created %s, seen Bound %s (hold %v), Ready %s on %q, deleted %s",
		info.uid, at(info.created), at(info.bound), info.hold, at(info.ready), info.server, at(w.deleted[info.uid]))
}

func (w *workload) statsNow() workloadStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// run acts every 100–250 ms until ctx ends.
func (w *workload) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(100+w.rng.IntN(150)) * time.Millisecond):
		}
		w.step(ctx)
	}
}

func (w *workload) step(ctx context.Context) {
	var claims m.ServerClaimList
	if err := w.c.List(ctx, &claims, client.InNamespace(claimNamespace)); err != nil {
		w.countError()
		return
	}
	now := time.Now()
	active := 0
	for i := range claims.Items {
		c := &claims.Items[i]
		info := w.claims[c.Name]
		if info == nil || info.deleted {
			continue
		}
		active++
		if c.Status.Phase == m.ClaimPhaseBound && info.bound.IsZero() {
			info.bound = now
		}
		if info.ready.IsZero() && c.Spec.Image != "" && c.Spec.Power != m.PowerOff && c.Status.ServerRef != nil && c.Status.BoundAt != nil &&
			meta.IsStatusConditionTrue(c.Status.Conditions, m.ConditionReady) {
			w.mu.Lock()
			info.ready, info.server, info.boundAt = now, c.Status.ServerRef.Name, c.Status.BoundAt.Time
			w.mu.Unlock()
		}
		// Bound claims are held for a while (a flash claim not at all); a claim that found no
		// server for long is given up.
		if (!info.bound.IsZero() && now.Sub(info.bound) >= info.hold) || now.Sub(info.created) > 30*time.Second {
			w.deleteClaim(ctx, c)
			active--
		}
	}
	// Waves: for 15 s it wants many claims, then few (held ones run out and are deleted, new
	// ones are not made), so releases and bindings come in bursts.
	target := w.targetClaims
	if int(now.Sub(w.started)/waveLength)%2 == 1 {
		target /= 5
	}
	for n := 0; active < target && n < 3; n++ {
		w.createClaim(ctx)
		active++
	}
	w.maintenance(ctx, claims.Items)
	w.deleteServer(ctx)
	w.enrolAgain(ctx)
	w.deleteEnrolment(ctx)
}

// enrolEvery is how many steps (100–250 ms each, more under load) come between two enrolment
// faults: a short run (30 kills a second apart) still has one of each kind.
const enrolEvery = 24

// deleteEnrolment, every enrolEvery steps, deletes what enrolled a BMC's machines, as an admin
// re-enrolling them would, each kind in turn: the Endpoint (made again once it is gone:
// enrolAgain); the BMC with its BMCSecret (kubectl delete -f of both; the Endpoint makes both
// again); the BMC (its Endpoint makes it again once it is gone); the BMCSecret alone (kept
// while its BMC uses it). The BMC's Servers go with it — wiped first when they may hold a
// tenant's data, claimed ones kept — and come back: no machine may be Available unwiped
// meanwhile (the wipe tracker), and every one must be back at the end (convergence).
func (w *workload) deleteEnrolment(ctx context.Context) {
	if w.steps++; w.steps%enrolEvery != enrolEvery/2 {
		return
	}
	var eps m.EndpointList
	if err := w.c.List(ctx, &eps); err != nil {
		w.countError()
		return
	}
	var live []*m.Endpoint
	for i := range eps.Items {
		if ep := &eps.Items[i]; ep.DeletionTimestamp.IsZero() && w.unenrolled[ep.Name] == nil {
			live = append(live, ep)
		}
	}
	if len(live) == 0 {
		return
	}
	ep := live[w.rng.IntN(len(live))]
	del := func(obj client.Object, count *int) {
		if err := w.c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			w.countError()
			return
		}
		w.mu.Lock()
		*count++
		w.mu.Unlock()
	}
	bmcOf := &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: ep.Name}}
	secretOf := &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: ep.Name}}
	switch w.faults % 4 {
	case 0:
		w.unenrolled[ep.Name] = ep.DeepCopy()
		del(ep, &w.stats.EndpointsDeleted)
	case 1:
		del(bmcOf, &w.stats.BMCsDeleted)
		del(secretOf, &w.stats.BMCSecretsDeleted)
	case 2:
		del(bmcOf, &w.stats.BMCsDeleted)
	case 3:
		del(secretOf, &w.stats.BMCSecretsDeleted)
	}
	w.faults++
}

// enrolAgain makes again each Endpoint deleteEnrolment deleted, once it is gone (after its
// BMC, which goes after its Servers' wipes). It says how many are still to be made.
func (w *workload) enrolAgain(ctx context.Context) int {
	for name, old := range w.unenrolled {
		err := w.c.Get(ctx, client.ObjectKey{Name: name}, &m.Endpoint{})
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			w.countError()
			continue
		}
		ep := &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: old.Labels}, Spec: old.Spec}
		if err := w.c.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
			w.countError()
			continue
		}
		delete(w.unenrolled, name)
		w.mu.Lock()
		w.stats.EndpointsRecreated++
		w.mu.Unlock()
	}
	return len(w.unenrolled)
}

// deleteServer now and then deletes a Server, claimed or not, as a careless admin would: the
// machine must come back (its BMC makes its Server again) and never be Available before what a
// tenant left on it is wiped (the wipe tracker's invariant).
func (w *workload) deleteServer(ctx context.Context) {
	if w.rng.IntN(25) != 0 {
		return
	}
	s := w.pickServer()
	if s == nil || !s.DeletionTimestamp.IsZero() {
		return
	}
	if err := w.c.Delete(ctx, &m.Server{ObjectMeta: metav1.ObjectMeta{Name: s.Name}}, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
		w.countError()
		return
	}
	w.mu.Lock()
	w.stats.ServersDeleted++
	w.mu.Unlock()
}

func (w *workload) countError() {
	w.mu.Lock()
	w.stats.Errors++
	w.mu.Unlock()
}

func (w *workload) createClaim(ctx context.Context) {
	w.seq++
	name := fmt.Sprintf("chaos-%04d", w.seq)
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: claimNamespace, Name: name},
		Spec: m.ServerClaimSpec{Power: m.PowerOn}}
	claim.Spec.Image, claim.Spec.ImageChecksum = w.image, w.checksum
	switch p := w.rng.IntN(10); {
	case p == 0:
		claim.Spec.Power = m.PowerOff
	case p == 1:
		claim.Spec.Image = ""
	case p == 2:
		claim.Spec.MinCPUCores = ptrTo(int32(8)) // two fixtures in three have as many
	case p == 3:
		// The owner approves maintenance up front.
		claim.Annotations = map[string]string{m.AnnotationApproveMaintenance: "true"}
	}
	hold := time.Duration(1000+w.rng.IntN(5000)) * time.Millisecond
	flash := w.rng.IntN(10) == 0
	if flash {
		hold = 0 // deleted as soon as it is seen Bound
	}
	if err := w.c.Create(ctx, claim); err != nil {
		w.countError()
		return
	}
	w.mu.Lock()
	w.claims[name] = &claimInfo{uid: claim.UID, created: time.Now(), hold: hold}
	w.stats.ClaimsCreated++
	if flash {
		w.stats.FlashClaims++
	}
	w.mu.Unlock()
}

// deleteClaim deletes a claim, noting when first: the server it held cannot have been released
// before that moment.
func (w *workload) deleteClaim(ctx context.Context, c *m.ServerClaim) {
	w.mu.Lock()
	info := w.claims[c.Name]
	if info == nil || info.deleted {
		w.mu.Unlock()
		return
	}
	info.deleted = true
	w.deleted[c.UID] = time.Now()
	w.stats.ClaimsDeleted++
	w.mu.Unlock()
	uid := c.UID
	if err := w.c.Delete(ctx, c, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		w.countError()
	}
}

// maintenance gives back maintenances that were held long enough, takes a new server now and
// then (free, claimed, or whatever it is doing), and has owners approve pending ones.
func (w *workload) maintenance(ctx context.Context, claims []m.ServerClaim) {
	var list m.ServerMaintenanceList
	if err := w.c.List(ctx, &list, client.InNamespace(claimNamespace)); err != nil {
		w.countError()
		return
	}
	now := time.Now()
	active := 0
	for i := range list.Items {
		sm := &list.Items[i]
		info := w.maints[sm.Name]
		if info == nil || info.deleted {
			continue
		}
		if now.Sub(info.created) >= info.hold {
			info.deleted = true
			w.mu.Lock()
			w.stats.MaintsDeleted++
			w.mu.Unlock()
			if err := w.c.Delete(ctx, sm); client.IgnoreNotFound(err) != nil {
				w.countError()
			}
			continue
		}
		active++
		if c := meta.FindStatusCondition(sm.Status.Conditions, m.ConditionReady); c != nil && c.Reason == m.ReasonWaitingForApproval && w.rng.IntN(8) == 0 {
			w.approve(ctx, sm, claims)
		}
	}
	if active >= w.targetMaints || w.rng.IntN(4) != 0 {
		return
	}
	target := w.pickServer()
	if target == nil {
		return
	}
	w.seq++
	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: claimNamespace, Name: fmt.Sprintf("maint-%04d", w.seq)},
		Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: target.Name}, Reason: "chaos", Policy: m.MaintenanceEnforced, Power: m.PowerOff}}
	if w.rng.IntN(2) == 0 {
		sm.Spec.Policy = m.MaintenanceOwnerApproval
	}
	if w.rng.IntN(5) == 0 {
		sm.Spec.Power = m.PowerOn
	}
	if err := w.c.Create(ctx, sm); err != nil {
		w.countError()
		return
	}
	w.maints[sm.Name] = &maintInfo{created: time.Now(), hold: time.Duration(1000+w.rng.IntN(6000)) * time.Millisecond}
	w.mu.Lock()
	w.stats.MaintsCreated++
	if target.Spec.ServerClaimRef != nil {
		w.stats.MaintsOnClaimed++
	}
	w.mu.Unlock()
}

// pickServer picks a free server, a claimed one, or any, from the observer's latest versions.
func (w *workload) pickServer() *m.Server {
	servers := w.obs.servers()
	var free, claimed []*m.Server
	for _, s := range servers {
		switch {
		case s.Spec.MaintenanceRef != nil:
		case s.Status.State == m.ServerStateAvailable && s.Spec.ServerClaimRef == nil:
			free = append(free, s)
		case s.Status.State == m.ServerStateReserved:
			claimed = append(claimed, s)
		}
	}
	pool := servers
	switch p := w.rng.IntN(10); {
	case p < 4 && len(free) > 0:
		pool = free
	case p < 8 && len(claimed) > 0:
		pool = claimed
	}
	if len(pool) == 0 {
		return nil
	}
	return pool[w.rng.IntN(len(pool))]
}

// approve has the owner of the claimed server approve its maintenance.
func (w *workload) approve(ctx context.Context, sm *m.ServerMaintenance, claims []m.ServerClaim) {
	for i := range claims {
		c := &claims[i]
		if c.Status.ServerRef == nil || c.Status.ServerRef.Name != sm.Spec.ServerRef.Name || c.Annotations[m.AnnotationApproveMaintenance] == "true" {
			continue
		}
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+m.AnnotationApproveMaintenance+`":"true"}}}`))
		if err := w.c.Patch(ctx, c, patch); client.IgnoreNotFound(err) != nil {
			w.countError()
			return
		}
		w.mu.Lock()
		w.stats.Approvals++
		w.mu.Unlock()
		return
	}
}

// finish leaves the defined end state: no maintenance, no claim that is not Bound, and every
// third Bound claim deleted too, the rest staying, so the end has both released and held
// servers; and every machine enrolled again (the Endpoints it deleted made again, once gone).
// A claim whose Server is being deleted is not kept: that Server goes once released and
// wiped, and the BMC or Endpoint deleted with it waits for that.
func (w *workload) finish(ctx context.Context) (kept int, err error) {
	var maints m.ServerMaintenanceList
	if err := w.c.List(ctx, &maints, client.InNamespace(claimNamespace)); err != nil {
		return 0, err
	}
	for i := range maints.Items {
		if err := w.c.Delete(ctx, &maints.Items[i]); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
	}
	var claims m.ServerClaimList
	if err := w.c.List(ctx, &claims, client.InNamespace(claimNamespace)); err != nil {
		return 0, err
	}
	bound := 0
	for i := range claims.Items {
		c := &claims.Items[i]
		if !c.DeletionTimestamp.IsZero() {
			continue
		}
		keepable := c.Status.Phase == m.ClaimPhaseBound && c.Status.ServerRef != nil
		if keepable {
			var s m.Server
			err := w.c.Get(ctx, client.ObjectKey{Name: c.Status.ServerRef.Name}, &s)
			if client.IgnoreNotFound(err) != nil {
				return 0, err
			}
			keepable = err == nil && s.DeletionTimestamp.IsZero()
		}
		keep := keepable && bound%3 != 2
		if keepable {
			bound++
		}
		if keep {
			kept++
			continue
		}
		w.deleteClaim(ctx, c)
	}
	if err := lab.Poll(ctx, 3*time.Minute, "the deleted Endpoints to go, and be made again", func() (bool, error) {
		return w.enrolAgain(ctx) == 0, nil
	}); err != nil {
		return kept, fmt.Errorf("%w (still to be made again: %v)", err, slices.Sorted(maps.Keys(w.unenrolled)))
	}
	return kept, nil
}

func ptrTo[T any](v T) *T { return &v }

// readyClaim is a claim seen Ready with its image booted, as the workload saw it.
type readyClaim struct {
	name, uid, server string
	boundAt, ready    time.Time
	deleted           time.Time // zero while it exists
}

func (w *workload) readyClaims() []readyClaim {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []readyClaim
	for name, info := range w.claims {
		if info.ready.IsZero() {
			continue
		}
		out = append(out, readyClaim{name: name, uid: string(info.uid), server: info.server, boundAt: info.boundAt, ready: info.ready, deleted: w.deleted[info.uid]})
	}
	return out
}
