package enroll

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
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
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// Field indexes the BMC reconciler looks objects up by.
const (
	indexBMCBySecret   = "spec.bmcSecretRef.name"
	indexBMCByEndpoint = "spec.endpointRef.name"
	indexServerByBMC   = "spec.bmcRef.name"
)

// BMCReconciler connects to BMCs, fills their status, and keeps one Server per ComputerSystem.
// A BMC's state moves only through fsm.BMC: each poll fires the event it found, and the BMC's
// status is written once per reconcile, not at all when nothing changed.
type BMCReconciler struct {
	Client client.Client
	// APIReader reads past the cache, where a stale read would do harm (takeOver).
	APIReader client.Reader
	Events    events.EventRecorder
	Clients   *bmc.Cache
	Settings  settings.Settings

	// written keeps a reconcile woken before the cache has the BMC's last status write (an
	// Endpoint's or a secret's news often comes at once) from writing the same status again.
	written *cached.Writes
	// told remembers what a deleted BMC's events have said (by BMC UID and what), so that a
	// deletion that waits records each thing once, not at every look (a restarted manager
	// says it once more).
	told sync.Map
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
	behind, err := r.written.Get(ctx, r.Client, req.NamespacedName, &b)
	if err != nil || behind {
		return cached.CatchUpIf(behind), client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		err := r.delete(ctx, &b)
		var waiting errWaitingForServers
		if errors.As(err, &waiting) {
			log.FromContext(ctx).Info(waiting.Error())
			if r.tellOnce(&b, "waiting") {
				r.Events.Eventf(&b, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonWaitingForServers, "Delete",
					"deleted: waits for server(s) %s to be wiped and deleted through this BMC; %s=true on a Server lets it go without its wipe",
					strings.Join(waiting.servers, ", "), metalv1alpha1.AnnotationDeleteWithoutWipe)
			}
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		return ctrl.Result{}, err
	}
	read := b.ResourceVersion
	if controllerutil.AddFinalizer(&b, metalv1alpha1.BMCFinalizer) {
		if err := r.Client.Update(ctx, &b); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	if wait, err := r.awaitingEndpoint(ctx, &b); err != nil || wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, err
	}

	original := b.DeepCopy()
	found, result, err := r.poll(ctx, &b)
	if found.event != "" {
		to, fsmErr := fsm.NextBMCState(ctx, b.Status.State, found.event)
		if fsmErr != nil {
			return ctrl.Result{}, fsmErr // a poll's outcome the table does not know: a bug
		}
		b.Status.State = to
		status.SetCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionReady, status.BoolStatus(found.event == fsm.BMCEventConnected), found.reason, found.message)
	}
	b.Status.ObservedGeneration = b.Generation
	r.recordReadyChange(original, &b)
	based := b.ResourceVersion
	result, err = status.Finish(ctx, r.Client, &b, original, result, err)
	r.written.Wrote(&b, read, based)
	return result, err
}

// endpointGrace is how long a new BMC waits, writing nothing, for its Endpoint to record the
// match it was made from. The Endpoint controller creates the BMC first and records the match
// after, so a new BMC's first look usually comes in between: that is no failure, and showing
// it as one cost every enrolled BMC a status write and two events (Unreachable, then
// Connected). The Endpoint's update wakes the BMC; past the grace, the wait shows as
// Unreachable.
const endpointGrace = 10 * time.Second

// awaitingEndpoint says how long a BMC that has never been polled should still wait for its
// Endpoint's match; zero when it should be polled now.
func (r *BMCReconciler) awaitingEndpoint(ctx context.Context, b *metalv1alpha1.BMC) (time.Duration, error) {
	if b.Spec.Access != nil || b.Spec.EndpointRef == nil || (b.Status.State != "" && b.Status.State != metalv1alpha1.BMCStatePending) {
		return 0, nil
	}
	left := endpointGrace - time.Since(b.CreationTimestamp.Time)
	if left <= 0 {
		return 0, nil
	}
	var ep metalv1alpha1.Endpoint
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.Spec.EndpointRef.Name}, &ep); err != nil {
		return 0, client.IgnoreNotFound(err) // a missing Endpoint is the poll's to report
	}
	if ep.Spec.IP != "" && ep.Status.Protocol != "" {
		return 0, nil
	}
	return left, nil
}

// pollOutcome is what a poll found: the BMC's event, and its Ready condition's reason and
// message. No event when the poll learnt nothing about the BMC (a Kubernetes write failed).
type pollOutcome struct {
	event           fsm.BMCEvent
	reason, message string
}

func failedPoll(err error) pollOutcome {
	return pollOutcome{event: fsm.BMCEventFailed, reason: bmc.Reason(err), message: err.Error()}
}

// poll talks to the BMC, records what it says about itself and its systems, and returns what
// it found and when to come back.
func (r *BMCReconciler) poll(ctx context.Context, b *metalv1alpha1.BMC) (pollOutcome, ctrl.Result, error) {
	target, err := bmcaccess.Target(ctx, r.Client, b)
	if err != nil {
		if bmc.Reason(err) == metalv1alpha1.BMCReasonUnsupportedProtocol {
			return failedPoll(err), ctrl.Result{}, nil // nothing will change until the spec does
		}
		return failedPoll(err), ctrl.Result{}, err
	}
	b.Status.Address = target.Address.String()
	b.Status.Protocol = target.Address.Protocol()
	reportProtocolLimits(b)

	client, err := r.Clients.Get(ctx, b.Name, target)
	if err != nil {
		return failedPoll(err), ctrl.Result{}, err
	}
	if needsManagerInfo(b) {
		manager, err := client.Manager(ctx)
		if err != nil {
			return r.callFailed(b, err), ctrl.Result{}, err
		}
		b.Status.Manufacturer, b.Status.Model = manager.Manufacturer, manager.Model
		b.Status.SerialNumber, b.Status.FirmwareVersion = manager.SerialNumber, manager.FirmwareVersion
		b.Status.MACAddress = manager.MACAddress
		b.Status.PowerState = manager.PowerState
	}
	systems, err := client.Systems(ctx)
	if err != nil {
		if bmc.Reason(err) == metalv1alpha1.BMCReasonTooManySystems {
			// The BMC lists what it lists: looked at again at the next poll, not retried
			// sooner. Its Servers, if it had any, are left as they are.
			return failedPoll(err), ctrl.Result{RequeueAfter: r.Settings.JitteredResync()}, nil
		}
		return r.callFailed(b, err), ctrl.Result{}, err
	}
	raced, err := r.syncServers(ctx, b, client, systems)
	if err != nil {
		return pollOutcome{}, ctrl.Result{}, err
	}
	if found, err := r.checkVirtualMedia(ctx, b, client, systems); found.event != "" {
		return found, ctrl.Result{RequeueAfter: r.Settings.JitteredResync()}, err
	}
	if err := checkHTTPBoot(ctx, b, client, systems); err != nil {
		return r.callFailed(b, err), ctrl.Result{}, err
	}
	if now := time.Now(); b.Status.LastSeen == nil || now.Sub(b.Status.LastSeen.Time) >= lastSeenEvery(r.Settings) {
		b.Status.LastSeen = &metav1.Time{Time: now}
	}
	connected := pollOutcome{event: fsm.BMCEventConnected, reason: metalv1alpha1.BMCReasonConnected,
		message: fmt.Sprintf("connected; %d system(s)", len(systems))}
	if raced {
		return connected, ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return connected, ctrl.Result{RequeueAfter: r.Settings.JitteredResync()}, nil
}

// reportProtocolLimits says on the BMC what its protocol cannot do that Redfish does: IPMI reads
// no hardware inventory (FRU only), so its Servers' hardware comes from the probe alone. Virtual
// media it lacks too, which checkVirtualMedia reports when bootMethod asks for it.
func reportProtocolLimits(b *metalv1alpha1.BMC) {
	if b.Status.Protocol != metalv1alpha1.BMCProtocolIPMI {
		meta.RemoveStatusCondition(&b.Status.Conditions, metalv1alpha1.ConditionOutOfBandInventory)
		return
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
		Type: metalv1alpha1.ConditionOutOfBandInventory, Status: metav1.ConditionFalse,
		Reason: metalv1alpha1.ReasonInventoryUnsupported, ObservedGeneration: b.Generation,
		Message: "IPMI reads no hardware inventory, only FRU (manufacturer, product, serial): each server's hardware comes from the probe's in-band report at discovery. IPMI has no virtual media either: bootMethod must be PXE",
	})
}

// checkHTTPBoot keeps the HTTPBoot condition of a BMC whose bootMethod is UefiHttp: whether
// every system can be given a URI to boot (bmc.HTTPBootControl), looked at when the BMC
// (re)connects, its spec changes, or the condition is missing. A BMC that cannot is no failure:
// its servers boot by PXE, and the condition says so and why. Other boot methods have no
// condition. A failed call is returned.
func checkHTTPBoot(ctx context.Context, b *metalv1alpha1.BMC, c bmc.Client, systems []bmc.SystemInfo) error {
	if b.Spec.BootMethod != metalv1alpha1.BootMethodUefiHttp {
		bmcaccess.SetHTTPBoot(b, false, "")
		return nil
	}
	if cur := meta.FindStatusCondition(b.Status.Conditions, metalv1alpha1.ConditionHTTPBoot); cur != nil && cur.ObservedGeneration == b.Generation && !needsManagerInfo(b) {
		return nil
	}
	const fallback = "; its servers boot by PXE instead (the boot service's DHCP offers their firmware a loader: PXE, or its own HTTP boot)"
	hc, ok := c.(bmc.HTTPBootControl)
	if !ok {
		bmcaccess.SetHTTPBoot(b, false, fmt.Sprintf("bootMethod is UefiHttp, but %s BMCs cannot give a server a URI to boot%s", b.Status.Protocol, fallback))
		return nil
	}
	for _, sys := range systems {
		if err := hc.HTTPBootSupported(ctx, sys.URI); err != nil {
			if !errors.Is(err, bmc.ErrUnsupported) {
				return err
			}
			bmcaccess.SetHTTPBoot(b, false, fmt.Sprintf("bootMethod is UefiHttp, but %v%s", err, fallback))
			return nil
		}
	}
	bmcaccess.SetHTTPBoot(b, true, fmt.Sprintf("%d system(s) boot the probe by UEFI HTTP boot from a URI this BMC sets (UefiHttp, HttpBootUri)", len(systems)))
	return nil
}

// checkVirtualMedia, for a BMC whose bootMethod is VirtualMedia, finds each system's virtual
// CD/DVD when the BMC (re)connects, its spec changes, or it last had none: a BMC without one
// fails the poll with VirtualMediaUnsupported, saying what it found, and its servers wait
// instead of being booted (probeMediumOf). It finds nothing (no event) when there was nothing
// to look for or every system has one; a failed call is a failed poll, and its error.
func (r *BMCReconciler) checkVirtualMedia(ctx context.Context, b *metalv1alpha1.BMC, c bmc.Client, systems []bmc.SystemInfo) (pollOutcome, error) {
	if b.Spec.BootMethod != metalv1alpha1.BootMethodVirtualMedia || !needsManagerInfo(b) {
		return pollOutcome{}, nil
	}
	slots := make(map[string]string, len(systems)) // system URI → its slot's URI
	for _, sys := range systems {
		slot, err := c.VirtualMedia(ctx, sys.URI)
		if err != nil {
			if errors.Is(err, bmc.ErrUnsupported) {
				return pollOutcome{event: fsm.BMCEventFailed, reason: metalv1alpha1.BMCReasonVirtualMediaUnsupported,
					message: fmt.Sprintf("bootMethod is VirtualMedia, but system %s: %v; its servers are not booted until the BMC offers a virtual CD/DVD or bootMethod is PXE", sys.URI, err)}, nil
			}
			return r.callFailed(b, err), err
		}
		slots[sys.URI] = slot.URI
	}
	if a, b, slot := sharedSlot(slots); slot != "" {
		return pollOutcome{event: fsm.BMCEventFailed, reason: metalv1alpha1.BMCReasonVirtualMediaUnsupported,
			message: fmt.Sprintf("bootMethod is VirtualMedia, but systems %s and %s share one virtual CD (%s): one system's boot would eject the other's ISO, or boot it; use PXE on this BMC", a, b, slot)}, nil
	}
	return pollOutcome{}, nil
}

// sharedSlot finds two systems whose virtual CD is the same slot (a BMC whose only CD is its
// Manager's, on a chassis of several systems), in a stable order; slot is "" when there are none.
func sharedSlot(slots map[string]string) (a, b, slot string) {
	systems := make([]string, 0, len(slots))
	for sys := range slots {
		systems = append(systems, sys)
	}
	sort.Strings(systems)
	seen := map[string]string{}
	for _, sys := range systems {
		s := slots[sys]
		if first, ok := seen[s]; ok && s != "" {
			return first, sys, s
		}
		seen[s] = sys
	}
	return "", "", ""
}

// lastSeenEvery is how stale a healthy BMC's LastSeen may grow before a poll rewrites it. A poll
// that changes nothing else then writes nothing: ten thousand BMCs polled every five minutes
// would otherwise cost the apiserver 33 status writes a second just to say "still there".
// Ready=True (and its lastTransitionTime) says the BMC answers; LastSeen is at most this old.
func lastSeenEvery(s settings.Settings) time.Duration {
	period := s.ResyncPeriod
	if period <= 0 {
		period = settings.DefaultSettings().ResyncPeriod
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

// callFailed is a failed call on an open client; a refused session is dropped so that the
// next attempt logs in again.
func (r *BMCReconciler) callFailed(b *metalv1alpha1.BMC, err error) pollOutcome {
	if bmc.Reason(err) == metalv1alpha1.BMCReasonAuthenticationFailed {
		r.Clients.Invalidate(b.Name)
	}
	return failedPoll(err)
}

// recordReadyChange emits an event when the Ready condition changes reason, not on every retry
// and not on a BMC's first connection (its Ready condition says so; ten thousand BMCs enrolled
// would otherwise cost ten thousand events): failures, and recoveries from them, are news.
func (r *BMCReconciler) recordReadyChange(before, after *metalv1alpha1.BMC) {
	now := meta.FindStatusCondition(after.Status.Conditions, metalv1alpha1.ConditionReady)
	if now == nil {
		return
	}
	was := meta.FindStatusCondition(before.Status.Conditions, metalv1alpha1.ConditionReady)
	if was != nil && was.Reason == now.Reason || was == nil && now.Status == metav1.ConditionTrue {
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
	bmc     string
	servers []string
}

func (e errWaitingForServers) Error() string {
	return fmt.Sprintf("BMC %s waits for %d of its servers to be wiped and deleted", e.bmc, len(e.servers))
}

// tellOnce says whether a deleted BMC's event about what has not been recorded yet, and
// remembers that it now is.
func (r *BMCReconciler) tellOnce(b *metalv1alpha1.BMC, what string) bool {
	_, told := r.told.LoadOrStore(string(b.UID)+"/"+what, true)
	return !told
}

// forgetTold drops what was remembered of a BMC that is gone.
func (r *BMCReconciler) forgetTold(b *metalv1alpha1.BMC) {
	prefix := string(b.UID) + "/"
	r.told.Range(func(k, _ any) bool {
		if strings.HasPrefix(k.(string), prefix) {
			r.told.Delete(k)
		}
		return true
	})
}

// delete removes the BMC's Servers that no claim holds, keeps the claimed ones (a tenant's
// machine does not vanish because its BMC record did), waits until the removed ones are gone —
// a Server that may hold a tenant's data is wiped through this BMC first (ServerFinalizer) —
// and then lets the BMC go.
func (r *BMCReconciler) delete(ctx context.Context, b *metalv1alpha1.BMC) error {
	if !controllerutil.ContainsFinalizer(b, metalv1alpha1.BMCFinalizer) {
		return nil
	}
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerByBMC: b.Name}); err != nil {
		return fmt.Errorf("listing the BMC's servers: %w", err)
	}
	var going []string
	for i := range servers.Items {
		s := &servers.Items[i]
		if s.Spec.ServerClaimRef != nil && s.DeletionTimestamp.IsZero() {
			if r.tellOnce(b, "kept/"+s.Name) {
				log.FromContext(ctx).Info("keeping claimed server of deleted BMC", "server", s.Name, "claim", s.Spec.ServerClaimRef.Name)
				r.Events.Eventf(b, s, corev1.EventTypeWarning, metalv1alpha1.ReasonClaimedServerKept, "Delete",
					"server %s is claimed by %s/%s and was kept: it stays its tenant's; released, it waits in Cleanup for a BMC of this name to wipe it through (make it again, or its Endpoint)", s.Name, s.Spec.ServerClaimRef.Namespace, s.Spec.ServerClaimRef.Name)
			}
			continue
		}
		if s.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting server %s: %w", s.Name, err)
			}
		}
		if controllerutil.ContainsFinalizer(s, metalv1alpha1.ServerFinalizer) {
			// It may hold a tenant's data: it is wiped, through this BMC, before it goes.
			going = append(going, s.Name)
		}
	}
	if len(going) > 0 {
		return errWaitingForServers{bmc: b.Name, servers: going}
	}
	r.Clients.Forget(b.Name)
	r.forgetTold(b)
	read := b.ResourceVersion
	controllerutil.RemoveFinalizer(b, metalv1alpha1.BMCFinalizer)
	if err := r.Client.Update(ctx, b); err != nil {
		return err
	}
	r.written.Going(b, read)
	return nil
}

// SetupWithManager registers the reconciler and the indexes it needs.
func (r *BMCReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ctx := context.Background()
	r.written = cached.NewWrites()
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
		WithOptions(r.Settings.ControllerOptions("bmc")).
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
