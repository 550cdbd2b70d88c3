// Package settings holds the knobs every reconciler shares (poll period, backoff, workers,
// power timeouts) and the controller options built from them. The manager fills them from
// flags.
package settings

import (
	"math/rand/v2"
	"time"

	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller"
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

// EffectivePower is the power timeouts, defaults filled in.
func (s Settings) EffectivePower() PowerTimeouts {
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

// JitteredResync spreads polls so a fleet enrolled together is not polled together.
func (s Settings) JitteredResync() time.Duration {
	period := s.ResyncPeriod
	if period <= 0 {
		period = DefaultSettings().ResyncPeriod
	}
	return period - period/10 + time.Duration(rand.Int64N(int64(period/5)+1))
}

// ControllerOptions are the options of the named controller: its workers, its backoff, and the
// classic work queue. controller-runtime v0.24's priority queue can deadlock on shutdown (a
// ready item is handed to a worker that has already left, with the queue's lock held:
// kubernetes-sigs/controller-runtime#3538, fixed in v0.25.2, which needs k8s.io v0.37); the
// manager then never stops, and a restarted one in the same process never starts.
func (s Settings) ControllerOptions(name string) controller.Options {
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

// PowerTimeouts bound how long a power request is waited for.
type PowerTimeouts struct {
	// Confirm is how long a sent request may go unreported by the BMC before it is sent once
	// more, and then given up as Unconfirmed.
	Confirm time.Duration
	// GracefulShutdown is how long the OS has to stop after a GracefulShutdown before
	// Ironfleet forces the power off.
	GracefulShutdown time.Duration
}

// DefaultPowerTimeouts are the production defaults.
func DefaultPowerTimeouts() PowerTimeouts {
	return PowerTimeouts{Confirm: 2 * time.Minute, GracefulShutdown: 5 * time.Minute}
}
