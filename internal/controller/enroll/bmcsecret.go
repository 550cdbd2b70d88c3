package enroll

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
)

// BMCSecretReconciler keeps BMCSecrets in use (BMCSecretFinalizer). It looks BMCs up by the
// index the BMC reconciler registers (indexBMCBySecret), so it is set up after that one.
type BMCSecretReconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	Settings settings.Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch

// Reconcile gives a BMCSecret a BMC names the finalizer, and takes it from a deleted one no BMC
// names any more.
func (r *BMCSecretReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var secret metalv1alpha1.BMCSecret
	if err := r.Client.Get(ctx, req.NamespacedName, &secret); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var bmcs metalv1alpha1.BMCList
	if err := r.Client.List(ctx, &bmcs, client.MatchingFields{indexBMCBySecret: secret.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the BMCs of BMCSecret %s: %w", secret.Name, err)
	}
	users := make([]string, 0, len(bmcs.Items))
	for _, b := range bmcs.Items {
		users = append(users, b.Name)
	}
	deleting := !secret.DeletionTimestamp.IsZero()
	before := secret.DeepCopy()
	switch {
	case len(users) > 0 && deleting:
		r.Events.Eventf(&secret, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonInUse, "Delete",
			"kept while BMC(s) %s use it (a deleted BMC's servers are wiped with it); it goes once none does", strings.Join(users, ", "))
		return ctrl.Result{}, nil
	case len(users) > 0:
		// Once deleted, no finalizer can be added: a BMCSecret deleted before its BMC was
		// first seen is not kept (the BMC says its credentials are gone).
		if !controllerutil.AddFinalizer(&secret, metalv1alpha1.BMCSecretFinalizer) {
			return ctrl.Result{}, nil
		}
	case deleting:
		if !controllerutil.RemoveFinalizer(&secret, metalv1alpha1.BMCSecretFinalizer) {
			return ctrl.Result{}, nil
		}
	default:
		return ctrl.Result{}, nil // unused: a finalizer it has goes when it is deleted
	}
	if err := r.Client.Patch(ctx, &secret, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{}, nil
}

// SetupWithManager registers the reconciler: it reacts to BMCSecrets, and to BMCs made,
// deleted, or pointed at another BMCSecret (not to their status).
func (r *BMCSecretReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("bmcsecret").
		For(&metalv1alpha1.BMCSecret{}).
		Watches(&metalv1alpha1.BMC{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*metalv1alpha1.BMC).Spec.BMCSecretRef.Name}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(r.Settings.ControllerOptions("bmcsecret")).
		Complete(r)
}
