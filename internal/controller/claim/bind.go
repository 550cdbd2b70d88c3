package claim

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
)

// boundServer is the server that holds this claim, found from the server side (the truth).
func (r *Reconciler) boundServer(ctx context.Context, claim *metalv1alpha1.ServerClaim) (*metalv1alpha1.Server, error) {
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerByClaim: claim.Namespace + "/" + claim.Name}); err != nil {
		return nil, err
	}
	for i := range servers.Items {
		if servers.Items[i].HeldByClaim(claim) {
			return &servers.Items[i], nil
		}
	}
	// The claim says which server it took (or was about to): ask the API, not the cache, which
	// may not have seen that server's binding yet. Binding a second server here would give one
	// claim two.
	if ref := claim.Status.ServerRef; ref != nil {
		var server metalv1alpha1.Server
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: ref.Name}, &server)
		if err == nil && server.HeldByClaim(claim) {
			return &server, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, nil
}

// bind takes a matching server: first the claim's intent, then the server's reference (and,
// when the claim needs no boot configuration, its power). When none matches it returns nil and
// why (noMatchMessage).
func (r *Reconciler) bind(ctx context.Context, claim *metalv1alpha1.ServerClaim) (*metalv1alpha1.Server, string, error) {
	pick, why, err := r.pick(ctx, claim)
	if err != nil || pick == nil {
		return nil, why, err
	}

	before := claim.DeepCopy()
	claim.Status.ServerRef = &metalv1alpha1.LocalObjectReference{Name: pick.Name}
	if err := r.Client.Status().Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil, "", errRetryBind // we read a stale claim
		}
		return nil, "", err
	}

	server := pick.DeepCopy()
	server.Spec.ServerClaimRef = &metalv1alpha1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
	if !needsBootConfig(claim, r.BootOperator) {
		// Nothing to make first: the claim's power goes with its reference, in the same write
		// (provision would otherwise patch the server again at once).
		server.Spec.Power = cmp.Or(claim.Spec.Power, metalv1alpha1.PowerOn)
	}
	patch, err := bindPatch(claim, pick, server)
	if err != nil {
		return nil, "", err
	}
	if err := r.Client.Patch(ctx, server, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) || r.takenFirst(ctx, claim, pick, err) {
			setBound(claim, metalv1alpha1.ReasonBindConflict,
				"server "+pick.Name+" was taken first; trying another")
			claim.Status.ServerRef = nil
			return nil, "", errRetryBindAfter(ctx, r.Client, claim)
		}
		return nil, "", err
	}
	r.Events.Eventf(claim, server, corev1.EventTypeNormal, metalv1alpha1.ClaimReasonBound, "Bind", "bound to server %s", server.Name)
	return server, "", nil
}

// bindPatch is the JSON patch that takes pick for the claim, as server has it: its first
// operations test that it is still the server the cache showed, and still bindable (the same
// object at the same generation, so no claim or maintenance has taken and given it back since;
// unclaimed, held by no maintenance, Available, not being deleted, and labelled as it was when
// the claim selects by label). The apiserver applies them with the change, atomically: no two
// claims take one server, and a patch a killed manager sent that lands late takes nothing that
// changed hands meanwhile. Unlike an optimistic lock it does not fail because the server's
// status moved on (its reconciler and its BMC's polls write it all the time, and each such
// conflict cost the claim a retry and two status writes).
func bindPatch(claim *metalv1alpha1.ServerClaim, pick, server *metalv1alpha1.Server) (client.Patch, error) {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": string(pick.UID)},
		{"op": "test", "path": "/metadata/generation", "value": pick.Generation},
		{"op": "test", "path": "/metadata/deletionTimestamp", "value": nil},
		{"op": "test", "path": "/spec/serverClaimRef", "value": nil},
		{"op": "test", "path": "/spec/maintenanceRef", "value": nil},
		{"op": "test", "path": "/status/state", "value": metalv1alpha1.ServerStateAvailable},
	}
	if claim.Spec.ServerSelector != nil {
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/labels", "value": pick.Labels})
	}
	change, err := specPatchOps(&pick.Spec, &server.Spec)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(append(ops, change...))
	if err != nil {
		return nil, err
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// takenFirst says whether a bind patch was refused because a test failed: the apiserver
// answers both a failed test and a real validation error with 422 Invalid, so the server is
// read again, and a refusal of a server that is still bindable is an error (retried with
// backoff), not a race to retry at once.
func (r *Reconciler) takenFirst(ctx context.Context, claim *metalv1alpha1.ServerClaim, pick *metalv1alpha1.Server, err error) bool {
	if !apierrors.IsInvalid(err) {
		return false
	}
	var now metalv1alpha1.Server
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pick), &now); err != nil {
		return apierrors.IsNotFound(err)
	}
	still := now.UID == pick.UID && now.Generation == pick.Generation && bindable(&now)
	if claim.Spec.ServerSelector != nil {
		still = still && maps.Equal(now.Labels, pick.Labels)
	}
	return !still
}

// errRetryBindAfter clears the claim's stale intent, then asks for a retry.
func errRetryBindAfter(ctx context.Context, c client.Client, claim *metalv1alpha1.ServerClaim) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"serverRef":null}}`))
	if err := c.Status().Patch(ctx, claim, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return errRetryBind
}

// pick is the bindable server that matches and ranks first for this claim; when none matches,
// why not. Claims racing for the same servers rank them differently (rendezvous hashing: each
// server scores a hash of the claim's UID and its name), so they start at different ones, and a
// claim's choice moves only when the server it chose is taken. It reads the cache's own objects
// (a fleet of thousands is neither copied per claim nor sorted): read them, never change them.
func (r *Reconciler) pick(ctx context.Context, claim *metalv1alpha1.ServerClaim) (*metalv1alpha1.Server, string, error) {
	reqs, err := requirements(claim)
	if err != nil {
		return nil, "", err
	}
	var list metalv1alpha1.ServerList
	servers, err := cached.ByIndex(ctx, r.cached, &metalv1alpha1.Server{}, &list, func() []*metalv1alpha1.Server { return cached.ItemPointers(list.Items) }, indexServerBindable, "true")
	if err != nil {
		return nil, "", err
	}
	var best *metalv1alpha1.Server
	var bestScore uint64
	bestShunned := false
	for _, s := range servers {
		if !bindable(s) || !meetsAll(reqs, s) {
			continue
		}
		// A PreferNoClaim server is taken only when no other meets the claim (tolerating its
		// taint makes it one like the others).
		shunned := metalv1alpha1.Untolerated(s.Spec.Taints, claim.Spec.Tolerations, metalv1alpha1.TaintPreferNoClaim)
		score := rendezvous(string(claim.UID), s.Name)
		if best == nil || (bestShunned && !shunned) ||
			(bestShunned == shunned && (score > bestScore || (score == bestScore && s.Name < best.Name))) {
			best, bestScore, bestShunned = s, score, shunned
		}
	}
	if best != nil {
		return best, "", nil
	}
	pool := make([]*metalv1alpha1.Server, 0, len(servers))
	for _, s := range servers {
		if bindable(s) {
			pool = append(pool, s)
		}
	}
	return nil, noMatchMessage(reqs, pool), nil
}

// rendezvous is how the claim ranks the server: the 64-bit FNV-1a hash of claim, a zero byte and
// server, mixed (MurmurHash3's finalizer) so that names differing only at the end, as servers'
// do, do not leave the high bits alike.
func rendezvous(claim, server string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(claim); i++ {
		h = (h ^ uint64(claim[i])) * prime
	}
	h *= prime // the separator, a zero byte: h ^ 0 == h
	for i := 0; i < len(server); i++ {
		h = (h ^ uint64(server[i])) * prime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// patchHeldServer changes the spec of a server this claim holds with a JSON patch whose first
// operation tests that the server's claim reference is still this claim's. Unlike an optimistic
// lock, it does not fail because the server's status moved on meanwhile — its own reconciler
// and its BMC's polls write status all the time, and every such conflict cost a claim a retry
// with backoff — yet it never changes a server another claim holds.
func patchHeldServer(ctx context.Context, c client.Client, server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim, change func(*metalv1alpha1.ServerSpec)) error {
	before := server.Spec.DeepCopy()
	after := server.Spec.DeepCopy()
	change(after)
	ops, err := specPatchOps(before, after)
	if err != nil || len(ops) == 0 {
		return err
	}
	ops = append([]map[string]any{{"op": "test", "path": "/spec/serverClaimRef/uid", "value": string(claim.UID)}}, ops...)
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return c.Patch(ctx, server, client.RawPatch(types.JSONPatchType, data))
}

// specPatchOps are the JSON patch operations that turn one server spec into another, field by
// field: add (or replace) what changed, remove what was cleared.
func specPatchOps(before, after *metalv1alpha1.ServerSpec) ([]map[string]any, error) {
	var oldFields, newFields map[string]json.RawMessage
	for _, pair := range []struct {
		spec *metalv1alpha1.ServerSpec
		into *map[string]json.RawMessage
	}{{before, &oldFields}, {after, &newFields}} {
		data, err := json.Marshal(pair.spec)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, pair.into); err != nil {
			return nil, err
		}
	}
	var ops []map[string]any
	for _, field := range slices.Sorted(maps.Keys(oldFields)) {
		if _, kept := newFields[field]; !kept {
			ops = append(ops, map[string]any{"op": "remove", "path": "/spec/" + field})
		}
	}
	for _, field := range slices.Sorted(maps.Keys(newFields)) {
		if !bytes.Equal(oldFields[field], newFields[field]) {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/" + field, "value": newFields[field]})
		}
	}
	return ops, nil
}
