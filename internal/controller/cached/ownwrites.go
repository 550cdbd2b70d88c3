package cached

import (
	"slices"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OwnWrites remembers, for each object a reconciler wrote, the versions its writes moved the
// object past, until the cache shows another. A reconcile woken before the cache has caught up
// with the last write (news of another object often comes at once) would otherwise compute the
// same status again from the older object and write it a second time, or take a server twice;
// it waits instead.
//
// Unlike Freshness (the server reconciler's) it never asks the API: a version the cache shows
// that is not one of those is taken as newer. A version is only ever followed by newer ones, so
// the one case it gets wrong is a write by someone else between the reconcile's read and its
// own write, and then a reconcile acts on that older object: at worst it writes again. The
// claim, maintenance and BMC reconcilers use it; a nil one never waits.
type OwnWrites struct {
	mu   sync.Mutex
	past map[client.ObjectKey][]string
}

func NewOwnWrites() *OwnWrites { return &OwnWrites{past: map[client.ObjectKey][]string{}} }

// Wrote records that obj, at its current version, has moved past the versions given (the one
// the reconcile read, and those its earlier writes made).
func (w *OwnWrites) Wrote(obj client.Object, past ...string) {
	now := obj.GetResourceVersion()
	past = slices.DeleteFunc(slices.Clone(past), func(v string) bool { return v == "" || v == now })
	if w == nil || len(past) == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.past[client.ObjectKeyFromObject(obj)] = past
}

// Going records that obj, whose last finalizer the reconciler removed, was read at version
// read: until the cache has it gone, a reconcile that sees it there waits. (The apiserver's
// answer to the update that deletes it may carry that same version.)
func (w *OwnWrites) Going(obj client.Object, read string) {
	if w == nil || read == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.past[client.ObjectKeyFromObject(obj)] = []string{read}
}

// Behind says whether the cache shows obj at a version the reconciler's writes moved it past.
func (w *OwnWrites) Behind(cached client.Object) bool {
	if w == nil {
		return false
	}
	key := client.ObjectKeyFromObject(cached)
	w.mu.Lock()
	defer w.mu.Unlock()
	past, ok := w.past[key]
	if !ok {
		return false
	}
	if slices.Contains(past, cached.GetResourceVersion()) {
		return true
	}
	delete(w.past, key)
	return false
}

// Forget drops what is known of an object that is gone.
func (w *OwnWrites) Forget(key client.ObjectKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.past, key)
}
