package controller

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// freshness remembers the resourceVersion a reconciler last wrote for each object, so that a
// reconcile that starts before the cache has caught up with that write can tell, and wait
// instead of repeating side effects (a second PXE boot, a second power cycle). It asks the API
// only when the cached version is not the one it wrote: usually never.
type freshness struct {
	mu      sync.Mutex
	written map[string]string
}

func newFreshness() *freshness { return &freshness{written: map[string]string{}} }

// wrote records the version our own write produced.
func (f *freshness) wrote(obj client.Object) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written[obj.GetName()] = obj.GetResourceVersion()
}

// stale reports whether cached predates our last write of the object.
func (f *freshness) stale(ctx context.Context, api client.Reader, cached client.Object, fresh client.Object) (bool, error) {
	f.mu.Lock()
	rv, ok := f.written[cached.GetName()]
	f.mu.Unlock()
	if !ok || rv == cached.GetResourceVersion() {
		f.forget(cached.GetName())
		return false, nil
	}
	// Someone wrote since (or the cache lags): the API knows which.
	if err := api.Get(ctx, client.ObjectKeyFromObject(cached), fresh); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if fresh.GetResourceVersion() != cached.GetResourceVersion() {
		return true, nil
	}
	f.forget(cached.GetName())
	return false, nil
}

func (f *freshness) forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.written, name)
}
