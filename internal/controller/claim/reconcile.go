// Package claim reconciles ServerClaims: it binds a matching Available server (an optimistic-
// lock patch), follows its install, and releases it when the claim goes. For another boot
// operator it hands the server the claim's own boot configuration.
package claim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// Field indexes: servers by the claim holding them; bindable servers; claims still waiting.
const (
	indexServerByClaim  = "spec.serverClaimRef"
	indexServerBindable = "bindable"
	indexClaimPending   = "pending"
)

// Reconciler binds claims to servers, asks the boot service for their image, and
// releases the server when the claim is deleted. A claim's phase moves only through
// fsm.Claim: each reconcile observes which server holds the claim, fires at most one event,
// and writes the claim's status once (not at all when nothing changed).
//
// Binding is two optimistic-concurrency writes: the claim records which server it is about to
// take (its intent), then the server records its claim. A stale read of the claim fails at the
// first write, a server someone else took fails at the second: two claims never hold one
// server, and one claim never holds two.
type Reconciler struct {
	Client    client.Client
	APIReader client.Reader
	Events    events.EventRecorder
	Settings  settings.Settings
	// BootOperator labels the boot configurations of claims' images (probeboot.Config.BootOperator).
	BootOperator string

	// cached reads the cache's indexes without copying (set up with the manager).
	cached cached.IndexedReader

	// written keeps a reconcile woken before the cache has the claim's last write (a server's
	// news comes at once) from binding or writing its status again.
	written *cached.Writes
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverbootconfigurations,verbs=get;list;watch;create;update;patch;delete

// Reconcile binds, provisions or releases one claim.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var claim metalv1alpha1.ServerClaim
	behind, err := r.written.Get(ctx, r.Client, req.NamespacedName, &claim)
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, probeboot.DropOrphanClaimBoot(ctx, r.Client, r.APIReader, req.NamespacedName, nil)
	}
	if err != nil || behind {
		return cached.CatchUpIf(behind), err
	}
	if err := probeboot.DropOrphanClaimBoot(ctx, r.Client, r.APIReader, req.NamespacedName, &claim); err != nil {
		return ctrl.Result{}, err
	}
	if !claim.DeletionTimestamp.IsZero() {
		return r.releasing(ctx, &claim)
	}
	read := claim.ResourceVersion
	if controllerutil.AddFinalizer(&claim, metalv1alpha1.ClaimFinalizer) {
		if err := r.Client.Update(ctx, &claim); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	finalized := claim.ResourceVersion
	original := claim.DeepCopy()
	if claim.Status.Phase == "" {
		claim.Status.Phase = fsm.Claim.Initial
	}
	var st claimStep
	switch claim.Status.Phase {
	case metalv1alpha1.ClaimPhaseBound:
		st, err = r.bound(ctx, &claim)
	default:
		st, err = r.pending(ctx, &claim)
	}
	if errors.Is(err, errRetryBind) {
		return ctrl.Result{RequeueAfter: retryJitter()}, nil
	}
	// A handler fires an event only for what has happened (a server took the claim, or it was
	// lost), even when a later step of its failed (the image's boot configuration): the
	// phase says so either way, and the error is retried.
	if st.event != "" {
		to, fsmErr := fsm.NextClaimPhase(ctx, claim.Status.Phase, st.event)
		if fsmErr != nil {
			return ctrl.Result{}, fsmErr // an event the table does not allow here: a bug
		}
		claim.Status.Phase = to
	}
	claim.Status.ObservedGeneration = claim.Generation
	based := claim.ResourceVersion // after the finalizer and the bind's intent, if written
	// The status write is of status alone (the intent's write moved the metadata on).
	original.ObjectMeta = *claim.ObjectMeta.DeepCopy()
	result, err := status.Finish(ctx, r.Client, &claim, original, ctrl.Result{RequeueAfter: st.requeueAfter}, err)
	r.written.Wrote(&claim, read, finalized, based)
	return result, err
}

// claimStep is what a phase's handler decided: an event to fire, or none. The handlers set the
// claim's conditions (and server reference) themselves; only the reconcile moves its phase.
type claimStep struct {
	event        fsm.ClaimEvent
	requeueAfter time.Duration
}

// errRetryBind means a bind lost a race; the claim is tried again shortly, with another server.
var errRetryBind = errors.New("bind lost a race")

func retryJitter() time.Duration {
	return 20*time.Millisecond + time.Duration(time.Now().UnixNano()%int64(80*time.Millisecond))
}

// pending looks for the server that holds the claim, or takes a matching one; while none
// matches the claim waits, NoMatchingServer.
func (r *Reconciler) pending(ctx context.Context, claim *metalv1alpha1.ServerClaim) (claimStep, error) {
	server, err := r.boundServer(ctx, claim)
	if err != nil {
		return claimStep{}, err
	}
	if server == nil {
		// A selector the schema let through but no server can match (a label key or value of
		// the wrong form): the claim says so, and a fix of its spec wakes it.
		if s := claim.Spec.ServerSelector; s != nil {
			if _, err := metav1.LabelSelectorAsSelector(s.LabelSelector()); err != nil {
				setBound(claim, metalv1alpha1.ClaimReasonInvalidServerSelector,
					"spec.serverSelector is invalid: "+err.Error()+"; the claim binds once it is fixed")
				return claimStep{}, nil
			}
		}
		var why string
		if server, why, err = r.bind(ctx, claim); err != nil {
			return claimStep{}, err
		}
		if server == nil {
			claim.Status.ServerRef = nil
			setBound(claim, metalv1alpha1.ClaimReasonNoMatchingServer, why)
			return claimStep{}, probeboot.DropStrayClaimBoot(ctx, r.Client, claim)
		}
	}
	claim.Status.ServerRef = &metalv1alpha1.LocalObjectReference{Name: server.Name}
	if claim.Status.BoundAt == nil {
		now := metav1.Now()
		claim.Status.BoundAt = &now
	}
	setBound(claim, metalv1alpha1.ClaimReasonBound, "bound to server "+server.Name)
	return claimStep{event: fsm.ClaimEventServerBound}, r.provision(ctx, claim, server)
}

// bound serves a bound claim: its server's boot configuration and power, and the claim's Ready
// and Provisioned conditions. A claim whose server is gone, or names it no more, loses it.
func (r *Reconciler) bound(ctx context.Context, claim *metalv1alpha1.ServerClaim) (claimStep, error) {
	server, err := r.boundServer(ctx, claim)
	if err != nil {
		return claimStep{}, err
	}
	if server == nil {
		lost := "the server"
		if ref := claim.Status.ServerRef; ref != nil {
			lost = "server " + ref.Name
		}
		claim.Status.ServerRef, claim.Status.BoundAt, claim.Status.InstallProgress = nil, nil, ""
		setBound(claim, metalv1alpha1.ReasonServerLost,
			lost+" no longer holds this claim (deleted, or its claim reference cleared); it binds again as soon as a server matches")
		setReady(claim, metalv1alpha1.ReasonServerLost, lost+" was lost")
		setProvisioned(claim, nil)
		// Pending, the claim binds at its next reconcile: its own status write does not wake
		// it, and a server that is bindable already sends no news.
		return claimStep{event: fsm.ClaimEventServerLost, requeueAfter: retryJitter()}, probeboot.DropStrayClaimBoot(ctx, r.Client, claim)
	}
	return claimStep{}, r.provision(ctx, claim, server)
}

// releasing gives the claim's server back and lets the claim go. A claim that says Bound must
// hold its server, whatever anyone watching sees: one that is Bound says Releasing before its
// server is released (the deleted event's one write). Another claim's status is written only
// when the release cannot finish now, to say why: a claim that goes needs none.
func (r *Reconciler) releasing(ctx context.Context, claim *metalv1alpha1.ServerClaim) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(claim, metalv1alpha1.ClaimFinalizer) {
		return ctrl.Result{}, nil
	}
	original := claim.DeepCopy()
	if claim.Status.Phase != metalv1alpha1.ClaimPhaseReleasing {
		to, err := fsm.NextClaimPhase(ctx, claim.Status.Phase, fsm.ClaimEventDeleted)
		if err != nil {
			return ctrl.Result{}, err
		}
		claim.Status.Phase = to
		setBound(claim, metalv1alpha1.ClaimReasonReleasing,
			"the claim is being deleted: its server is released")
		if original.Status.Phase == metalv1alpha1.ClaimPhaseBound {
			if err := r.Client.Status().Patch(ctx, claim, client.MergeFrom(original)); err != nil {
				return ctrl.Result{}, client.IgnoreNotFound(err)
			}
			original = claim.DeepCopy()
		}
	}
	read := claim.ResourceVersion
	err := r.release(ctx, claim)
	if err == nil {
		// Gone in a moment: a reconcile woken meanwhile waits for the cache to say so.
		r.written.Going(claim, read)
		return ctrl.Result{}, nil
	}
	setBound(claim, metalv1alpha1.ClaimReasonReleasing,
		fmt.Sprintf("the claim is being deleted; releasing its server failed, and is retried: %v", err))
	return status.Finish(ctx, r.Client, claim, original, ctrl.Result{}, err)
}

// SetupWithManager registers the reconciler, its index, and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.written = cached.NewWrites()
	r.cached = cached.IndexedReader{Cache: mgr.GetCache()}
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.Server{}, indexServerByClaim, func(o client.Object) []string {
		if ref := o.(*metalv1alpha1.Server).Spec.ServerClaimRef; ref != nil {
			return []string{ref.Namespace + "/" + ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.Server{}, indexServerBindable, func(o client.Object) []string {
		if bindable(o.(*metalv1alpha1.Server)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.ServerClaim{}, indexClaimPending, func(o client.Object) []string {
		if pending(o.(*metalv1alpha1.ServerClaim)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("serverclaim").
		For(&metalv1alpha1.ServerClaim{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&metalv1alpha1.ServerBootConfiguration{}).
		Watches(&metalv1alpha1.Server{}, r.serverEvents(), builder.WithPredicates(claimRelevantServerChange())).
		WithOptions(r.Settings.ControllerOptions("serverclaim")).
		Complete(r)
}

// serverEvents wakes claims for server events: the claims claimsForServer names for the server
// as it is now, and, on an update, the claim that held it before (released, or replaced).
// handler.EnqueueRequestsFromMapFunc would map the server as it was, too: every bind would then
// wake every waiting claim the server could have satisfied before it was taken (all of them,
// when 5,000 claims wait for 10,000 servers), for nothing — a taken server frees no one.
func (r *Reconciler) serverEvents() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
		for _, req := range reqs {
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.claimsForServer(ctx, e.Object))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.claimsForServer(ctx, e.ObjectNew))
			old, ok := e.ObjectOld.(*metalv1alpha1.Server)
			if !ok || old.Spec.ServerClaimRef == nil {
				return
			}
			if now, ok := e.ObjectNew.(*metalv1alpha1.Server); ok && metalv1alpha1.SameReference(old.Spec.ServerClaimRef, now.Spec.ServerClaimRef) {
				return // woken above
			}
			ref := old.Spec.ServerClaimRef
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}})
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, r.claimsForServer(ctx, e.Object))
		},
	}
}

// claimsForServer: a server that became bindable wakes the waiting claims it would satisfy;
// any other change wakes the claim that holds the server.
func (r *Reconciler) claimsForServer(ctx context.Context, o client.Object) []reconcile.Request {
	server, ok := o.(*metalv1alpha1.Server)
	if !ok {
		return nil
	}
	if ref := server.Spec.ServerClaimRef; ref != nil {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}}}
	}
	if !bindable(server) {
		return nil
	}
	var list metalv1alpha1.ServerClaimList
	claims, err := cached.ByIndex(ctx, r.cached, &metalv1alpha1.ServerClaim{}, &list, func() []*metalv1alpha1.ServerClaim { return cached.ItemPointers(list.Items) }, indexClaimPending, "true")
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, c := range claims {
		if ok, err := matches(c, server); ok || err != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// conditionNews says whether a server's condition of type t changed in a way its claim shows.
func conditionNews(old, now *metalv1alpha1.Server, t string) bool {
	a, b := meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(now.Status.Conditions, t)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
}

// pending is a claim still waiting for a server.
func pending(c *metalv1alpha1.ServerClaim) bool {
	return c.Status.Phase != metalv1alpha1.ClaimPhaseBound && c.DeletionTimestamp.IsZero()
}

// bootModeChanged says whether the boot mode a claim's spec.bootMode is compared with
// (bootsIn) changed: found anew, or asked for by the server's spec.
func bootModeChanged(old, now *metalv1alpha1.Server) bool {
	return old.Status.BootMode != now.Status.BootMode || old.Spec.BootMode != now.Spec.BootMode
}

// sameTaint says whether two taints are the same mark (their time aside).
func sameTaint(a, b metalv1alpha1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// claimRelevantServerChange passes server changes a claim reacts to: becoming bindable (or a
// bindable server's boot mode or taints changing), and state, claim or provisioning changes of
// a claimed server.
func claimRelevantServerChange() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*metalv1alpha1.Server)
			now, ok2 := e.ObjectNew.(*metalv1alpha1.Server)
			if !ok1 || !ok2 {
				return false
			}
			if bindable(now) && (!bindable(old) || bootModeChanged(old, now) || !slices.EqualFunc(old.Spec.Taints, now.Spec.Taints, sameTaint)) {
				return true
			}
			return now.Spec.ServerClaimRef != nil && (old.Status.State != now.Status.State ||
				!metalv1alpha1.SameReference(old.Spec.ServerClaimRef, now.Spec.ServerClaimRef) ||
				conditionNews(old, now, metalv1alpha1.ConditionProvisioned) || conditionNews(old, now, metalv1alpha1.ConditionProbe))
		},
		CreateFunc: func(e event.CreateEvent) bool { s, ok := e.Object.(*metalv1alpha1.Server); return ok && bindable(s) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			s, ok := e.Object.(*metalv1alpha1.Server)
			return ok && s.Spec.ServerClaimRef != nil
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
