package cached

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Freshness remembers the resourceVersion a reconciler last wrote for each object, so that a
// reconcile that starts before the cache has caught up with that write can tell, and wait
// instead of repeating side effects (a second PXE boot, a second power cycle).
//
// Resource versions are compared (comparable since Kubernetes 1.35, KEP-5504): a version the
// cache shows is behind the write when it is older, and caught up when it is the write's or a
// later one (someone else's write after ours), so no request is needed. Only when a version is
// not a well-formed one does it ask the API, and then only when the cache shows a version it
// cannot place: not the one written, and not one already known to be behind (the version the
// writing reconcile read, or the one the cache showed when the API was last asked). Either way
// a reconcile woken before the cache has its write waits for the cache without a request,
// however often it is woken.
type Freshness struct {
	mu      sync.Mutex
	written map[string]versions
}

// versions are what the cache must reach, and a version it may show that is known to be
// older.
type versions struct{ want, behind string }

func NewFreshness() *Freshness { return &Freshness{written: map[string]versions{}} }

// Wrote records the version our own write produced; behind is the version the write was based
// on (the one the reconcile read), which the cache may go on showing for a while.
func (f *Freshness) Wrote(obj client.Object, behind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written[obj.GetName()] = versions{want: obj.GetResourceVersion(), behind: behind}
}

// Stale reports whether cached predates our last write of the object (or a later one).
func (f *Freshness) Stale(ctx context.Context, api client.Reader, cached client.Object, fresh client.Object) (bool, error) {
	name, rv := cached.GetName(), cached.GetResourceVersion()
	f.mu.Lock()
	v, ok := f.written[name]
	f.mu.Unlock()
	switch {
	case !ok:
		return false, nil
	case rv == v.want:
		f.Forget(name)
		return false, nil
	case rv == v.behind:
		return true, nil
	}
	if cmp, err := resourceversion.CompareResourceVersion(rv, v.want); err == nil {
		if cmp < 0 {
			return true, nil
		}
		f.Forget(name) // ours, or a later write over it
		return false, nil
	}
	// Someone wrote since (or the cache shows a version between ours): the API knows which.
	if err := api.Get(ctx, client.ObjectKeyFromObject(cached), fresh); err != nil {
		if apierrors.IsNotFound(err) {
			f.Forget(name) // gone: the cache will show that soon enough
			return false, nil
		}
		return false, err
	}
	if fresh.GetResourceVersion() == rv {
		f.Forget(name)
		return false, nil
	}
	f.mu.Lock()
	f.written[name] = versions{want: fresh.GetResourceVersion(), behind: rv}
	f.mu.Unlock()
	return true, nil
}

func (f *Freshness) Forget(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.written, name)
}
