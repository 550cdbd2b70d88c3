package controller

import (
	"math/rand/v2"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Settings are the knobs every reconciler shares; the manager fills them from flags.
type Settings struct {
	// ResyncPeriod is how often a healthy BMC is polled; each poll is jittered by ±10%.
	ResyncPeriod time.Duration
	// BackoffBase and BackoffMax bound the exponential retry of failing reconciles.
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxConcurrentReconciles per controller name; DefaultConcurrency for the others.
	MaxConcurrentReconciles map[string]int
	DefaultConcurrency      int
	// Power bounds the wait for power requests; DefaultPowerTimeouts where zero.
	Power PowerTimeouts
}

// DefaultSettings are the production defaults.
func DefaultSettings() Settings {
	return Settings{
		ResyncPeriod:       5 * time.Minute,
		BackoffBase:        time.Second,
		BackoffMax:         5 * time.Minute,
		DefaultConcurrency: 4,
		Power:              DefaultPowerTimeouts(),
	}
}

// power is the power timeouts, defaults filled in.
func (s Settings) power() PowerTimeouts {
	p, def := s.Power, DefaultPowerTimeouts()
	if p.Confirm <= 0 {
		p.Confirm = def.Confirm
	}
	if p.GracefulShutdown <= 0 {
		p.GracefulShutdown = def.GracefulShutdown
	}
	return p
}

// Concurrency is the number of workers for the named controller.
func (s Settings) Concurrency(name string) int {
	if n := s.MaxConcurrentReconciles[name]; n > 0 {
		return n
	}
	return max(s.DefaultConcurrency, 1)
}

// jitteredResync spreads polls so a fleet enrolled together is not polled together.
func (s Settings) jitteredResync() time.Duration {
	period := s.ResyncPeriod
	if period <= 0 {
		period = DefaultSettings().ResyncPeriod
	}
	return period - period/10 + time.Duration(rand.Int64N(int64(period/5)+1))
}

// controllerOptions are the options of the named controller: its workers, its backoff, and the
// classic work queue. controller-runtime v0.24's priority queue can deadlock on shutdown (a
// ready item is handed to a worker that has already left, with the queue's lock held:
// kubernetes-sigs/controller-runtime#3538, fixed in v0.25.2, which needs k8s.io v0.37); the
// manager then never stops, and a restarted one in the same process never starts.
func (s Settings) controllerOptions(name string) controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: s.Concurrency(name),
		RateLimiter:             s.rateLimiter(),
		UsePriorityQueue:        ptr.To(false),
	}
}

// rateLimiter retries failed reconciles with per-object exponential backoff, so a dead BMC is
// asked again after 1s, 2s, 4s, … up to BackoffMax, never in a hot loop.
func (s Settings) rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	base, maxDelay := s.BackoffBase, s.BackoffMax
	if base <= 0 {
		base = DefaultSettings().BackoffBase
	}
	if maxDelay <= 0 {
		maxDelay = DefaultSettings().BackoffMax
	}
	return workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](base, maxDelay)
}

// deletedOnly passes only delete events: used to re-create owned objects someone removed,
// without waking the owner for every status change of its children.
func deletedOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	}
}
