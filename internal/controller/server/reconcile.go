// Package server reconciles Servers: the lifecycle of one machine, its steps the handlers of
// the state table in internal/fsm, discovery, install and wipe boots through internal/probeboot,
// power through the BMC, deletion only once no tenant data is left. Each reconcile ends in at
// most one status write.
package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// DiscoverySettings bound discovery.
type DiscoverySettings struct {
	// Timeout is how long a probe may take to report after the server is powered on.
	Timeout time.Duration
	// Attempts is how many discovery boots a server gets before it goes to Error.
	Attempts int32
	// InstallTimeout is how long a probe booted to install a claim's image may take to report;
	// InstallAttempts how many install boots a claim's image gets (0: Attempts).
	InstallTimeout  time.Duration
	InstallAttempts int32
}

// Reconciler drives each Server through the lifecycle in internal/fsm: it observes facts,
// fires at most one event per reconcile, performs that transition's side effects, and patches
// status once. Power changes are requested, then observed on later reconciles; it never waits.
type Reconciler struct {
	Client client.Client
	// APIReader reads around the cache where a stale read would do harm.
	APIReader client.Reader
	Events    events.EventRecorder
	Clients   *bmc.Cache
	Probe     probeboot.Config
	Discovery DiscoverySettings
	Settings  settings.Settings
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	written *cached.Writes
	// unwritten holds, by Server name, the probe boot a brief wait named on the Server and left
	// unwritten, with the Server's UID (unwrittenBoot; probeBootFor).
	unwritten sync.Map
	// toldDeleting holds the UIDs of deleted Servers whose WipeBeforeDeletion event is recorded.
	toldDeleting sync.Map
	// failedBoots holds, by Server name, the probe boot whose BMC action failed after the status
	// write that began it (failedBoot): the state's handler only waits for that boot's report,
	// so the action is taken again, with the controller's backoff, until it goes through or
	// the server moves on.
	failedBoots sync.Map
}

// step is what a state's handler decided: an event to fire (or none), why, what else changes
// with it, and when to look again.
type step struct {
	event        fsm.ServerEvent
	reason       string
	message      string
	apply        func(*metalv1alpha1.Server)
	requeueAfter time.Duration
	// brief marks a wait of a moment (the boot service about to mark a probe boot Ready): what
	// it would record (its Ready, the probe boot it named, a new server's Initial) is not worth
	// a status write of its own, and the step that follows it says more.
	brief bool
	// warning, when set, is a Warning event recorded with the step's transition.
	warning *warning
	// effect is the BMC action that goes with the step. A boot runs only after the status write
	// has won its optimistic lock, so that two reconciles racing on one server never both boot
	// it; a plain power-off, harmless twice, runs before it (repeatable). If it fails, the
	// state's timeout brings the server round again.
	effect effect
}

// effect acts on the server through its BMC; powering is the power state it heads for. done,
// when set, records in status that the action was taken, once it has been: a manager that dies
// before leaves the step to be taken again.
type effect struct {
	run      func(ctx context.Context, c bmc.Client) error
	powering metalv1alpha1.PowerState
	done     func(*metalv1alpha1.Server)
	// insertsMedia marks a probe boot that inserts its ISO as virtual media (trackProbeMedia).
	insertsMedia bool
	// armsBoot marks a power-off that also sets the next boot's device (a claim's image,
	// booted at its first power-on): not harmless twice, so not repeatable.
	armsBoot bool
	// probeBoot marks the BMC action that boots a probe boot (bootOnce, bootURI): taken again
	// when it failed (failedBoots), as a boot whose action never went through is no boot.
	probeBoot bool
	// uriBoot marks a probe boot by a URI the BMC sets (bootURI).
	uriBoot bool
	// again, on a probe boot's action, makes it anew from the boot configuration as it is then
	// (its ISO's URL read again): what a retry takes. ok is false when the boot cannot be
	// taken now (its configuration is not Ready, or its ISO not published).
	again func(ctx context.Context) (eff effect, ok bool, err error)
}

// warning is an event of type Warning.
type warning struct{ reason, message string }

// wait is a step that fires nothing and says what the server waits for.
func wait(reason, message string, after time.Duration) step {
	return step{reason: reason, message: message, requeueAfter: after}
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverbootconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs/status,verbs=get;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete

// Reconcile moves one Server at most one step.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var server metalv1alpha1.Server
	behind, err := r.written.Get(ctx, r.Client, req.NamespacedName, &server)
	if apierrors.IsNotFound(err) {
		r.unwritten.Delete(req.Name)
		r.failedBoots.Delete(req.Name)
		// Its probe boots, should it have gone without ending them (they have no owner).
		return ctrl.Result{}, probeboot.DropLeftovers(ctx, r.Client, r.APIReader, r.Probe, req.Name, nil)
	}
	if err != nil || behind {
		return cached.CatchUpIf(behind), err
	}
	read := server.ResourceVersion // our writes below leave the cache behind on this one
	// A deleted Server goes at once when its machine holds no unwiped tenant data; otherwise its
	// lifecycle goes on until it is wiped (ServerFinalizer).
	if !server.DeletionTimestamp.IsZero() {
		if done, err := r.deleting(ctx, &server); done || err != nil {
			return ctrl.Result{}, err
		}
	}
	// Spec and metadata fixes come first, so that the status patch below, with its optimistic
	// lock, is based on the object as it then is.
	if server.DeletionTimestamp.IsZero() {
		if err := r.ensureFinalizer(ctx, &server); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.dropStaleRetry(ctx, &server); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.dropDanglingClaim(ctx, &server); err != nil {
		return ctrl.Result{}, err
	}
	if err := probeboot.AdoptAnnotation(ctx, r.Client, &server); err != nil {
		return ctrl.Result{}, err
	}
	if wait := r.awaitBMCLook(&server); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	// One clock reading per reconcile: a transition is stamped with the time the reconcile
	// began, before any side effect, so a probe that reports instantly is never "too early".
	start := r.now()
	original := server.DeepCopy()
	from := server.Status.State
	if from == "" {
		// A new Server: probe boots an earlier Server of its name left are not its own. It
		// enters Initial, and Initial's handler takes its first step in the same write.
		if err := probeboot.DropLeftovers(ctx, r.Client, r.APIReader, r.Probe, server.Name, &server); err != nil {
			return ctrl.Result{}, err
		}
		r.enter(&server, metalv1alpha1.ServerStateInitial, step{reason: metalv1alpha1.ReasonEnrolled, message: "found on BMC " + server.BMCName()}, start)
		from = metalv1alpha1.ServerStateInitial
	}
	observeAgain := r.observePower(ctx, &server)
	st, err := r.handle(ctx, &server)
	if err == nil && st.event == "" && st.effect.run == nil {
		if eff, ok := r.failedBoot(&server); ok {
			// The boot this state waits for, whose BMC action failed: again, made anew.
			var againErr error
			if eff.again != nil {
				eff, ok, againErr = eff.again(ctx)
			}
			if ok && againErr == nil {
				st.effect = eff
			} else if againErr != nil {
				log.FromContext(ctx).Info("could not make a failed probe boot anew; it is tried again later", "server", server.Name, "error", againErr.Error())
				st.requeueAfter = minPositive(st.requeueAfter, 5*time.Second)
			}
		}
	}
	if observeAgain > 0 {
		st.requeueAfter = minPositive(st.requeueAfter, observeAgain)
	}
	if err == nil && st.event == "" && st.apply != nil {
		st.apply(&server)
	}
	if err == nil && st.event != "" {
		var to metalv1alpha1.ServerState
		to, err = fsm.NextServerState(ctx, from, st.event, fsm.Facts{Claimed: server.Spec.ServerClaimRef != nil})
		if err == nil {
			r.enter(&server, to, st, start)
		}
	}
	showReady(&server, st, err)
	setBootMode(&server)
	if err == nil {
		trackProbeMedia(&server, &st)
	}
	server.Status.ObservedGeneration = server.Generation

	// A brief wait that found nothing else new writes nothing: the probe boot it named is
	// remembered instead, for the step that follows it (probeBootFor).
	if err == nil && st.brief && st.event == "" && st.effect.run == nil && onlyWaiting(&original.Status, &server.Status) {
		if server.Status.ProbeBoot != original.Status.ProbeBoot {
			r.unwritten.Store(server.Name, unwrittenBoot{uid: server.UID, boot: server.Status.ProbeBoot})
		}
		return ctrl.Result{RequeueAfter: st.requeueAfter}, nil
	}
	r.unwritten.Delete(server.Name) // what this reconcile writes names the probe boot

	// A power-off goes to the BMC before the step's write, and what came of it (sent, or why
	// not) goes in that one write. Sent twice (by a reconcile whose write then loses its lock,
	// or by the next one after a manager killed before the write) it does no harm, unlike a
	// boot.
	var actErr error
	if err == nil && repeatable(st.effect) {
		actErr = r.act(ctx, &server, &st)
		st.effect.run = nil // taken
	}

	// Nothing changed and nothing to do: no write (a waiting or resting server costs no API
	// request).
	if st.effect.run == nil && equality.Semantic.DeepEqual(server.Status, original.Status) {
		return ctrl.Result{RequeueAfter: st.requeueAfter}, errors.Join(err, actErr)
	}
	// The optimistic lock makes a reconcile that read a stale Server fail here instead of
	// firing the same transition twice.
	patchErr := status.Patch(ctx, r.Client, &server, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(patchErr) {
		return ctrl.Result{RequeueAfter: 100 * time.Millisecond}, actErr
	}
	if patchErr != nil && !apierrors.IsNotFound(patchErr) {
		return ctrl.Result{}, errors.Join(err, actErr, fmt.Errorf("patching server status: %w", patchErr))
	}
	if patchErr == nil {
		effErr := r.afterWrite(ctx, &server, from, &st, err)
		r.written.Wrote(&server, read) // the status write's version, or the power record's after it
		if effErr != nil {
			return ctrl.Result{}, effErr
		}
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	return ctrl.Result{RequeueAfter: st.requeueAfter}, err
}

// failedBoot is a probe boot whose BMC action failed: the Server's UID, the probe boot and the
// state it began in, and the action.
type failedBoot struct {
	uid   types.UID
	boot  string
	state metalv1alpha1.ServerState
	eff   effect
}

// failedBoot is the BMC action of the probe boot the server waits for, when it failed; it is
// forgotten once the server is another's, or on to another boot or state.
func (r *Reconciler) failedBoot(server *metalv1alpha1.Server) (effect, bool) {
	v, ok := r.failedBoots.Load(server.Name)
	if !ok {
		return effect{}, false
	}
	fb := v.(failedBoot)
	if fb.uid != server.UID || fb.boot != server.Status.ProbeBoot || fb.state != server.Status.State {
		r.failedBoots.Delete(server.Name)
		return effect{}, false
	}
	return fb.eff, true
}

// unwrittenBoot is a probe boot named on a Server, identified by UID (a Server made again under
// its name is not it), and not written.
type unwrittenBoot struct {
	uid  types.UID
	boot string
}

// onlyWaiting says whether after differs from before only in what a brief wait records: its
// Ready condition, the probe boot it named, the generation observed, and a new server's entry
// into Initial; and in the BootMode condition, which every reconcile sets from the spec and
// status it read (a write that follows soon carries it).
func onlyWaiting(before, after *metalv1alpha1.ServerStatus) bool {
	a := after.DeepCopy()
	a.ProbeBoot, a.ObservedGeneration = before.ProbeBoot, before.ObservedGeneration
	if before.State == "" {
		a.State, a.LastTransitionTime, a.LastTransitionReason = before.State, before.LastTransitionTime, before.LastTransitionReason
	}
	for _, t := range []string{metalv1alpha1.ConditionReady, metalv1alpha1.ConditionBootMode} {
		a.Conditions = withConditionOf(a.Conditions, before.Conditions, t)
	}
	return equality.Semantic.DeepEqual(a, before)
}

// withConditionOf is conds with its condition of type t as it is in was (none if none is).
func withConditionOf(conds, was []metav1.Condition, t string) []metav1.Condition {
	old := apimeta.FindStatusCondition(was, t)
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if old != nil {
			conds[i] = *old
			return conds
		}
		return append(conds[:i], conds[i+1:]...)
	}
	if old != nil {
		// Removed after: put it back (not the case of Ready or BootMode, which stay once set).
		conds = append(conds, *old)
	}
	return conds
}

// bmcLookGrace is how long a new Server waits for its BMC's first look at the system (identity,
// power, out-of-band inventory; refreshServerStatus) before its lifecycle starts without it.
const bmcLookGrace = 10 * time.Second

// awaitBMCLook says how long a new Server made by a BMC should wait for that BMC's first status
// write, which follows its creation at once and wakes it: the lifecycle's first write then
// builds on it, and neither loses its optimistic lock to the other. 0: go on (the BMC has
// looked, the Server was not made by a BMC, or the grace is over).
func (r *Reconciler) awaitBMCLook(server *metalv1alpha1.Server) time.Duration {
	if server.Status.State != "" || server.Spec.BMCRef == nil || server.Status.Inventory != nil || server.Status.PowerState != "" {
		return 0
	}
	return server.CreationTimestamp.Add(bmcLookGrace).Sub(r.now())
}

// handle asks the current state's handler what to do. Maintenance comes first: it takes a
// server from any state.
func (r *Reconciler) handle(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	if server.Spec.MaintenanceRef != nil && server.Status.State != metalv1alpha1.ServerStateMaintenance {
		return r.startMaintenance(ctx, server)
	}
	switch server.Status.State {
	case metalv1alpha1.ServerStateInitial:
		return r.initial(ctx, server)
	case metalv1alpha1.ServerStateDiscovery:
		return r.discovery(ctx, server)
	case metalv1alpha1.ServerStateAvailable:
		return r.available(server), nil
	case metalv1alpha1.ServerStateReserved:
		return r.reserved(ctx, server)
	case metalv1alpha1.ServerStateCleanup:
		return r.cleanup(ctx, server)
	case metalv1alpha1.ServerStateMaintenance:
		return r.maintenance(ctx, server)
	case metalv1alpha1.ServerStateError:
		return r.errored(server), nil
	default:
		return step{}, nil
	}
}

// afterWrite runs once a reconcile's status write has won: it records the transition, performs
// the step's BMC action, and shows a requested power change as Powering* until it is observed.
func (r *Reconciler) afterWrite(ctx context.Context, server *metalv1alpha1.Server, from metalv1alpha1.ServerState, st *step, stepErr error) error {
	if server.Status.State != from {
		if from != "" {
			r.recordTransition(server, from, *st)
		}
		// The new state's handler has work to do now; our own status write does not wake us.
		if st.requeueAfter == 0 {
			st.requeueAfter = time.Millisecond
		}
	}
	if stepErr != nil || st.effect.run == nil {
		return nil
	}
	before := server.DeepCopy()
	err := r.act(ctx, server, st)
	if st.effect.probeBoot {
		switch {
		case err == nil:
			r.failedBoots.Delete(server.Name)
		case errors.Is(err, bmc.ErrUnsupported):
			// The BMC cannot do it (a URI boot refused): taking it again changes nothing. The
			// attempt times out, and the next one boots as the BMC now says it can.
			r.failedBoots.Delete(server.Name)
			if st.effect.uriBoot {
				r.httpBootRefused(ctx, server, err)
			}
		default:
			r.failedBoots.Store(server.Name, failedBoot{uid: server.UID, boot: server.Status.ProbeBoot, state: server.Status.State, eff: st.effect})
		}
	}
	if equality.Semantic.DeepEqual(before.Status, server.Status) {
		return err
	}
	patchErr := status.Patch(ctx, r.Client, server, client.MergeFrom(before))
	switch {
	case err != nil:
		if patchErr != nil {
			log.FromContext(ctx).Info("could not show the failed power request", "server", server.Name, "error", patchErr.Error())
		}
		return err
	case patchErr != nil && st.effect.done != nil:
		return fmt.Errorf("recording the BMC action on server %s: %w", server.Name, patchErr)
	}
	return nil
}

// repeatable says whether a step's BMC action does no harm when taken twice, and so may be taken
// before the step's write: a power-off, forced or graceful, and what goes with it (the probe's
// ISO ejected, the next boot pointed at the disk).
func repeatable(eff effect) bool {
	return eff.run != nil && eff.powering == metalv1alpha1.PowerStatePoweringOff && !eff.insertsMedia && !eff.armsBoot
}

// act takes the step's BMC action and records in the server's status, for the caller to write,
// what came of it: the action taken (done), and the power it heads for, as the BMC shows it at
// once; or, when the BMC call failed, why a power request is still not sent.
func (r *Reconciler) act(ctx context.Context, server *metalv1alpha1.Server, st *step) error {
	if err := r.runEffect(ctx, server, st.effect); err != nil {
		showUnsentPower(server, err)
		return err
	}
	if st.effect.done != nil {
		st.effect.done(server)
	}
	if st.effect.powering != "" {
		server.Status.PowerState = st.effect.powering
		// Most BMCs act on On and ForceOff at once: what they report now goes in this record,
		// not in a write of its own a moment later. Either way the server is looked at again
		// soon: its state's handler may wait for this power (an install boots once the server
		// is off), and a BMC that has not got there yet is observed again.
		if again := r.observePower(ctx, server); again > 0 {
			st.requeueAfter = minPositive(st.requeueAfter, again)
		}
		st.requeueAfter = minPositive(st.requeueAfter, powerObserveDelay)
	}
	return nil
}

// runEffect performs a step's BMC action; a failure is an event and a retry, never a second
// transition.
func (r *Reconciler) runEffect(ctx context.Context, server *metalv1alpha1.Server, eff effect) error {
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err == nil {
		err = eff.run(ctx, c)
	}
	if err != nil {
		r.Events.Eventf(server, nil, corev1.EventTypeWarning, reasonOf(err), "BMC", "BMC action failed: %v", err)
		return fmt.Errorf("acting on server %s through its BMC: %w", server.Name, err)
	}
	return nil
}

// setPower requests a power action.
func setPower(uri string, action bmc.PowerAction) effect {
	powering := metalv1alpha1.PowerStatePoweringOn
	if action == bmc.PowerOff || action == bmc.PowerGracefulShutdown {
		powering = metalv1alpha1.PowerStatePoweringOff
	}
	return effect{powering: powering, run: func(ctx context.Context, c bmc.Client) error { return c.SetPower(ctx, uri, action) }}
}

// enter records a transition into to (or the first state) in status.
func (r *Reconciler) enter(server *metalv1alpha1.Server, to metalv1alpha1.ServerState, st step, at time.Time) {
	if st.apply != nil {
		st.apply(server)
	}
	now := metav1.NewTime(at)
	server.Status.State = to
	server.Status.LastTransitionTime = &now
	server.Status.LastTransitionReason = st.reason
	setReady(server, false, st.reason, st.message)
}

// settled states are where a server rests until someone acts; the others are on their way
// somewhere (or in Error), and Ready=False says why.
func settled(s metalv1alpha1.ServerState) bool {
	switch s {
	case metalv1alpha1.ServerStateAvailable, metalv1alpha1.ServerStateReserved, metalv1alpha1.ServerStateMaintenance:
		return true
	default:
		return false
	}
}

func (r *Reconciler) recordTransition(server *metalv1alpha1.Server, from metalv1alpha1.ServerState, st step) {
	eventType := corev1.EventTypeNormal
	if server.Status.State == metalv1alpha1.ServerStateError {
		eventType = corev1.EventTypeWarning
	}
	r.Events.Eventf(server, nil, eventType, st.reason, string(st.event), "%s → %s: %s", from, server.Status.State, st.message)
	if w := st.warning; w != nil {
		r.Events.Eventf(server, nil, corev1.EventTypeWarning, w.reason, string(st.event), "%s", w.message)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// enteredAt is when the server entered its current state.
func enteredAt(server *metalv1alpha1.Server) time.Time {
	if t := server.Status.LastTransitionTime; t != nil {
		return t.Time
	}
	return server.CreationTimestamp.Time
}

func reasonOf(err error) string {
	var be *bmc.Error
	if errors.As(err, &be) {
		return "BMC" + be.Reason
	}
	return "ReconcileError"
}

// dropStaleRetry removes a retry annotation from a server that is not in Error: it has done
// its job, or was set by mistake.
func (r *Reconciler) dropStaleRetry(ctx context.Context, server *metalv1alpha1.Server) error {
	if _, ok := server.Annotations[metalv1alpha1.AnnotationRetry]; !ok || server.Status.State == metalv1alpha1.ServerStateError {
		return nil
	}
	before := server.DeepCopy()
	delete(server.Annotations, metalv1alpha1.AnnotationRetry)
	return r.Client.Patch(ctx, server, client.MergeFrom(before))
}

// errored waits for a person: the retry annotation sends the server back to Initial.
func (r *Reconciler) errored(server *metalv1alpha1.Server) step {
	if _, ok := server.Annotations[metalv1alpha1.AnnotationRetry]; !ok {
		return step{}
	}
	return step{event: fsm.EventRetry, reason: metalv1alpha1.ReasonRetryRequested, message: "the " + metalv1alpha1.AnnotationRetry + " annotation asked for a retry",
		apply: func(s *metalv1alpha1.Server) {
			s.Status.DiscoveryAttempts, s.Status.CleanupAttempts = 0, 0
			// A person looked at the changed hardware: the next discovery records what it finds
			// (and, for a dirty server, judges its wipe against that).
			if hardwareChanged(s) != nil {
				registry.SetHardwareRecord(s, metalv1alpha1.ReasonHardwareChangeAccepted,
					"the retry accepts the hardware the next discovery finds as the server's record")
			}
		}}
}
