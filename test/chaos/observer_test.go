package chaos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
)

// observer watches every Server version (for the per-server wipe history) and takes a
// consistent snapshot of everything every interval, checking the invariants at each.
type observer struct {
	c        client.WithWatch
	interval time.Duration

	mu         sync.Mutex
	current    map[string]*m.Server // latest version of each server, from the watch
	unenrolled map[string]time.Time // first seen without a state
	wipes      *wipeTracker
	violations []violation
	snapshots  int
	versions   int
	watchGaps  int
	// watchRV is the resourceVersion the watch has delivered every Server event up to, and
	// watchAt when it last moved.
	watchRV     string
	watchAt     time.Time
	snapErrors  int
	snapTime    time.Duration // spent reading snapshots, in all
	snapMax     time.Duration
	snapServers time.Duration // of which listing Servers
	// calmSince is when the kills stopped. A server the BMC reconciler created has no state
	// and no condition until the server reconciler first sees it, which a manager killed
	// every few seconds may take long to do; once the kills stop it must not take long.
	calmSince time.Time
}

// calm notes that the kills have stopped.
func (o *observer) calm() {
	o.mu.Lock()
	o.calmSince = time.Now()
	o.mu.Unlock()
}

func newObserver(c client.WithWatch, interval time.Duration, claimDeleted func(uid string) (time.Time, bool)) *observer {
	return &observer{c: c, interval: interval, current: map[string]*m.Server{}, unenrolled: map[string]time.Time{},
		wipes: newWipeTracker(claimDeleted)}
}

// run watches and snapshots until ctx ends; it returns once both have stopped.
func (o *observer) run(ctx context.Context, ready chan<- error) {
	var wg sync.WaitGroup
	rv, err := o.listServers(ctx)
	ready <- err
	if err != nil {
		return
	}
	wg.Add(2)
	go func() { defer wg.Done(); o.watchServers(ctx, rv) }()
	go func() { defer wg.Done(); o.snapshotLoop(ctx) }()
	wg.Wait()
}

func (o *observer) listServers(ctx context.Context) (string, error) {
	var list m.ServerList
	if err := o.c.List(ctx, &list); err != nil {
		return "", err
	}
	now := time.Now()
	listed := map[string]bool{}
	for i := range list.Items {
		o.observeServer(&list.Items[i], now)
		listed[list.Items[i].Name] = true
	}
	o.mu.Lock()
	for name := range o.current {
		if !listed[name] {
			delete(o.current, name)
		}
	}
	o.mu.Unlock()
	o.advance(list.ResourceVersion)
	return list.ResourceVersion, nil
}

// advance notes that the watch has delivered everything up to rv: the servers it holds are
// exactly the Servers at that resourceVersion.
func (o *observer) advance(rv string) {
	o.mu.Lock()
	o.watchRV, o.watchAt = rv, time.Now()
	o.mu.Unlock()
}

// watchServers sees every version of every Server, in order, from rv on.
func (o *observer) watchServers(ctx context.Context, rv string) {
	for ctx.Err() == nil {
		w, err := o.c.Watch(ctx, &m.ServerList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			o.gap()
			if rv, err = o.listServers(ctx); err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
			continue
		}
		rv = o.consume(ctx, w, rv)
		w.Stop()
		if rv == "" && ctx.Err() == nil {
			o.gap() // expired: versions may have been missed
			rv, _ = o.listServers(ctx)
		}
	}
}

func (o *observer) gap() {
	o.mu.Lock()
	o.watchGaps++
	o.mu.Unlock()
}

func (o *observer) consume(ctx context.Context, w watch.Interface, rv string) string {
	for {
		select {
		case <-ctx.Done():
			return rv
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv
			}
			switch ev.Type {
			case watch.Error:
				return ""
			case watch.Bookmark:
				if obj, ok := ev.Object.(client.Object); ok {
					rv = obj.GetResourceVersion()
					o.advance(rv)
				}
			case watch.Added, watch.Modified:
				s, ok := ev.Object.(*m.Server)
				if !ok {
					continue
				}
				o.observeServer(s, time.Now())
				rv = s.ResourceVersion
				o.advance(rv)
			case watch.Deleted:
				if s, ok := ev.Object.(*m.Server); ok {
					o.mu.Lock()
					delete(o.current, s.Name)
					o.mu.Unlock()
					rv = s.ResourceVersion
					o.advance(rv)
				}
			}
		}
	}
}

func (o *observer) observeServer(s *m.Server, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if prev := o.current[s.Name]; prev != nil && prev.ResourceVersion == s.ResourceVersion {
		return // a re-list repeats what the watch saw
	}
	o.versions++
	o.current[s.Name] = s
	if s.Status.State == "" {
		if _, ok := o.unenrolled[s.Name]; !ok {
			o.unenrolled[s.Name] = at
		}
	}
	o.violations = append(o.violations, o.wipes.Observe(s, at)...)
}

func (o *observer) snapshotLoop(ctx context.Context) {
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := o.observe(ctx); err != nil && ctx.Err() == nil {
			o.mu.Lock()
			o.snapErrors++
			o.mu.Unlock()
		}
	}
}

// observe takes one consistent snapshot and checks it. The Servers come from the watch when it
// is current (the other kinds are then read at the watch's resourceVersion), which spares the
// apiserver a list of the whole fleet four times a second; from a list otherwise.
func (o *observer) observe(ctx context.Context) (*snapshot, error) {
	start := time.Now()
	o.mu.Lock()
	rv, current := o.watchRV, time.Since(o.watchAt) < time.Second
	var servers []m.Server
	if current {
		servers = make([]m.Server, 0, len(o.current))
		for _, s := range o.current {
			servers = append(servers, *s)
		}
	}
	o.mu.Unlock()
	var s *snapshot
	var err error
	if current && rv != "" {
		s = &snapshot{At: time.Now(), RV: rv, Servers: servers}
		err = listAt(ctx, o.c, s)
	} else {
		s, err = takeSnapshot(ctx, o.c)
	}
	if err != nil {
		return nil, err
	}
	s.Elapsed = time.Since(start)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.snapshots++
	o.wipes.noteProbeBoots(s)
	o.snapTime += s.Elapsed
	o.snapServers += s.ServersElapsed
	o.snapMax = max(o.snapMax, s.Elapsed)
	o.violations = append(o.violations, checkSnapshot(s, func(name string) time.Duration {
		first, ok := o.unenrolled[name]
		if !ok || o.calmSince.IsZero() {
			return 0
		}
		if first.Before(o.calmSince) {
			first = o.calmSince
		}
		return s.At.Sub(first)
	})...)
	return s, nil
}

// takeSnapshot lists Servers, then every other kind at exactly that list's resourceVersion:
// etcd revisions are global, so all lists show the same moment.
func takeSnapshot(ctx context.Context, c client.Client) (*snapshot, error) {
	start := time.Now()
	s := &snapshot{}
	var servers m.ServerList
	if err := c.List(ctx, &servers); err != nil {
		return nil, err
	}
	s.At, s.RV, s.Servers = time.Now(), servers.ResourceVersion, servers.Items
	s.ServersElapsed = time.Since(start)
	if err := listAt(ctx, c, s); err != nil {
		return nil, err
	}
	s.Elapsed = time.Since(start)
	return s, nil
}

// listAt reads every kind but Servers at exactly the snapshot's resourceVersion.
func listAt(ctx context.Context, c client.Client, s *snapshot) error {
	var claims m.ServerClaimList
	var boots m.ServerBootConfigurationList
	var maints m.ServerMaintenanceList
	var secrets corev1.SecretList
	lists := []client.ObjectList{&claims, &boots, &maints, &secrets}
	errs := make([]error, len(lists))
	var wg sync.WaitGroup
	for i, list := range lists {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each its own options: List writes into them.
			opts := []client.ListOption{&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: s.RV, ResourceVersionMatch: metav1.ResourceVersionMatchExact}}}
			if list == &secrets {
				opts = append(opts, client.InNamespace(lab.Namespace))
			}
			if err := c.List(ctx, list, opts...); err != nil {
				errs[i] = fmt.Errorf("listing %T at %s: %w", list, s.RV, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.Claims, s.Boots, s.Maints, s.Secrets = claims.Items, boots.Items, maints.Items, secrets.Items
	return nil
}

// releases is how many releases were followed to Available so far.
func (o *observer) releases() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.wipes.Releases)
}

// states counts the servers by state, from the watch's latest versions.
func (o *observer) states() map[m.ServerState]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	counts := map[m.ServerState]int{}
	for _, s := range o.current {
		counts[lab.StateOf(s)]++
	}
	return counts
}

// servers returns the latest version of every server.
func (o *observer) servers() []*m.Server {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*m.Server, 0, len(o.current))
	for _, s := range o.current {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (o *observer) allViolations() []violation {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]violation(nil), o.violations...)
}

func formatStates(counts map[m.ServerState]int) string {
	keys := make([]string, 0, len(counts))
	for k, n := range counts {
		keys = append(keys, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(keys)
	return strings.Join(keys, ", ")
}
