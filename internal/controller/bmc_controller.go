package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// BMCFinalizer lets the BMC reconciler delete the BMC's unclaimed Servers (and keep the
// claimed ones) before the BMC goes.
const BMCFinalizer = "metal.ironfleet.dev/bmc"

// Field indexes the BMC reconciler looks objects up by.
const (
	indexBMCBySecret   = "spec.bmcSecretRef.name"
	indexBMCByEndpoint = "spec.endpointRef.name"
	indexServerByBMC   = "spec.bmcRef.name"
)

// BMCReconciler connects to BMCs, fills their status, and keeps one Server per ComputerSystem.
type BMCReconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	Clients  *bmc.Cache
	Settings Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers/status,verbs=get;update;patch

// Reconcile syncs one BMC.
func (r *BMCReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b metalv1alpha1.BMC
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		err := r.delete(ctx, &b)
		var waiting errWaitingForServers
		if errors.As(err, &waiting) {
			log.FromContext(ctx).Info(waiting.Error())
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	if controllerutil.AddFinalizer(&b, BMCFinalizer) {
		if err := r.Client.Update(ctx, &b); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	original := b.DeepCopy()
	result, err := r.sync(ctx, &b)
	b.Status.ObservedGeneration = b.Generation
	r.recordReadyChange(original, &b)
	return finishWithStatus(ctx, r.Client, &b, original, result, err)
}

// sync talks to the BMC and returns when to come back.
func (r *BMCReconciler) sync(ctx context.Context, b *metalv1alpha1.BMC) (ctrl.Result, error) {
	target, err := resolveTarget(ctx, r.Client, b)
	if err != nil {
		r.setFailed(b, err)
		if bmc.Reason(err) == metalv1alpha1.BMCReasonUnsupportedProtocol {
			return ctrl.Result{}, nil // nothing will change until the spec does
		}
		return ctrl.Result{}, err
	}
	b.Status.Address = target.Address.String()

	client, err := r.Clients.Get(ctx, b.Name, target)
	if err != nil {
		r.setFailed(b, err)
		return ctrl.Result{}, err
	}
	if needsManagerInfo(b) {
		manager, err := client.Manager(ctx)
		if err != nil {
			return ctrl.Result{}, r.callFailed(b, err)
		}
		b.Status.Manufacturer, b.Status.Model = manager.Manufacturer, manager.Model
		b.Status.SerialNumber, b.Status.FirmwareVersion = manager.SerialNumber, manager.FirmwareVersion
		b.Status.PowerState = manager.PowerState
	}
	systems, err := client.Systems(ctx)
	if err != nil {
		return ctrl.Result{}, r.callFailed(b, err)
	}
	raced, err := r.syncServers(ctx, b, client, systems)
	if err != nil {
		return ctrl.Result{}, err
	}
	if now := time.Now(); b.Status.LastSeen == nil || now.Sub(b.Status.LastSeen.Time) >= lastSeenEvery(r.Settings) {
		b.Status.LastSeen = &metav1.Time{Time: now}
	}
	b.Status.State = metalv1alpha1.BMCStateEnabled
	setCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, metalv1alpha1.BMCReasonConnected,
		fmt.Sprintf("connected; %d system(s)", len(systems)))
	if raced {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{RequeueAfter: r.Settings.jitteredResync()}, nil
}

// lastSeenEvery is how stale a healthy BMC's LastSeen may grow before a poll rewrites it. A poll
// that changes nothing else then writes nothing: ten thousand BMCs polled every five minutes
// would otherwise cost the apiserver 33 status writes a second just to say "still there".
// Ready=True (and its lastTransitionTime) says the BMC answers; LastSeen is at most this old.
func lastSeenEvery(s Settings) time.Duration {
	period := s.ResyncPeriod
	if period <= 0 {
		period = DefaultSettings().ResyncPeriod
	}
	return 6 * period
}

// needsManagerInfo says whether a poll reads the BMC's own identity (vendor, model, serial,
// firmware) as well as its systems: when it (re)connects or its spec changed, not on every
// routine poll, which halves an idle fleet's Redfish requests. A firmware update restarts the
// BMC, which a poll sees as a failure first, so the new version is read on reconnecting.
func needsManagerInfo(b *metalv1alpha1.BMC) bool {
	return b.Status.Manufacturer == "" || b.Status.ObservedGeneration != b.Generation ||
		!meta.IsStatusConditionTrue(b.Status.Conditions, metalv1alpha1.ConditionReady)
}

// callFailed records a failed call on an open client; a refused session is dropped so that the
// next attempt logs in again.
func (r *BMCReconciler) callFailed(b *metalv1alpha1.BMC, err error) error {
	if bmc.Reason(err) == metalv1alpha1.BMCReasonAuthenticationFailed {
		r.Clients.Invalidate(b.Name)
	}
	r.setFailed(b, err)
	return err
}

func (r *BMCReconciler) setFailed(b *metalv1alpha1.BMC, err error) {
	b.Status.State = metalv1alpha1.BMCStateError
	setCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, bmc.Reason(err), err.Error())
}

// recordReadyChange emits an event when the Ready condition changes reason, not on every retry.
func (r *BMCReconciler) recordReadyChange(before, after *metalv1alpha1.BMC) {
	now := meta.FindStatusCondition(after.Status.Conditions, metalv1alpha1.ConditionReady)
	if now == nil {
		return
	}
	if was := meta.FindStatusCondition(before.Status.Conditions, metalv1alpha1.ConditionReady); was != nil && was.Reason == now.Reason {
		return
	}
	eventType := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue {
		eventType = corev1.EventTypeWarning
	}
	r.Events.Eventf(after, nil, eventType, now.Reason, "Connect", "%s", now.Message)
}

// errWaitingForServers: a deleted BMC's Servers are still going (each is wiped first when it
// may hold a tenant's data); the BMC waits for them, and is looked at again.
type errWaitingForServers struct {
	bmc string
	n   int
}

func (e errWaitingForServers) Error() string {
	return fmt.Sprintf("BMC %s waits for %d of its servers to be wiped and deleted", e.bmc, e.n)
}

// delete removes the BMC's Servers that no claim holds, keeps the claimed ones (a tenant's
// machine does not vanish because its BMC record did), waits until the removed ones are gone —
// a Server that may hold a tenant's data is wiped through this BMC first (ServerFinalizer) —
// and then lets the BMC go.
func (r *BMCReconciler) delete(ctx context.Context, b *metalv1alpha1.BMC) error {
	if !controllerutil.ContainsFinalizer(b, BMCFinalizer) {
		return nil
	}
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerByBMC: b.Name}); err != nil {
		return fmt.Errorf("listing the BMC's servers: %w", err)
	}
	going := 0
	for i := range servers.Items {
		s := &servers.Items[i]
		if s.Spec.ServerClaimRef != nil && s.DeletionTimestamp.IsZero() {
			log.FromContext(ctx).Info("keeping claimed server of deleted BMC", "server", s.Name, "claim", s.Spec.ServerClaimRef.Name)
			r.Events.Eventf(b, s, corev1.EventTypeWarning, "ClaimedServerKept", "Delete",
				"server %s is claimed by %s/%s and was kept", s.Name, s.Spec.ServerClaimRef.Namespace, s.Spec.ServerClaimRef.Name)
			continue
		}
		if s.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting server %s: %w", s.Name, err)
			}
		}
		if controllerutil.ContainsFinalizer(s, ServerFinalizer) {
			// It may hold a tenant's data: it is wiped, through this BMC, before it goes.
			going++
		}
	}
	if going > 0 {
		return errWaitingForServers{bmc: b.Name, n: going}
	}
	r.Clients.Forget(b.Name)
	controllerutil.RemoveFinalizer(b, BMCFinalizer)
	return r.Client.Update(ctx, b)
}

// SetupWithManager registers the reconciler and the indexes it needs.
func (r *BMCReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(ctx, &metalv1alpha1.BMC{}, indexBMCBySecret, func(o client.Object) []string {
		return []string{o.(*metalv1alpha1.BMC).Spec.BMCSecretRef.Name}
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &metalv1alpha1.BMC{}, indexBMCByEndpoint, func(o client.Object) []string {
		if ref := o.(*metalv1alpha1.BMC).Spec.EndpointRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &metalv1alpha1.Server{}, indexServerByBMC, func(o client.Object) []string {
		if ref := o.(*metalv1alpha1.Server).Spec.BMCRef; ref != nil {
			return []string{ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("bmc").
		For(&metalv1alpha1.BMC{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&metalv1alpha1.BMCSecret{}, r.enqueueBMCsBy(indexBMCBySecret)).
		Watches(&metalv1alpha1.Endpoint{}, r.enqueueBMCsBy(indexBMCByEndpoint)).
		// A Server that is gone (wiped first when it held a tenant's data) is made again for
		// its system at once, and a deleted BMC waiting for its Servers goes.
		Watches(&metalv1alpha1.Server{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if ref := o.(*metalv1alpha1.Server).Spec.BMCRef; ref != nil {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ref.Name}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return true },
		})).
		WithOptions(r.Settings.controllerOptions("bmc")).
		Complete(r)
}

// enqueueBMCsBy maps a changed object to the BMCs that reference it through index.
func (r *BMCReconciler) enqueueBMCsBy(index string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var bmcs metalv1alpha1.BMCList
		if err := r.Client.List(ctx, &bmcs, client.MatchingFields{index: o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(bmcs.Items))
		for _, b := range bmcs.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&b)})
		}
		return reqs
	})
}
