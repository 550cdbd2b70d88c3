package cached

import (
	"context"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Writes remembers, for each object a reconciler wrote, what the cache must show before a
// reconcile may act on it again. A reconcile woken before the cache has caught up with its own
// last write (news of another object often comes at once) would otherwise decide again from
// the older object: compute and write the same status a second time, take a server twice,
// send a second PXE boot or power cycle. It waits instead. It is the one guard of its kind:
// every reconciler that writes an object and acts on what it reads back uses it.
//
// Resource versions are compared (comparable since Kubernetes 1.35, KEP-5504): the cache is
// behind while it shows a version older than the write's, and caught up at the write's or a
// later one (someone else's write over ours). It never asks the API. A version that is not a
// well-formed one is compared for equality only: behind when it is one the writes moved the
// object past, else taken as newer. A nil Writes never waits.
type Writes struct {
	mu      sync.Mutex
	written map[client.ObjectKey]wrote
}

// wrote is what is known of an object's writes: the version the last made (none for an
// object whose last finalizer was removed), and the versions the writes moved it past.
type wrote struct {
	want string
	past []string
}

// NewWrites returns an empty guard.
func NewWrites() *Writes { return &Writes{written: map[client.ObjectKey]wrote{}} }

// Wrote records that obj, at its current version (the write's), has moved past the versions
// given: the one the reconcile read, and those its earlier writes in the same reconcile made.
func (w *Writes) Wrote(obj client.Object, past ...string) {
	now := obj.GetResourceVersion()
	past = slices.DeleteFunc(slices.Clone(past), func(v string) bool { return v == "" || v == now })
	if w == nil || (now == "" && len(past) == 0) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written[client.ObjectKeyFromObject(obj)] = wrote{want: now, past: past}
}

// Going records that obj, whose last finalizer the reconciler removed, was read at version
// read: until the cache has it gone (or shows a later version: another finalizer kept it), a
// reconcile that sees it at that version or an older one waits. The apiserver's answer to the
// update that deletes it may carry that same version, so there is no version to want.
func (w *Writes) Going(obj client.Object, read string) {
	if w == nil || read == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.written[client.ObjectKeyFromObject(obj)] = wrote{past: []string{read}}
}

// Behind says whether the cache shows obj older than the reconciler's last write of it. Once
// the cache is seen caught up, nothing is remembered.
func (w *Writes) Behind(cached client.Object) bool {
	if w == nil {
		return false
	}
	key, rv := client.ObjectKeyFromObject(cached), cached.GetResourceVersion()
	w.mu.Lock()
	defer w.mu.Unlock()
	known, ok := w.written[key]
	if !ok {
		return false
	}
	if slices.Contains(known.past, rv) {
		return true
	}
	if older(rv, known) {
		return true
	}
	delete(w.written, key)
	return false
}

// older says whether rv precedes the write known: older than the version it made, or, for an
// object going, no newer than the version it was read at.
func older(rv string, known wrote) bool {
	if known.want != "" {
		cmp, err := resourceversion.CompareResourceVersion(rv, known.want)
		return err == nil && cmp < 0
	}
	for _, p := range known.past {
		if cmp, err := resourceversion.CompareResourceVersion(rv, p); err == nil && cmp <= 0 {
			return true
		}
	}
	return false
}

// Forget drops what is known of an object that is gone.
func (w *Writes) Forget(key client.ObjectKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.written, key)
}

// CatchUpIf is what a reconcile returns that waits, when behind, for the cache to show its own
// last write: a short requeue. Not behind, it is the empty result.
func CatchUpIf(behind bool) reconcile.Result {
	if !behind {
		return reconcile.Result{}
	}
	return reconcile.Result{RequeueAfter: 20 * time.Millisecond}
}

// Get reads the object a reconcile is for from the cache c, and says whether the cache is
// behind the reconciler's own last write of it (return CatchUpIf(behind) then). An object that
// is gone is forgotten, and its NotFound error returned for the caller to act on; behind is
// false whenever err is set.
func (w *Writes) Get(ctx context.Context, c client.Reader, key client.ObjectKey, obj client.Object) (behind bool, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(key)
		}
		return false, err
	}
	return w.Behind(obj), nil
}
