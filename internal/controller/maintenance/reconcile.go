// Package maintenance reconciles ServerMaintenances: it takes a server out of its lifecycle,
// with its owner's approval or enforced, and gives it back when the maintenance ends.
package maintenance

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

const indexMaintenanceByServer = "spec.serverRef.name"

// Reconciler hands servers to maintenance: at once when Enforced, after the
// claim's owner approves when OwnerApproval and the server is claimed. The server reconciler
// does the rest (state, power); deleting the maintenance gives the server back. The
// maintenance's state moves only through fsm.Maintenance: each reconcile observes the server,
// fires at most one event, and writes status once (not at all when nothing changed).
type Reconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	Settings settings.Settings

	// written keeps a reconcile woken before the cache has the maintenance's last write from
	// writing it again; servers, one that follows a take (or a give-back) from reading the
	// server as the cache had it before, and taking it twice.
	written, servers *cached.Writes
}

// errCacheBehind: the cache has not yet seen the reconciler's own last write of the server;
// the reconcile comes back in a moment instead of acting on the older object.
var errCacheBehind = errors.New("the cache is behind our last write")

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;update;patch

// Reconcile takes or gives back one maintenance's server.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sm metalv1alpha1.ServerMaintenance
	behind, err := r.written.Get(ctx, r.Client, req.NamespacedName, &sm)
	if err != nil || behind {
		return cached.CatchUpIf(behind), client.IgnoreNotFound(err)
	}
	if !sm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.giveBack(ctx, &sm)
	}
	read := sm.ResourceVersion
	if controllerutil.AddFinalizer(&sm, metalv1alpha1.MaintenanceFinalizer) {
		if err := r.Client.Update(ctx, &sm); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	finalized := sm.ResourceVersion
	original := sm.DeepCopy()
	if sm.Status.State == "" {
		sm.Status.State = fsm.Maintenance.Initial
	}
	st, err := r.observe(ctx, &sm)
	if errors.Is(err, errCacheBehind) {
		return cached.CatchUpIf(true), nil
	}
	if err == nil && st.event != "" {
		to, fsmErr := fsm.NextMaintenanceState(ctx, sm.Status.State, st.event)
		if fsmErr != nil {
			return ctrl.Result{}, fsmErr // an observation the table does not allow here: a bug
		}
		sm.Status.State = to
	}
	if err == nil {
		status.SetCondition(&sm.Status.Conditions, sm.Generation, metalv1alpha1.ConditionReady,
			status.BoolStatus(sm.Status.State == metalv1alpha1.MaintenanceStateInMaintenance), st.reason, st.message)
	}
	based := sm.ResourceVersion
	result, err := status.Finish(ctx, r.Client, &sm, original, ctrl.Result{RequeueAfter: st.requeueAfter}, err)
	r.written.Wrote(&sm, read, finalized, based)
	return result, err
}

// maintenanceStep is what a state's handler decided: an event to fire (or none), and the Ready
// condition's reason and message, which say what the maintenance waits for.
type maintenanceStep struct {
	event           fsm.MaintenanceEvent
	reason, message string
	// requeueAfter brings the maintenance back when its next step has no event to wake it.
	requeueAfter time.Duration
}

// observe reads the maintenance's server and asks its state's handler what happened.
func (r *Reconciler) observe(ctx context.Context, sm *metalv1alpha1.ServerMaintenance) (maintenanceStep, error) {
	name := sm.Spec.ServerRef.Name
	var server metalv1alpha1.Server
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &server); err != nil {
		if !apierrors.IsNotFound(err) {
			return maintenanceStep{}, err
		}
		st := maintenanceStep{reason: metalv1alpha1.ReasonServerNotFound,
			message: "server " + name + " does not exist: fix spec.serverRef or delete this maintenance (a server of that name is taken when it appears)"}
		if sm.Status.State != metalv1alpha1.MaintenanceStateFailed {
			st.event = fsm.MaintenanceEventServerMissing
		}
		return st, nil
	}
	if r.servers.Behind(&server) {
		return maintenanceStep{}, errCacheBehind
	}
	switch sm.Status.State {
	case metalv1alpha1.MaintenanceStateFailed:
		return maintenanceStep{event: fsm.MaintenanceEventServerAppeared, reason: metalv1alpha1.ReasonTakingServer,
			message: "server " + name + " exists now; taking it", requeueAfter: time.Millisecond}, nil
	case metalv1alpha1.MaintenanceStateInMaintenance:
		if server.HeldByMaintenance(sm) && server.Status.State == metalv1alpha1.ServerStateMaintenance {
			return maintenanceStep{reason: metalv1alpha1.ReasonInMaintenance, message: "server " + name + " is in maintenance"}, nil
		}
		return maintenanceStep{event: fsm.MaintenanceEventServerLeft, reason: metalv1alpha1.ReasonTakingServer,
			message: fmt.Sprintf("server %s left maintenance (it is %s); taking it again", name, server.Status.State), requeueAfter: time.Millisecond}, nil
	default:
		return r.pending(ctx, sm, &server)
	}
}

// pending takes the server, when its claim's owner allows, and waits until its reconciler has
// moved it to Maintenance.
func (r *Reconciler) pending(ctx context.Context, sm *metalv1alpha1.ServerMaintenance, server *metalv1alpha1.Server) (maintenanceStep, error) {
	if ref := server.Spec.MaintenanceRef; ref != nil {
		if !server.HeldByMaintenance(sm) {
			return maintenanceStep{reason: metalv1alpha1.ReasonServerHeld, message: fmt.Sprintf("server %s is held by ServerMaintenance %s/%s; this one takes it once that one is deleted", server.Name, ref.Namespace, ref.Name)}, nil
		}
		if server.Status.State == metalv1alpha1.ServerStateMaintenance {
			return maintenanceStep{event: fsm.MaintenanceEventServerEntered, reason: metalv1alpha1.ReasonInMaintenance, message: "server " + server.Name + " is in maintenance"}, nil
		}
		return maintenanceStep{reason: metalv1alpha1.ReasonTakingServer, message: takingMessage(server)}, nil
	}
	if claimRef := server.Spec.ServerClaimRef; claimRef != nil && cmp.Or(sm.Spec.Policy, metalv1alpha1.MaintenanceOwnerApproval) == metalv1alpha1.MaintenanceOwnerApproval {
		var claim metalv1alpha1.ServerClaim
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: claimRef.Namespace, Name: claimRef.Name}, &claim)
		if client.IgnoreNotFound(err) != nil {
			return maintenanceStep{}, err
		}
		if err == nil && claim.Annotations[metalv1alpha1.AnnotationApproveMaintenance] != "true" {
			// The owner, who must approve, cannot read this maintenance's status: the claim,
			// in the owner's namespace, is told, once (when this maintenance starts waiting).
			if c := apimeta.FindStatusCondition(sm.Status.Conditions, metalv1alpha1.ConditionReady); c == nil || c.Reason != metalv1alpha1.ReasonWaitingForApproval {
				r.Events.Eventf(&claim, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonMaintenanceRequested, "RequestMaintenance",
					"an admin asks to take server %s into maintenance (ServerMaintenance %s/%s: %q): set the annotation %s=true on this claim to let it be taken; it comes back to this claim when the maintenance ends",
					server.Name, sm.Namespace, sm.Name, sm.Spec.Reason, metalv1alpha1.AnnotationApproveMaintenance)
			}
			return maintenanceStep{reason: metalv1alpha1.ReasonWaitingForApproval, message: fmt.Sprintf(
				"server %s is claimed by %s/%s: waiting for its owner to set the annotation %s=true on the claim",
				server.Name, claimRef.Namespace, claimRef.Name, metalv1alpha1.AnnotationApproveMaintenance)}, nil
		}
	}
	read := server.ResourceVersion
	ref := &metalv1alpha1.ObjectReference{Namespace: sm.Namespace, Name: sm.Name, UID: string(sm.UID)}
	// The server's generation is tested too: a take a killed manager sent that lands late
	// takes nothing whose spec changed meanwhile.
	if err := patchServerJSON(ctx, r.Client, server, []map[string]any{
		{"op": "test", "path": "/metadata/generation", "value": server.Generation},
		{"op": "test", "path": "/spec/maintenanceRef", "value": nil},
		{"op": "add", "path": "/spec/maintenanceRef", "value": ref},
	}); err != nil {
		return maintenanceStep{}, fmt.Errorf("taking server %s: %w", server.Name, err)
	}
	r.servers.Wrote(server, read)
	r.Events.Eventf(sm, server, corev1.EventTypeNormal, metalv1alpha1.ReasonTakingServer, "StartMaintenance", "took server %s: %s", server.Name, sm.Spec.Reason)
	return maintenanceStep{reason: metalv1alpha1.ReasonTakingServer, message: takingMessage(server)}, nil
}

// takingMessage says the server is on its way: the same words while it is, so that the
// reconciles its moves cause write nothing until it is in Maintenance.
func takingMessage(server *metalv1alpha1.Server) string {
	return fmt.Sprintf("server %s is being taken into maintenance (it is %s)", server.Name, server.Status.State)
}

// giveBack clears the server's maintenance reference (the server reconciler returns it to its
// claim or to re-discovery) and lets the maintenance go.
func (r *Reconciler) giveBack(ctx context.Context, sm *metalv1alpha1.ServerMaintenance) error {
	if !controllerutil.ContainsFinalizer(sm, metalv1alpha1.MaintenanceFinalizer) {
		return nil
	}
	var server metalv1alpha1.Server
	err := r.Client.Get(ctx, client.ObjectKey{Name: sm.Spec.ServerRef.Name}, &server)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil && server.HeldByMaintenance(sm) {
		read := server.ResourceVersion
		if err := patchServerJSON(ctx, r.Client, &server, []map[string]any{
			{"op": "test", "path": "/spec/maintenanceRef/namespace", "value": sm.Namespace},
			{"op": "test", "path": "/spec/maintenanceRef/name", "value": sm.Name},
			{"op": "test", "path": "/spec/maintenanceRef/uid", "value": server.Spec.MaintenanceRef.UID},
			{"op": "remove", "path": "/spec/maintenanceRef"},
		}); err != nil {
			return fmt.Errorf("giving back server %s: %w", server.Name, err)
		}
		r.servers.Wrote(&server, read)
		r.Events.Eventf(sm, &server, corev1.EventTypeNormal, metalv1alpha1.ReasonMaintenanceEnded, "EndMaintenance", "gave back server %s", server.Name)
	}
	read := sm.ResourceVersion
	controllerutil.RemoveFinalizer(sm, metalv1alpha1.MaintenanceFinalizer)
	if err := r.Client.Update(ctx, sm); err != nil {
		return client.IgnoreNotFound(err)
	}
	// Gone in a moment: a reconcile woken meanwhile waits for the cache to say so.
	r.written.Going(sm, read)
	return nil
}

// patchServerJSON patches the server's spec with JSON patch operations whose tests say what it
// must still be: unlike an optimistic lock, they do not fail because its status moved on (its
// reconciler and its BMC's polls write it all the time).
func patchServerJSON(ctx context.Context, c client.Client, server *metalv1alpha1.Server, ops []map[string]any) error {
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return c.Patch(ctx, server, client.RawPatch(types.JSONPatchType, data))
}

// SetupWithManager registers the reconciler: it reacts to its server and to that server's claim
// (where the owner's approval arrives).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &metalv1alpha1.ServerMaintenance{}, indexMaintenanceByServer, func(o client.Object) []string {
		return []string{o.(*metalv1alpha1.ServerMaintenance).Spec.ServerRef.Name}
	}); err != nil {
		return err
	}
	r.written, r.servers = cached.NewWrites(), cached.NewWrites()
	return ctrl.NewControllerManagedBy(mgr).
		Named("servermaintenance").
		// Its own status writes do not wake it: what it waits for is its server, and its claim.
		For(&metalv1alpha1.ServerMaintenance{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
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
		WithOptions(r.Settings.ControllerOptions("servermaintenance")).
		Complete(r)
}

func (r *Reconciler) maintenancesOf(ctx context.Context, server string) []reconcile.Request {
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
