package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// MaintenanceFinalizer holds a ServerMaintenance until its server is given back.
const MaintenanceFinalizer = "metal.ironfleet.dev/maintenance"

const indexMaintenanceByServer = "spec.serverRef.name"

// Reasons of a ServerMaintenance's Ready condition.
const (
	ReasonWaitingForApproval = "WaitingForOwnerApproval"
	ReasonServerHeld         = "ServerHeldByOtherMaintenance"
	ReasonServerNotFound     = "ServerNotFound"
	ReasonTakingServer       = "TakingServer"
	ReasonInMaintenance      = "InMaintenance"
)

// ServerMaintenanceReconciler hands servers to maintenance: at once when Enforced, after the
// claim's owner approves when OwnerApproval and the server is claimed. The server reconciler
// does the rest (state, power); deleting the maintenance gives the server back.
type ServerMaintenanceReconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	Settings Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;update;patch

// Reconcile takes or gives back one maintenance's server.
func (r *ServerMaintenanceReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sm metalv1alpha1.ServerMaintenance
	if err := r.Client.Get(ctx, req.NamespacedName, &sm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.giveBack(ctx, &sm)
	}
	if controllerutil.AddFinalizer(&sm, MaintenanceFinalizer) {
		if err := r.Client.Update(ctx, &sm); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	original := sm.DeepCopy()
	err := r.take(ctx, &sm)
	return finishWithStatus(ctx, r.Client, &sm, original, ctrl.Result{}, err)
}

func (r *ServerMaintenanceReconciler) take(ctx context.Context, sm *metalv1alpha1.ServerMaintenance) error {
	set := func(state metalv1alpha1.MaintenanceState, ok bool, reason, message string) {
		sm.Status.State = state
		setCondition(&sm.Status.Conditions, sm.Generation, metalv1alpha1.ConditionReady, boolStatus(ok), reason, message)
	}
	var server metalv1alpha1.Server
	if err := r.Client.Get(ctx, client.ObjectKey{Name: sm.Spec.ServerRef.Name}, &server); err != nil {
		if apierrors.IsNotFound(err) {
			set(metalv1alpha1.MaintenanceStateFailed, false, ReasonServerNotFound, "server "+sm.Spec.ServerRef.Name+" does not exist")
			return nil
		}
		return err
	}
	if ref := server.Spec.MaintenanceRef; ref != nil {
		if ref.Namespace != sm.Namespace || ref.Name != sm.Name {
			set(metalv1alpha1.MaintenanceStatePending, false, ReasonServerHeld, fmt.Sprintf("server %s is held by ServerMaintenance %s/%s", server.Name, ref.Namespace, ref.Name))
			return nil
		}
		if server.Status.State == metalv1alpha1.ServerStateMaintenance {
			set(metalv1alpha1.MaintenanceStateInMaintenance, true, ReasonInMaintenance, "server "+server.Name+" is in maintenance")
		} else {
			set(metalv1alpha1.MaintenanceStatePending, false, ReasonTakingServer, fmt.Sprintf("server %s is leaving %s", server.Name, server.Status.State))
		}
		return nil
	}
	if claimRef := server.Spec.ServerClaimRef; claimRef != nil && orDefault(sm.Spec.Policy, metalv1alpha1.MaintenanceOwnerApproval) == metalv1alpha1.MaintenanceOwnerApproval {
		var claim metalv1alpha1.ServerClaim
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: claimRef.Namespace, Name: claimRef.Name}, &claim)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil && claim.Annotations[metalv1alpha1.AnnotationApproveMaintenance] != "true" {
			set(metalv1alpha1.MaintenanceStatePending, false, ReasonWaitingForApproval, fmt.Sprintf(
				"server %s is claimed by %s/%s: waiting for its owner to set the annotation %s=true on the claim",
				server.Name, claimRef.Namespace, claimRef.Name, metalv1alpha1.AnnotationApproveMaintenance))
			return nil
		}
	}
	before := server.DeepCopy()
	server.Spec.MaintenanceRef = &metalv1alpha1.ObjectReference{Namespace: sm.Namespace, Name: sm.Name, UID: string(sm.UID)}
	if err := r.Client.Patch(ctx, &server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("taking server %s: %w", server.Name, err)
	}
	r.Events.Eventf(sm, &server, corev1.EventTypeNormal, ReasonTakingServer, "StartMaintenance", "took server %s: %s", server.Name, sm.Spec.Reason)
	set(metalv1alpha1.MaintenanceStatePending, false, ReasonTakingServer, "server "+server.Name+" is being taken into maintenance")
	return nil
}

// giveBack clears the server's maintenance reference (the server reconciler returns it to its
// claim or to re-discovery) and lets the maintenance go.
func (r *ServerMaintenanceReconciler) giveBack(ctx context.Context, sm *metalv1alpha1.ServerMaintenance) error {
	if !controllerutil.ContainsFinalizer(sm, MaintenanceFinalizer) {
		return nil
	}
	var server metalv1alpha1.Server
	err := r.Client.Get(ctx, client.ObjectKey{Name: sm.Spec.ServerRef.Name}, &server)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if ref := server.Spec.MaintenanceRef; err == nil && ref != nil && ref.Namespace == sm.Namespace && ref.Name == sm.Name {
		before := server.DeepCopy()
		server.Spec.MaintenanceRef = nil
		if err := r.Client.Patch(ctx, &server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("giving back server %s: %w", server.Name, err)
		}
		r.Events.Eventf(sm, &server, corev1.EventTypeNormal, ReasonMaintenanceEnded, "EndMaintenance", "gave back server %s", server.Name)
	}
	controllerutil.RemoveFinalizer(sm, MaintenanceFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, sm))
}

// SetupWithManager registers the reconciler: it reacts to its server and to that server's claim
// (where the owner's approval arrives).
func (r *ServerMaintenanceReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &metalv1alpha1.ServerMaintenance{}, indexMaintenanceByServer, func(o client.Object) []string {
		return []string{o.(*metalv1alpha1.ServerMaintenance).Spec.ServerRef.Name}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("servermaintenance").
		For(&metalv1alpha1.ServerMaintenance{}).
		Watches(&metalv1alpha1.Server{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.maintenancesOf(ctx, o.GetName())
		})).
		Watches(&metalv1alpha1.ServerClaim{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			claim := o.(*metalv1alpha1.ServerClaim)
			if claim.Status.ServerRef == nil {
				return nil
			}
			return r.maintenancesOf(ctx, claim.Status.ServerRef.Name)
		})).
		WithOptions(r.Settings.controllerOptions("servermaintenance")).
		Complete(r)
}

func (r *ServerMaintenanceReconciler) maintenancesOf(ctx context.Context, server string) []reconcile.Request {
	var list metalv1alpha1.ServerMaintenanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{indexMaintenanceByServer: server}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, sm := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sm)})
	}
	return reqs
}
