package controller_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
	"github.com/ironfleet/ironfleet/test/lab"
)

// tenantData is what a tenant leaves at the start of its server's disk.
var tenantData = bytes.Repeat([]byte("tenant secret "), 4096)

func writeTenantData(t *testing.T, host lab.Host) {
	t.Helper()
	f, err := os.OpenFile(wipe.DevicePath(host.Root, host.Disks[0]), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(tenantData, 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func holdsTenantData(t *testing.T, host lab.Host) bool {
	t.Helper()
	holds, err := diskHoldsTenantData(host)
	require.NoError(t, err)
	return holds
}

func diskHoldsTenantData(host lab.Host) (bool, error) {
	f, err := os.Open(wipe.DevicePath(host.Root, host.Disks[0]))
	if err != nil {
		return false, err
	}
	defer f.Close()
	buf := make([]byte, len(tenantData))
	if _, err := f.ReadAt(buf, 0); err != nil {
		return false, err
	}
	return bytes.Equal(buf, tenantData), nil
}

// guard watches one machine: whatever Server holds its system UUID (the first, one made again
// after a deletion, or a second one a re-enrolment made), it must never be Available, nor held
// by another claim than the tenant's, while the machine's disk still holds the tenant's data.
type guard struct {
	uuid string
	host lab.Host

	mu     sync.Mutex
	tenant string // the UID of the tenant's claim
	seen   []string
}

// forTenant says which claim is the tenant's: the machine is its while it holds the data.
func (g *guard) forTenant(claim *m.ServerClaim) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.tenant = string(claim.UID)
}

func (g *guard) check(s *m.Server) {
	if !strings.EqualFold(s.Spec.SystemUUID, g.uuid) {
		return
	}
	g.mu.Lock()
	tenant := g.tenant
	g.mu.Unlock()
	pooled := s.Status.State == m.ServerStateAvailable && s.Spec.ServerClaimRef == nil
	another := s.Spec.ServerClaimRef != nil && s.Spec.ServerClaimRef.UID != tenant
	if !pooled && !another {
		return
	}
	// An unwiped machine stays unwiped until something wipes it, and nothing wipes an
	// Available server: reading the disk a moment after the version was written still tells.
	holds, err := diskHoldsTenantData(g.host)
	if err != nil || !holds {
		return
	}
	what := "Available"
	if another {
		what = fmt.Sprintf("held by claim %s/%s (uid %s), not the tenant's", s.Spec.ServerClaimRef.Namespace, s.Spec.ServerClaimRef.Name, s.Spec.ServerClaimRef.UID)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seen = append(g.seen, fmt.Sprintf("server %s (uid %s, rv %s) %s with the tenant's data on %s", s.Name, s.UID, s.ResourceVersion, what, g.host.Disks[0]))
}

// serverWatch hands every version of every Server, from one watch, to the guards: a server
// that is Available for a moment is seen, however short the moment.
var serverWatch struct {
	once   sync.Once
	err    error
	mu     sync.Mutex
	guards map[*guard]bool
}

func dispatch(s *m.Server) {
	serverWatch.mu.Lock()
	guards := make([]*guard, 0, len(serverWatch.guards))
	for g := range serverWatch.guards {
		guards = append(guards, g)
	}
	serverWatch.mu.Unlock()
	for _, g := range guards {
		g.check(s)
	}
}

func startServerWatch() error {
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		return err
	}
	ctx := context.Background()
	list := func() (string, error) {
		var servers m.ServerList
		if err := c.List(ctx, &servers); err != nil {
			return "", err
		}
		for i := range servers.Items {
			dispatch(&servers.Items[i])
		}
		return servers.ResourceVersion, nil
	}
	rv, err := list()
	if err != nil {
		return err
	}
	go func() {
		for {
			w, err := c.Watch(ctx, &m.ServerList{}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			for err == nil {
				ev, ok := <-w.ResultChan()
				if !ok {
					break
				}
				if ev.Type == watch.Error {
					rv = "" // expired: list again
					break
				}
				if s, ok := ev.Object.(*m.Server); ok {
					rv = s.ResourceVersion
					if ev.Type != watch.Deleted {
						dispatch(s)
					}
				}
			}
			if w != nil {
				w.Stop()
			}
			if rv == "" || err != nil {
				// Whatever happened meanwhile is in the list: a pooled server stays pooled.
				// The apiserver may be busy: asked again every 100 ms until it answers.
				_ = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
					rv, err = list()
					return err == nil, nil
				})
			}
		}
	}()
	return nil
}

// guardMachine fails the test when, from now until stop, any Server of the host's machine is
// Available (or held by another claim than the tenant's) while its disk holds the tenant's data.
func guardMachine(t *testing.T, host lab.Host, tenant *m.ServerClaim) (g *guard, stop func() []string) {
	serverWatch.once.Do(func() { serverWatch.err = startServerWatch() })
	require.NoError(t, serverWatch.err)
	g = &guard{uuid: host.UUID, host: host}
	if tenant != nil {
		g.forTenant(tenant)
	}
	serverWatch.mu.Lock()
	if serverWatch.guards == nil {
		serverWatch.guards = map[*guard]bool{}
	}
	serverWatch.guards[g] = true
	serverWatch.mu.Unlock()
	var once sync.Once
	stop = func() []string {
		once.Do(func() {
			serverWatch.mu.Lock()
			delete(serverWatch.guards, g)
			serverWatch.mu.Unlock()
		})
		g.mu.Lock()
		defer g.mu.Unlock()
		return slices.Clone(g.seen)
	}
	t.Cleanup(func() { stop() })
	return g, stop
}

// owner names an object whose dependents the garbage collector looks after.
type owner struct{ kind, name string }

// collectGarbage plays, until the test ends, what kube-controller-manager's garbage collector
// (which envtest does not run) does with the dependents of the owners named: an object whose
// owners are all gone is deleted (background deletion); the dependents of an owner deleted with
// propagationPolicy Foreground are deleted, new ones too, and the owner's foregroundDeletion
// finalizer is removed once no dependent that blocks its deletion is left.
func collectGarbage(t *testing.T, owners ...owner) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if err := collectOnce(ctx, owners); err != nil && ctx.Err() == nil {
				t.Logf("garbage collector: %v", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

func collectOnce(ctx context.Context, owners []owner) error {
	// The possible dependents first, then their owners: an owner made after the dependents were
	// listed is no dependent's listed here, and an owner read before its dependent was made
	// would pass for gone.
	var bmcs m.BMCList
	var secrets m.BMCSecretList
	var boots m.ServerBootConfigurationList
	var ignitions corev1.SecretList
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&bmcs, nil}, {&secrets, nil}, {&boots, []client.ListOption{client.InNamespace(systemNamespace)}}, {&ignitions, []client.ListOption{client.InNamespace(systemNamespace)}}} {
		if err := k8s.List(ctx, l.list, l.opts...); err != nil {
			return err
		}
	}
	var dependents []client.Object
	for i := range bmcs.Items {
		dependents = append(dependents, &bmcs.Items[i])
	}
	for i := range secrets.Items {
		dependents = append(dependents, &secrets.Items[i])
	}
	for i := range boots.Items {
		dependents = append(dependents, &boots.Items[i])
	}
	for i := range ignitions.Items {
		dependents = append(dependents, &ignitions.Items[i])
	}
	live := map[owner]client.Object{}
	for _, o := range owners {
		var obj client.Object
		switch o.kind {
		case "Endpoint":
			obj = &m.Endpoint{}
		case "BMC":
			obj = &m.BMC{}
		case "Server":
			obj = &m.Server{}
		default:
			return fmt.Errorf("no owner kind %s", o.kind)
		}
		err := k8s.Get(ctx, client.ObjectKey{Name: o.name}, obj)
		if err == nil {
			live[o] = obj
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	blocking := map[types.UID]bool{}
	for _, d := range dependents {
		solid, collect := false, false
		for _, ref := range d.GetOwnerReferences() {
			o := owner{ref.Kind, ref.Name}
			if !slices.Contains(owners, o) {
				solid = true // not ours to judge
				continue
			}
			obj := live[o]
			switch {
			case obj == nil || obj.GetUID() != ref.UID:
				collect = true // dangling
			case !obj.GetDeletionTimestamp().IsZero() && slices.Contains(obj.GetFinalizers(), metav1.FinalizerDeleteDependents):
				collect = true // its owner waits for it to go
				if ref.BlockOwnerDeletion != nil && *ref.BlockOwnerDeletion {
					blocking[ref.UID] = true
				}
			default:
				solid = true
			}
		}
		if collect && !solid && d.GetDeletionTimestamp().IsZero() {
			// Only the version judged: one taken over by a new owner meanwhile is not collected
			// (the collector reads an object again before it deletes it).
			uid, rv := d.GetUID(), d.GetResourceVersion()
			err := k8s.Delete(ctx, d, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid, ResourceVersion: &rv})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	for _, obj := range live {
		if obj.GetDeletionTimestamp().IsZero() || blocking[obj.GetUID()] || !slices.Contains(obj.GetFinalizers(), metav1.FinalizerDeleteDependents) {
			continue
		}
		before := obj.DeepCopyObject().(client.Object)
		obj.SetFinalizers(slices.DeleteFunc(obj.GetFinalizers(), func(f string) bool { return f == metav1.FinalizerDeleteDependents }))
		if err := k8s.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// A deleted Server that holds nothing of a tenant goes at once.
func TestDeletingAnUnclaimedServerIsImmediate(t *testing.T) {
	ctx := context.Background()
	_, name := startOneServer(t, "delete-clean", 499)
	var old m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &old))
	assert.Contains(t, old.Finalizers, m.ServerFinalizer, "servers are made with the finalizer")
	require.NoError(t, k8s.Delete(ctx, &old))
	eventually(t, 10*time.Second, func() bool {
		var s m.Server
		err := k8s.Get(ctx, client.ObjectKey{Name: name}, &s)
		return apierrors.IsNotFound(err) || (err == nil && s.UID != old.UID)
	}, "gone at once")
}
