package firmware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// Defaults of the update settings.
const (
	DefaultTaskPoll    = 10 * time.Second
	DefaultStepTimeout = time.Hour
)

// UpdateSettings say where and how fast updates go.
type UpdateSettings struct {
	// Namespace is the operator's own: the ServerMaintenances updates make, and the Secrets a
	// baseline's image credentials name, are there.
	Namespace string
	// TaskPoll is how often a BMC's task is read while it runs; DefaultTaskPoll when zero.
	TaskPoll time.Duration
	// StepTimeout bounds each state an update works in (Staging to Verifying; not the wait
	// for a turn or an owner's approval); DefaultStepTimeout when zero.
	StepTimeout time.Duration
	// BootNamespace is the boot service's: the Secrets asking it to serve an image
	// (ServedBy BootService) are made there.
	BootNamespace string
}

func (s UpdateSettings) taskPoll() time.Duration {
	if s.TaskPoll > 0 {
		return s.TaskPoll
	}
	return DefaultTaskPoll
}

func (s UpdateSettings) stepTimeout() time.Duration {
	if s.StepTimeout > 0 {
		return s.StepTimeout
	}
	return DefaultStepTimeout
}

// LabelBaseline, on an update's ServerMaintenance, names the FirmwareBaseline it is for.
const LabelBaseline = "metal.ironfleet.dev/firmware-baseline"

// admissions are the servers this manager admitted to a baseline's rollout that the cache may
// not show yet: with them, two reconciles back to back never both take the last free place.
// They are a lower bound the cache's own view completes (a restarted manager starts with an
// empty set and a synced cache).
type admissions struct {
	mu sync.Mutex
	by map[string]map[string]bool // baseline → servers
}

func (a *admissions) add(baseline, server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[string]map[string]bool{}
	}
	if a.by[baseline] == nil {
		a.by[baseline] = map[string]bool{}
	}
	a.by[baseline][server] = true
}

// done forgets server: its update no longer holds a place, as written.
func (a *admissions) done(server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.by {
		delete(s, server)
	}
}

func (a *admissions) of(baseline string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.by[baseline]))
	for s := range a.by[baseline] {
		out = append(out, s)
	}
	return out
}

// holdsPlace says whether an update in state keeps its server out of service for its
// baseline: under way, or Failed (the server stays in maintenance).
func holdsPlace(u *metalv1alpha1.FirmwareUpdate) bool {
	if u == nil {
		return false
	}
	switch u.State {
	case "", metalv1alpha1.FirmwareUpdateSucceeded, metalv1alpha1.FirmwareUpdateWithdrawn:
		return false
	case metalv1alpha1.FirmwareUpdateWaiting:
		return u.Maintenance != nil // retried: still in the maintenance it failed in
	}
	return true
}

// plan is what an update sends: one baseline's differences.
type plan struct {
	baseline  *metalv1alpha1.FirmwareBaseline
	steps     []metalv1alpha1.FirmwareUpdateStep
	hostReset bool
}

// planFor is what the server's last read, judged against the baselines bs as they are now,
// says to send: the differences of the first baseline (by name) that has any. nil when there is
// nothing to send: compliant, not judged against these baselines yet, baselines in conflict, a
// setting the registry refuses (nothing is sent while any want is invalid), or no firmware
// management.
func planFor(sfw *metalv1alpha1.ServerFirmware, bs []*metalv1alpha1.FirmwareBaseline) *plan {
	c := apimeta.FindStatusCondition(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareCompliant)
	if c == nil || c.Reason != metalv1alpha1.ReasonFirmwareDrifted || !slices.Equal(sfw.Status.ObservedBaselines, observed(bs)) {
		return nil
	}
	for _, b := range bs {
		p := &plan{baseline: b}
		for _, d := range sfw.Status.Differences {
			if d.Baseline != b.Name || d.Invalid != "" {
				continue
			}
			if i := slices.IndexFunc(p.steps, func(s metalv1alpha1.FirmwareUpdateStep) bool { return s.Kind == d.Kind && s.Name == d.Name }); i >= 0 {
				// A pattern matching several members: one image for all of them.
				p.steps[i].From = truncate(p.steps[i].From+", "+d.Have, 1024)
				continue
			}
			p.steps = append(p.steps, metalv1alpha1.FirmwareUpdateStep{Kind: d.Kind, Name: d.Name, From: truncate(d.Have, 1024), To: d.Want})
			if d.Kind != metalv1alpha1.FirmwareDifferenceComponent || d.Name != string(metalv1alpha1.FirmwareComponentBMC) {
				p.hostReset = true
			}
		}
		if len(p.steps) > 0 {
			return p
		}
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// update takes the server's firmware update one step, as docs/firmware-update-lifecycle.md
// draws it: one event per reconcile, one status write.
func (r *Reconciler) update(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, bs []*metalv1alpha1.FirmwareBaseline) (ctrl.Result, error) {
	u := sfw.Status.Update
	p := planFor(sfw, bs)
	var state metalv1alpha1.FirmwareUpdateState
	if u != nil {
		state = u.State
	}
	if _, asked := sfw.Annotations[metalv1alpha1.AnnotationRetryUpdate]; asked && state != metalv1alpha1.FirmwareUpdateFailed {
		// Only a failed update is retried: a request left on another would retry its next
		// failure at once, and its failures would never stop the rollout.
		return ctrl.Result{}, r.forgetRetry(ctx, sfw)
	}
	switch state {
	case "", metalv1alpha1.FirmwareUpdateSucceeded, metalv1alpha1.FirmwareUpdateWithdrawn:
		if u != nil && state == metalv1alpha1.FirmwareUpdateSucceeded {
			if err := r.untaint(ctx, server); err != nil {
				return ctrl.Result{}, err
			}
		}
		if p == nil {
			return ctrl.Result{}, nil
		}
		now := metav1.NewTime(r.now())
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
			st.Update = &metalv1alpha1.FirmwareUpdate{Baseline: p.baseline.Name, BaselineGeneration: p.baseline.Generation,
				State: metalv1alpha1.FirmwareUpdateWaiting, HostReset: p.hostReset, Steps: p.steps, StateTime: &now,
				Reason: metalv1alpha1.ReasonWaitingForTurn, Message: "waiting for its turn in the rollout of baseline " + p.baseline.Name}
		})
	case metalv1alpha1.FirmwareUpdateWaiting:
		return r.waiting(ctx, sfw, server, p, bs)
	case metalv1alpha1.FirmwareUpdateEnteringMaintenance:
		return r.enteringMaintenance(ctx, sfw, server, p)
	case metalv1alpha1.FirmwareUpdateStaging:
		return r.staging(ctx, sfw, server)
	case metalv1alpha1.FirmwareUpdateInstalling:
		return r.installing(ctx, sfw, server)
	case metalv1alpha1.FirmwareUpdateRebooting:
		return r.rebooting(ctx, sfw, server)
	case metalv1alpha1.FirmwareUpdateVerifying:
		return r.verifying(ctx, sfw, server)
	case metalv1alpha1.FirmwareUpdateFailed:
		return r.failed(ctx, sfw, server, p)
	}
	return ctrl.Result{}, nil
}

// fire moves the update by event, setting its reason and message; the caller writes it.
func fire(ctx context.Context, u *metalv1alpha1.FirmwareUpdate, event fsm.UpdateEvent, now time.Time, reason, message string) error {
	to, err := fsm.NextUpdateState(ctx, u.State, event, fsm.UpdateFacts{HostReset: u.HostReset})
	if err != nil {
		return err
	}
	if to != u.State {
		t := metav1.NewTime(now)
		u.State, u.StateTime = to, &t
	}
	u.Reason, u.Message = reason, truncate(message, 2048)
	return nil
}

// move fires event on the update and writes it.
func (r *Reconciler) move(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, event fsm.UpdateEvent, reason, message string, also ...func(*metalv1alpha1.FirmwareUpdate)) (ctrl.Result, error) {
	var fired error
	from := sfw.Status.Update.State
	res, err := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
		for _, f := range also {
			f(st.Update)
		}
		fired = fire(ctx, st.Update, event, r.now(), reason, message)
	})
	if fired != nil {
		return ctrl.Result{}, fired
	}
	if to := sfw.Status.Update.State; err == nil && to != from && (from == metalv1alpha1.FirmwareUpdateStaging || from == metalv1alpha1.FirmwareUpdateInstalling) &&
		to != metalv1alpha1.FirmwareUpdateInstalling {
		// The BMC has fetched its images: the URLs the boot service served them at die.
		if ferr := r.forgetServedImages(ctx, sfw.Name); ferr != nil {
			return ctrl.Result{}, ferr
		}
	}
	if err == nil && r.Events != nil {
		kind := corev1.EventTypeNormal
		if event == fsm.UpdateEventFail {
			kind = corev1.EventTypeWarning
		}
		r.Events.Eventf(sfw, nil, kind, reason, "UpdateFirmware", "%s", truncate(message, 1024))
	}
	return res, err
}

// write changes the ServerFirmware's status with change and patches it under an optimistic
// lock (a conflict comes back with the newer object). A Succeeded, Withdrawn or Failed update
// written gives up a place this manager admitted it to: the cache shows it from then on.
func (r *Reconciler) write(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, change func(*metalv1alpha1.ServerFirmwareStatus)) (ctrl.Result, error) {
	original, read := sfw.DeepCopy(), sfw.ResourceVersion
	change(&sfw.Status)
	if err := status.Patch(ctx, r.Client, sfw, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{Requeue: true}, nil
		}
		return ctrl.Result{}, err
	}
	r.written.Wrote(sfw, read)
	if u := sfw.Status.Update; u != nil && !holdsPlace(u) {
		r.admitted.done(sfw.Name)
	}
	return ctrl.Result{}, nil
}

// waiting admits the server when its baseline's rollout has a place for it, or withdraws the
// update when nothing wants it any more.
func (r *Reconciler) waiting(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, p *plan, bs []*metalv1alpha1.FirmwareBaseline) (ctrl.Result, error) {
	u := sfw.Status.Update
	if u.Maintenance != nil {
		// Retried after a failure, in the maintenance the failure left it in: a person who
		// deleted that maintenance gave the server back as it is.
		if gone, err := r.maintenanceGone(ctx, server.Name); err != nil || gone {
			if err != nil {
				return ctrl.Result{}, err
			}
			return r.withdraw(ctx, sfw, server, "its ServerMaintenance was deleted: the server is given back as it is")
		}
	}
	if p == nil || p.baseline.Name != u.Baseline {
		if u.Maintenance == nil {
			return r.withdraw(ctx, sfw, server, "no baseline wants it any more")
		}
		// Something was sent before it failed: it is not given back unverified.
		why := fmt.Sprintf("retried, but no baseline wants anything of it any more; a failed update left it in ServerMaintenance %s/%s: "+
			"delete the maintenance to give it back as it is", u.Maintenance.Namespace, u.Maintenance.Name)
		if u.Reason == metalv1alpha1.ReasonLeftInMaintenance && u.Message == why {
			return ctrl.Result{}, nil
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
			st.Update.Reason, st.Update.Message = metalv1alpha1.ReasonLeftInMaintenance, why
		})
	}
	// Out of service already (retried in its maintenance): it goes back through the reset, so
	// that its maintenance ends, whatever is sent.
	hostReset := p.hostReset || u.Maintenance != nil
	if p.baseline.Generation != u.BaselineGeneration || !sameSteps(p.steps, u.Steps) || hostReset != u.HostReset {
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
			st.Update.BaselineGeneration, st.Update.Steps, st.Update.HostReset = p.baseline.Generation, p.steps, hostReset
		})
	}
	b := p.baseline
	place, reason, why, err := r.place(ctx, b, sfw.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !place {
		if u.Reason == reason && u.Message == why {
			return ctrl.Result{}, nil // the baseline's and the other servers' changes wake this
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Reason, st.Update.Message = reason, why })
	}
	r.admitted.add(b.Name, sfw.Name)
	now := metav1.NewTime(r.now())
	if !u.HostReset {
		return r.move(ctx, sfw, fsm.UpdateEventAdmit, metalv1alpha1.ReasonUpdateAdmitted,
			fmt.Sprintf("admitted to the rollout of baseline %s: the BMC's firmware only, the host stays in service", b.Name),
			func(u *metalv1alpha1.FirmwareUpdate) { u.StartTime = &now })
	}
	if err := r.taint(ctx, server); err != nil {
		return ctrl.Result{}, err
	}
	ref, err := r.ensureMaintenance(ctx, sfw, server, b, u)
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.move(ctx, sfw, fsm.UpdateEventAdmit, metalv1alpha1.ReasonUpdateAdmitted,
		fmt.Sprintf("admitted to the rollout of baseline %s: ServerMaintenance %s/%s takes the server out of service", b.Name, ref.Namespace, ref.Name),
		func(u *metalv1alpha1.FirmwareUpdate) { u.StartTime, u.Maintenance = &now, ref })
}

// place says whether baseline b's rollout has a place for server, and if not why (a reason
// and a message): it is not paused, fewer of its servers than maxUnavailable are out of service
// for it, and fewer than maxFailures have a failed update (until each is retried, or given back).
// The controller runs one worker (SetupWithManager): places are counted and taken by one
// reconcile at a time.
func (r *Reconciler) place(ctx context.Context, b *metalv1alpha1.FirmwareBaseline, server string) (bool, string, string, error) {
	if b.Spec.Rollout.Paused {
		return false, metalv1alpha1.ReasonRolloutPaused, "baseline " + b.Name + "'s rollout is paused (rollout.paused)", nil
	}
	var list metalv1alpha1.ServerFirmwareList
	if err := r.Client.List(ctx, &list); err != nil {
		return false, "", "", err
	}
	holding, listed := map[string]bool{}, map[string]bool{}
	failed := 0
	for i := range list.Items {
		listed[list.Items[i].Name] = true
		u := list.Items[i].Status.Update
		if u == nil || u.Baseline != b.Name {
			continue
		}
		if holdsPlace(u) {
			holding[list.Items[i].Name] = true
		}
		if u.State == metalv1alpha1.FirmwareUpdateFailed {
			failed++
		}
	}
	// Servers its maintenances hold count whatever their ServerFirmwares say: a maintenance
	// made just before a write that did not land, or before a restart.
	var maints metalv1alpha1.ServerMaintenanceList
	if err := r.Client.List(ctx, &maints, client.InNamespace(r.Update.Namespace), client.MatchingLabels{LabelBaseline: b.Name}); err != nil {
		return false, "", "", err
	}
	for _, sm := range maints.Items {
		if s := sm.Labels[metalv1alpha1.LabelServer]; s != "" && listed[s] {
			holding[s] = true
		}
	}
	for _, s := range r.admitted.of(b.Name) {
		if !listed[s] {
			r.admitted.done(s) // its Server, and with it its ServerFirmware, was deleted
			continue
		}
		holding[s] = true
	}
	delete(holding, server)
	maxFailures := max(int(b.Spec.Rollout.MaxFailures), 1)
	if failed >= maxFailures {
		return false, metalv1alpha1.ReasonRolloutStopped, fmt.Sprintf("the rollout of baseline %s is stopped: rollout.maxFailures (%d) of its servers failed; "+
			"retry them (%s) or change what it wants of them", b.Name, maxFailures, metalv1alpha1.AnnotationRetryUpdate), nil
	}
	limit, err := maxUnavailable(b)
	if err != nil {
		return false, "", "", err
	}
	if len(holding) >= limit {
		// No count in the message: it would rewrite every waiting server at every turn.
		return false, metalv1alpha1.ReasonWaitingForTurn, fmt.Sprintf("waiting for its turn: rollout.maxUnavailable (%d) of baseline %s's servers are out of service for it", limit, b.Name), nil
	}
	return true, "", "", nil
}

// maxUnavailable is the baseline's rollout.maxUnavailable as a number of servers: a percentage
// of those it matched, rounded down, at least 1.
func maxUnavailable(b *metalv1alpha1.FirmwareBaseline) (int, error) {
	v := b.Spec.Rollout.MaxUnavailable
	if v == nil {
		return 1, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(b.Status.Matched), false)
	if err != nil {
		return 0, fmt.Errorf("baseline %s: rollout.maxUnavailable: %w", b.Name, err)
	}
	return max(n, 1), nil
}

// maintenanceName is the name of the ServerMaintenance an update makes for server.
func maintenanceName(server string) string { return "firmware-" + server }

// ensureMaintenance makes the update's ServerMaintenance, owned by the ServerFirmware (it goes
// with the server), with the baseline's policy, unless it is there.
func (r *Reconciler) ensureMaintenance(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, b *metalv1alpha1.FirmwareBaseline, u *metalv1alpha1.FirmwareUpdate) (*metalv1alpha1.ObjectReference, error) {
	sm := &metalv1alpha1.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: r.Update.Namespace, Name: maintenanceName(server.Name),
		Labels: map[string]string{LabelBaseline: b.Name, metalv1alpha1.LabelServer: server.Name}}}
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(sm), sm); err == nil {
		return &metalv1alpha1.ObjectReference{Namespace: sm.Namespace, Name: sm.Name, UID: string(sm.UID)}, nil
	} else if !apierrors.IsNotFound(err) {
		return nil, err
	}
	var what []string
	for _, s := range u.Steps {
		what = append(what, stepSummary(s))
	}
	sm.Spec = metalv1alpha1.ServerMaintenanceSpec{ServerRef: metalv1alpha1.LocalObjectReference{Name: server.Name},
		Policy: b.Spec.Rollout.Policy, Power: metalv1alpha1.PowerOff,
		Reason: truncate("firmware baseline "+b.Name+": "+strings.Join(what, "; "), 1024)}
	if err := controllerutil.SetControllerReference(sfw, sm, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, sm); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("making the update's ServerMaintenance: %w", err)
	}
	return &metalv1alpha1.ObjectReference{Namespace: sm.Namespace, Name: sm.Name, UID: string(sm.UID)}, nil
}

func stepSummary(s metalv1alpha1.FirmwareUpdateStep) string {
	if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
		return fmt.Sprintf("BIOS %s=%s", s.Name, s.To)
	}
	return fmt.Sprintf("%s %s → %s", s.Name, s.From, s.To)
}

// deleteMaintenance deletes the update's ServerMaintenance, if any.
func (r *Reconciler) deleteMaintenance(ctx context.Context, server string) error {
	sm := &metalv1alpha1.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: r.Update.Namespace, Name: maintenanceName(server)}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, sm))
}

// taint sets the firmware-update taint on the server (a JSON patch that tests the spec is the
// one read: it changes no taint set meanwhile).
func (r *Reconciler) taint(ctx context.Context, server *metalv1alpha1.Server) error {
	if metalv1alpha1.HasTaint(server.Spec.Taints, metalv1alpha1.TaintFirmwareUpdate, metalv1alpha1.TaintNoClaim) {
		return nil
	}
	now := metav1.NewTime(r.now())
	taints := append(slices.Clone(server.Spec.Taints), metalv1alpha1.Taint{Key: metalv1alpha1.TaintFirmwareUpdate, Value: "updating",
		Effect: metalv1alpha1.TaintNoClaim, TimeAdded: &now})
	return r.patchTaints(ctx, server, taints)
}

// untaint removes the firmware-update taint, and only it.
func (r *Reconciler) untaint(ctx context.Context, server *metalv1alpha1.Server) error {
	if !metalv1alpha1.HasTaint(server.Spec.Taints, metalv1alpha1.TaintFirmwareUpdate, metalv1alpha1.TaintNoClaim) {
		return nil
	}
	taints := slices.DeleteFunc(slices.Clone(server.Spec.Taints), func(t metalv1alpha1.Taint) bool {
		return t.Key == metalv1alpha1.TaintFirmwareUpdate
	})
	return r.patchTaints(ctx, server, taints)
}

func (r *Reconciler) patchTaints(ctx context.Context, server *metalv1alpha1.Server, taints []metalv1alpha1.Taint) error {
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/generation", "value": server.Generation},
		{"op": "add", "path": "/spec/taints", "value": taints},
	}
	if len(taints) == 0 {
		ops[1] = map[string]any{"op": "remove", "path": "/spec/taints"}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, server, client.RawPatch(types.JSONPatchType, data)); err != nil {
		return fmt.Errorf("setting the taints of server %s (tried again): %w", server.Name, err)
	}
	return nil
}

// withdraw ends an update nothing was sent for: its maintenance and taint go.
func (r *Reconciler) withdraw(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, why string) (ctrl.Result, error) {
	if err := r.deleteMaintenance(ctx, server.Name); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.untaint(ctx, server); err != nil {
		return ctrl.Result{}, err
	}
	return r.move(ctx, sfw, fsm.UpdateEventWithdraw, metalv1alpha1.ReasonUpdateWithdrawn, "withdrawn before anything was sent: "+why,
		func(u *metalv1alpha1.FirmwareUpdate) { u.Maintenance = nil })
}

// enteringMaintenance waits for the maintenance to hold the server. What it will send follows
// the baseline meanwhile (an owner's approval can take days).
func (r *Reconciler) enteringMaintenance(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, p *plan) (ctrl.Result, error) {
	u := sfw.Status.Update
	if p == nil || p.baseline.Name != u.Baseline {
		return r.withdraw(ctx, sfw, server, "no baseline wants it any more")
	}
	if !sameSteps(p.steps, u.Steps) {
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
			st.Update.Steps, st.Update.BaselineGeneration = p.steps, p.baseline.Generation
		})
	}
	var sm metalv1alpha1.ServerMaintenance
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Update.Namespace, Name: maintenanceName(server.Name)}, &sm)
	if apierrors.IsNotFound(err) {
		// Deleted by a person before it held the server: made again (withdraw the update by
		// changing the baseline, not by deleting its maintenance).
		ref, err := r.ensureMaintenance(ctx, sfw, server, p.baseline, u)
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Maintenance = ref })
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if sm.Status.State == metalv1alpha1.MaintenanceStateFailed {
		return r.move(ctx, sfw, fsm.UpdateEventFail, metalv1alpha1.ReasonMaintenanceLost,
			"ServerMaintenance "+sm.Namespace+"/"+sm.Name+" cannot take the server: "+readyMessage(&sm))
	}
	if !r.held(server) {
		why := "waiting for ServerMaintenance " + sm.Namespace + "/" + sm.Name + " to hold the server"
		if msg := readyMessage(&sm); msg != "" {
			why += ": " + msg
		}
		if u.Reason == metalv1alpha1.ReasonWaitingForMaintenance && u.Message == why {
			return ctrl.Result{}, nil // the maintenance's and the server's changes wake this
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) {
			st.Update.Reason, st.Update.Message = metalv1alpha1.ReasonWaitingForMaintenance, why
		})
	}
	return r.move(ctx, sfw, fsm.UpdateEventMaintenanceHeld, metalv1alpha1.ReasonUpdateStaged,
		"ServerMaintenance "+sm.Namespace+"/"+sm.Name+" holds the server: sending the settings and images")
}

// readyMessage is a maintenance's Ready message while it is not Ready (what it waits for).
func readyMessage(sm *metalv1alpha1.ServerMaintenance) string {
	if c := apimeta.FindStatusCondition(sm.Status.Conditions, metalv1alpha1.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
		return c.Message
	}
	return ""
}

// held says whether the update's maintenance holds the server: in Maintenance, for it.
func (r *Reconciler) held(server *metalv1alpha1.Server) bool {
	ref := server.Spec.MaintenanceRef
	return server.Status.State == metalv1alpha1.ServerStateMaintenance && ref != nil &&
		ref.Namespace == r.Update.Namespace && ref.Name == maintenanceName(server.Name)
}

// maintenanceGone says whether the update's ServerMaintenance no longer exists.
func (r *Reconciler) maintenanceGone(ctx context.Context, server string) (bool, error) {
	var sm metalv1alpha1.ServerMaintenance
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Update.Namespace, Name: maintenanceName(server)}, &sm)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return !sm.DeletionTimestamp.IsZero(), err
}

// lost fails an update whose host left its maintenance while images or settings were being
// sent or installed (a person deleted the maintenance?): it is taken back.
func (r *Reconciler) lost(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	return r.fail(ctx, sfw, server, metalv1alpha1.ReasonMaintenanceLost, fmt.Sprintf(
		"the server left ServerMaintenance %s/%s while its update was %s (the maintenance deleted?): taken back, and not given back half-updated",
		r.Update.Namespace, maintenanceName(server.Name), strings.ToLower(string(sfw.Status.Update.State))))
}

// sameSteps says whether two plans send the same things from the same versions (tasks and
// what was read aside).
func sameSteps(a, b []metalv1alpha1.FirmwareUpdateStep) bool {
	return slices.EqualFunc(a, b, func(x, y metalv1alpha1.FirmwareUpdateStep) bool {
		return x.Kind == y.Kind && x.Name == y.Name && x.From == y.From && x.To == y.To
	})
}

// updater connects to the server's BMC as a FirmwareUpdater.
func (r *Reconciler) updater(ctx context.Context, server *metalv1alpha1.Server) (bmc.FirmwareUpdater, bmc.FirmwareReader, error) {
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err != nil {
		return nil, nil, err
	}
	up, ok1 := c.(bmc.FirmwareUpdater)
	rd, ok2 := c.(bmc.FirmwareReader)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("BMC %s's client updates no firmware: %w", server.BMCName(), bmc.ErrUnsupported)
	}
	return up, rd, nil
}

// staging sends the BIOS settings (one write to the Bios settings object) and each image
// (SimpleUpdate, or a multipart push), one per reconcile, writing down each task as it is
// given (a conflict or a restart sends nothing twice). A BMC that refuses fails the update with
// its message; one that cannot be reached is tried again, within the step's time.
func (r *Reconciler) staging(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	if res, done, err := r.timedOut(ctx, sfw, "sending the settings and images"); done {
		return res, err
	}
	if u.HostReset && !r.held(server) {
		return r.lost(ctx, sfw, server)
	}
	var b metalv1alpha1.FirmwareBaseline
	if err := r.Client.Get(ctx, client.ObjectKey{Name: u.Baseline}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonUpdateRefused, "baseline "+u.Baseline+" was deleted before everything was sent")
		}
		return ctrl.Result{}, err
	}
	steps := slices.Clone(u.Steps)
	next := slices.IndexFunc(steps, func(s metalv1alpha1.FirmwareUpdateStep) bool { return s.TaskState == "" })
	if next < 0 {
		return r.move(ctx, sfw, fsm.UpdateEventStaged, metalv1alpha1.ReasonUpdateInstalling, "the BMC is installing: "+progress(steps))
	}
	up, rd, err := r.updater(ctx, server)
	if err != nil {
		return r.retryLater(ctx, sfw, "connecting to the BMC", err)
	}
	if steps[next].Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
		settings := map[string]string{}
		for _, s := range steps {
			if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
				settings[s.Name] = s.To
			}
		}
		if err := up.StageBIOSSettings(ctx, server.Spec.SystemURI, settings); err != nil {
			return r.refused(ctx, sfw, server, "the BIOS settings", err)
		}
		for i := range steps {
			if steps[i].Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
				steps[i].TaskState = "Staged"
			}
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps = steps })
	}
	s := &steps[next]
	spec := componentSpec(&b, s.Name)
	if spec == nil || spec.Version != s.To {
		// Changed since it was admitted: what was sent so far is verified by no one. A
		// baseline that wants something else of it retries it (failed).
		return r.fail(ctx, sfw, server, metalv1alpha1.ReasonUpdateRefused, fmt.Sprintf("baseline %s changed what it wants of %s mid-update", b.Name, s.Name))
	}
	inventory, err := rd.FirmwareInventory(ctx, server.Spec.SystemURI) // Dell's ids carry the version: read just before
	if err != nil {
		return r.retryLater(ctx, sfw, "reading the firmware inventory", err)
	}
	req := bmc.UpdateRequest{SystemURI: server.Spec.SystemURI, ImageURL: spec.Image.URL, Targets: targets(inventory, s.Name)}
	if ref := spec.Image.CredentialsSecretRef; ref != nil {
		var secret corev1.Secret
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Update.Namespace, Name: ref.Name}, &secret); err != nil {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonImageUnavailable,
				fmt.Sprintf("the credentials Secret %s/%s of %s's image cannot be read: %v", r.Update.Namespace, ref.Name, s.Name, err))
		}
		req.Username, req.Password = string(secret.Data["username"]), string(secret.Data["password"])
	}
	pushed := spec.Image
	if spec.Image.ServedBy == metalv1alpha1.ImageServedByBootService {
		served, err := r.servedImage(ctx, sfw, server, next, spec.Image, req.Username, req.Password)
		if err != nil {
			return ctrl.Result{}, err
		}
		if served == "" {
			// Looked for again shortly: the manager does not watch Secrets (it caches none).
			const why = "waiting for the boot service to serve the image"
			again := min(r.Update.taskPoll(), 2*time.Second)
			if u.Message == why {
				return ctrl.Result{RequeueAfter: again}, nil
			}
			res, err := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Message = why })
			if err == nil && !res.Requeue {
				res.RequeueAfter = again
			}
			return res, err
		}
		// The BMC fetches from the boot service, which has the origin's credentials.
		req.ImageURL, req.Username, req.Password = served, "", ""
		pushed.URL = served
	}
	image := &pushedImage{image: pushed, user: req.Username, pass: req.Password, timeout: r.Update.stepTimeout()}
	req.Image = image.open
	task, err := up.StartUpdate(ctx, req)
	image.close()
	switch {
	case image.err != nil:
		return r.fail(ctx, sfw, server, metalv1alpha1.ReasonImageUnavailable, image.err.Error())
	case err != nil:
		return r.refused(ctx, sfw, server, s.Name, err)
	}
	s.Task, s.TaskState = task, string(bmc.TaskNew)
	if task == "" {
		s.TaskState = string(bmc.TaskCompleted)
	}
	return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps = steps })
}

// componentSpec is the baseline's component called name.
func componentSpec(b *metalv1alpha1.FirmwareBaseline, name string) *metalv1alpha1.BaselineComponent {
	for i := range b.Spec.Components {
		if b.Spec.Components[i].Component == name {
			return &b.Spec.Components[i]
		}
	}
	return nil
}

// targets are the inventory members a baseline's component names: the installed BIOS or BMC
// member by class, others by id or pattern.
func targets(inventory []bmc.FirmwareComponent, name string) []string {
	var out []string
	for _, c := range inventory {
		if !c.Installed || !c.Updateable && c.URI == "" {
			continue
		}
		var match bool
		switch name {
		case string(metalv1alpha1.FirmwareComponentBIOS):
			match = c.Class == bmc.ComponentBIOS
		case string(metalv1alpha1.FirmwareComponentBMC):
			match = c.Class == bmc.ComponentBMC
		default:
			match = matchID(name, c.ID)
		}
		if match && c.URI != "" {
			out = append(out, c.URI)
		}
	}
	return out
}

// progress says where each step stands, for a message.
func progress(steps []metalv1alpha1.FirmwareUpdateStep) string {
	var out []string
	settings := 0
	for _, s := range steps {
		if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
			settings++
			continue
		}
		p := fmt.Sprintf("%s → %s %s", s.Name, s.To, s.TaskState)
		if s.Percent > 0 && s.TaskState != string(bmc.TaskCompleted) {
			p += fmt.Sprintf(" %d%%", s.Percent)
		}
		out = append(out, p)
	}
	if settings > 0 {
		out = append(out, fmt.Sprintf("%d BIOS settings staged for the next reset", settings))
	}
	return strings.Join(out, "; ")
}

// installing follows the BMC's tasks to their end.
func (r *Reconciler) installing(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	if res, done, err := r.timedOut(ctx, sfw, "the BMC's tasks"); done {
		return res, err
	}
	if u.HostReset && !r.held(server) {
		return r.lost(ctx, sfw, server)
	}
	up, _, err := r.updater(ctx, server)
	if err != nil {
		return r.retryLater(ctx, sfw, "connecting to the BMC", err)
	}
	steps := slices.Clone(u.Steps)
	running := 0
	for i := range steps {
		s := &steps[i]
		if s.Task == "" || s.TaskState == string(bmc.TaskCompleted) {
			continue
		}
		t, err := up.TaskStatus(ctx, s.Task)
		if err != nil {
			return r.retryLater(ctx, sfw, "reading the task of "+s.Name, err)
		}
		s.TaskState = string(t.State)
		if t.Percent >= 0 {
			s.Percent = int32(min(t.Percent, 100))
		}
		switch {
		case t.Done() && !t.Succeeded():
			msg := fmt.Sprintf("the BMC's task for %s → %s ended %s", s.Name, s.To, t.State)
			if t.Message != "" {
				msg += ": " + t.Message
			}
			return r.move(ctx, sfw, fsm.UpdateEventFail, metalv1alpha1.ReasonUpdateTaskFailed, r.inMaintenance(msg, server, u),
				func(u *metalv1alpha1.FirmwareUpdate) { u.Steps = steps })
		case !t.Done():
			running++
		}
	}
	if running > 0 {
		msg := "the BMC is installing: " + progress(steps)
		if equality.Semantic.DeepEqual(steps, u.Steps) && u.Message == msg {
			return ctrl.Result{RequeueAfter: r.Update.taskPoll()}, nil
		}
		res, err := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps, st.Update.Message = steps, msg })
		if err == nil && !res.Requeue {
			res.RequeueAfter = r.Update.taskPoll()
		}
		return res, err
	}
	if !u.HostReset {
		return r.move(ctx, sfw, fsm.UpdateEventInstalled, metalv1alpha1.ReasonWaitingForHost,
			"installed: "+progress(steps)+"; reading the BMC again", func(u *metalv1alpha1.FirmwareUpdate) { u.Steps = steps })
	}
	now := metav1.NewTime(r.now())
	return r.move(ctx, sfw, fsm.UpdateEventInstalled, metalv1alpha1.ReasonUpdateRebooting,
		"installed: "+progress(steps)+"; ending the maintenance so the host boots with it",
		func(u *metalv1alpha1.FirmwareUpdate) { u.Steps, u.ResetTime = steps, &now })
}

// rebooting ends the maintenance and waits for the server to leave it: a pool server is
// re-discovered (its probe boots: the reset that applies what was staged, and the host's own
// report), a claimed one goes back to its claim, powered as the claim asks.
func (r *Reconciler) rebooting(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	if res, done, err := r.timedOut(ctx, sfw, "the server leaving its maintenance"); done {
		return res, err
	}
	if err := r.deleteMaintenance(ctx, server.Name); err != nil {
		return ctrl.Result{}, err
	}
	if server.Status.State == metalv1alpha1.ServerStateMaintenance || server.Spec.MaintenanceRef != nil {
		return ctrl.Result{}, nil // the server's change wakes this
	}
	how := "re-discovered: its probe reports what the host runs"
	if server.Spec.ServerClaimRef != nil {
		how = "back with its claim " + server.Spec.ServerClaimRef.Namespace + "/" + server.Spec.ServerClaimRef.Name
	}
	return r.move(ctx, sfw, fsm.UpdateEventRebooted, metalv1alpha1.ReasonWaitingForHost, "the server left its maintenance, "+how,
		func(u *metalv1alpha1.FirmwareUpdate) { u.Maintenance = nil })
}

// verifying waits for the BMC, read after the reset (and after a pool server's probe report),
// to report what each step sent (read() writes down what it found of each, Read), and for a
// pool server's probe to report, from the host's own SMBIOS, the BIOS version its BMC reports.
func (r *Reconciler) verifying(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	since := u.StateTime.Time
	if u.ResetTime != nil {
		since = u.ResetTime.Time
	}
	inv := server.Status.Inventory
	pool := u.HostReset && server.Spec.ServerClaimRef == nil
	reported := inv != nil && inv.Source == metalv1alpha1.InventorySourceProbe && inv.ReportedAt != nil && !inv.ReportedAt.Time.Before(since)
	if res, done, err := r.timedOut(ctx, sfw, "the BMC and the host to agree with what was sent"); done {
		return res, err
	}
	if pool && !reported {
		return ctrl.Result{}, nil // its report wakes this; the step's time bounds the wait
	}
	if pool {
		since = inv.ReportedAt.Time
	}
	read := sfw.Status.LastReadTime
	if read == nil || !read.Time.After(since) {
		// Times are kept to the second: a read in since's second may have been before it.
		// The first read from the next second on is after it.
		if wait := since.Truncate(time.Second).Add(time.Second).Sub(r.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, errReadAgain
	}
	if !apimeta.IsStatusConditionTrue(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareRead) {
		return ctrl.Result{}, nil // read again after the failed read's retry (readDue)
	}
	var disagree []string
	for _, s := range u.Steps {
		if !stepDone(s) {
			disagree = append(disagree, fmt.Sprintf("%s is %q, not %q", s.Name, ptrOr(s.Read), s.To))
		}
	}
	if len(disagree) > 0 {
		if pool {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonBMCDisagrees,
				"after the update and the host's reset the BMC reports "+strings.Join(disagree, "; "))
		}
		// A BMC may show its new firmware only once it has reset itself, and a claimed host
		// applies what was staged when its claim powers it on: the BMC is read again now and
		// then (a version its polls show wakes this at once); the step's time bounds the wait.
		if left := read.Add(r.reverify()).Sub(r.now()); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		return ctrl.Result{}, errReadAgain
	}
	verified := "the BMC, read after the reset, reports what baseline " + u.Baseline + " wanted"
	if pool {
		for _, s := range u.Steps {
			if s.Kind != metalv1alpha1.FirmwareDifferenceComponent || s.Name != string(metalv1alpha1.FirmwareComponentBIOS) {
				continue
			}
			host := ""
			if inv.DMI != nil {
				host = inv.DMI.BIOS.Version
			}
			if !sameVersion(host, sfw.Status.BIOSVersion) {
				return r.fail(ctx, sfw, server, metalv1alpha1.ReasonHostDisagrees,
					fmt.Sprintf("the host's own SMBIOS (its probe's report of %s) says BIOS version %q, its BMC %q",
						inv.ReportedAt.UTC().Format(time.RFC3339), host, sfw.Status.BIOSVersion))
			}
			verified += fmt.Sprintf(", and the host's own SMBIOS agrees (BIOS %s)", host)
		}
	} else if u.HostReset {
		verified += "; the host's own word comes at its next probe boot (it is claimed: no probe runs under its tenant)"
	}
	if err := r.untaint(ctx, server); err != nil {
		return ctrl.Result{}, err
	}
	return r.move(ctx, sfw, fsm.UpdateEventVerified, metalv1alpha1.ReasonUpdateSucceeded, verified)
}

// reverify is how often a claimed server's BMC is read while it does not show the update yet.
func (r *Reconciler) reverify() time.Duration { return 6 * r.Update.taskPoll() }

// stepDone says whether what the BMC read after the reset (Read) is what the step sent.
func stepDone(s metalv1alpha1.FirmwareUpdateStep) bool {
	if s.Read == nil {
		return false
	}
	if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
		return sameValue(s.To, *s.Read)
	}
	for _, v := range strings.Split(*s.Read, ", ") {
		if v != s.To {
			return false
		}
	}
	return true
}

func ptrOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// readSteps writes down, on an update being verified, what a fresh read found of each step
// (st has the read's findings whole: the cached copy does not).
func readSteps(st *metalv1alpha1.ServerFirmwareStatus) {
	u := st.Update
	if u == nil || u.State != metalv1alpha1.FirmwareUpdateVerifying {
		return
	}
	for i := range u.Steps {
		s := &u.Steps[i]
		var v string
		if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting {
			if st.BIOS != nil {
				v = st.BIOS.Attributes[s.Name]
			}
		} else {
			v = strings.Join(componentVersions(s.Name, st), ", ")
		}
		s.Read = &v
	}
}

// errReadAgain asks Reconcile to read the BMC now, whatever readDue says.
var errReadAgain = errors.New("the update needs a read of the BMC")

// sameVersion says whether the host's SMBIOS BIOS version is the BMC's: equal, or one the
// other followed by a space and more (a date, a build).
func sameVersion(host, bmcVersion string) bool {
	host, bmcVersion = strings.TrimSpace(host), strings.TrimSpace(bmcVersion)
	return host != "" && (host == bmcVersion || strings.HasPrefix(host, bmcVersion+" ") || strings.HasPrefix(bmcVersion, host+" "))
}

// fail fails the update after its reset: the server is taken back into maintenance (it stays
// tainted meanwhile, out of any claim's reach), with the reason.
func (r *Reconciler) fail(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, reason, message string) (ctrl.Result, error) {
	u := sfw.Status.Update
	var ref *metalv1alpha1.ObjectReference
	if u.HostReset {
		var b metalv1alpha1.FirmwareBaseline
		if err := r.Client.Get(ctx, client.ObjectKey{Name: u.Baseline}, &b); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, err
		}
		b.Name = u.Baseline
		if b.Spec.Rollout.Policy == "" {
			b.Spec.Rollout.Policy = metalv1alpha1.MaintenanceOwnerApproval
		}
		var err error
		if ref, err = r.ensureMaintenance(ctx, sfw, server, &b, u); err != nil {
			return ctrl.Result{}, err
		}
	}
	return r.move(ctx, sfw, fsm.UpdateEventFail, reason, r.inMaintenance(message, server, u), func(u *metalv1alpha1.FirmwareUpdate) {
		if ref != nil {
			u.Maintenance = ref
		}
	})
}

// inMaintenance adds to a failure's message where the server is and what to do.
func (r *Reconciler) inMaintenance(message string, server *metalv1alpha1.Server, u *metalv1alpha1.FirmwareUpdate) string {
	if !u.HostReset {
		return message + fmt.Sprintf("; the host stays in service (only its BMC's firmware was to change): fix the cause and set %s on this ServerFirmware to try again",
			metalv1alpha1.AnnotationRetryUpdate)
	}
	return message + fmt.Sprintf("; the server stays in ServerMaintenance %s/%s: fix the cause and set %s on this ServerFirmware to try again, "+
		"or delete the maintenance to give the server back as it is", r.Update.Namespace, maintenanceName(server.Name), metalv1alpha1.AnnotationRetryUpdate)
}

// refused fails the update with the BMC's refusal of what.
func (r *Reconciler) refused(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, what string, err error) (ctrl.Result, error) {
	return r.move(ctx, sfw, fsm.UpdateEventFail, metalv1alpha1.ReasonUpdateRefused,
		r.inMaintenance(fmt.Sprintf("the BMC refused %s: %v", what, err), server, sfw.Status.Update))
}

// retryLater keeps the update where it is after an error that may pass (a BMC that does not
// answer), saying so, and tries again after the task poll.
func (r *Reconciler) retryLater(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, doing string, err error) (ctrl.Result, error) {
	log.FromContext(ctx).Info("firmware update: tried again", "doing", doing, "error", err.Error())
	msg := truncate(fmt.Sprintf("%s failed (tried again): %v", doing, err), 2048)
	if sfw.Status.Update.Message == msg {
		return ctrl.Result{RequeueAfter: r.Update.taskPoll()}, nil
	}
	res, werr := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Message = msg })
	if werr == nil && !res.Requeue {
		res.RequeueAfter = r.Update.taskPoll()
	}
	return res, werr
}

// timedOut fails the update when its state has lasted longer than the step timeout; done says
// the caller returns res, err. Otherwise it asks for a reconcile when the time runs out.
func (r *Reconciler) timedOut(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, waitingFor string) (ctrl.Result, bool, error) {
	u := sfw.Status.Update
	if u.StateTime == nil {
		return ctrl.Result{}, false, nil
	}
	left := u.StateTime.Add(r.Update.stepTimeout()).Sub(r.now())
	if left > 0 {
		return ctrl.Result{}, false, nil
	}
	var server metalv1alpha1.Server
	if err := r.Client.Get(ctx, client.ObjectKey{Name: sfw.Name}, &server); err != nil {
		return ctrl.Result{}, true, client.IgnoreNotFound(err)
	}
	res, err := r.fail(ctx, sfw, &server, metalv1alpha1.ReasonUpdateTimedOut,
		fmt.Sprintf("%s for %s: gave up waiting for %s", u.State, r.Update.stepTimeout(), waitingFor))
	return res, true, err
}

// deadline is when the update's current state times out, for a requeue; zero when it does not.
func (r *Reconciler) deadline(u *metalv1alpha1.FirmwareUpdate) time.Duration {
	if u == nil || u.StateTime == nil {
		return 0
	}
	switch u.State {
	case metalv1alpha1.FirmwareUpdateStaging, metalv1alpha1.FirmwareUpdateInstalling, metalv1alpha1.FirmwareUpdateRebooting, metalv1alpha1.FirmwareUpdateVerifying:
		return max(u.StateTime.Add(r.Update.stepTimeout()).Sub(r.now()), time.Second)
	}
	return 0
}

// failed gives the server back when a person deleted the failed update's maintenance, and
// starts the update again when a person asked (the retry annotation, removed) or the baseline
// now wants something else of it; a baseline edited otherwise (paused, say) retries nothing.
func (r *Reconciler) failed(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, p *plan) (ctrl.Result, error) {
	u := sfw.Status.Update
	if u.Maintenance != nil {
		gone, err := r.maintenanceGone(ctx, server.Name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if gone {
			if err := r.untaint(ctx, server); err != nil {
				return ctrl.Result{}, err
			}
			return r.move(ctx, sfw, fsm.UpdateEventWithdraw, metalv1alpha1.ReasonUpdateWithdrawn,
				"its ServerMaintenance was deleted: the server is given back as the failed update left it", func(u *metalv1alpha1.FirmwareUpdate) { u.Maintenance = nil })
		}
	}
	_, asked := sfw.Annotations[metalv1alpha1.AnnotationRetryUpdate]
	changed := p != nil && p.baseline.Name == u.Baseline && !sameWants(p.steps, u.Steps)
	if !asked && !changed {
		return ctrl.Result{}, nil
	}
	why := "retried, as " + metalv1alpha1.AnnotationRetryUpdate + " asks"
	if !asked {
		why = "baseline " + u.Baseline + " wants something else of it since it failed: tried again"
	}
	res, err := r.move(ctx, sfw, fsm.UpdateEventRetry, metalv1alpha1.ReasonWaitingForTurn, why, func(u *metalv1alpha1.FirmwareUpdate) {
		// Sent again from the start; the maintenance that holds the server is taken again.
		for i := range u.Steps {
			u.Steps[i].Task, u.Steps[i].TaskState, u.Steps[i].Percent, u.Steps[i].Read = "", "", 0, nil
		}
		u.ResetTime = nil
	})
	if err != nil || !asked {
		return res, err
	}
	return res, r.forgetRetry(ctx, sfw)
}

// sameWants says whether two plans want the same things (whatever they were sent from).
func sameWants(a, b []metalv1alpha1.FirmwareUpdateStep) bool {
	return slices.EqualFunc(a, b, func(x, y metalv1alpha1.FirmwareUpdateStep) bool {
		return x.Kind == y.Kind && x.Name == y.Name && x.To == y.To
	})
}

// forgetRetry removes a person's retry request.
func (r *Reconciler) forgetRetry(ctx context.Context, sfw *metalv1alpha1.ServerFirmware) error {
	patch := []byte(`{"metadata":{"annotations":{"` + metalv1alpha1.AnnotationRetryUpdate + `":null}}}`)
	read := sfw.ResourceVersion
	if err := r.Client.Patch(ctx, sfw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.written.Wrote(sfw, read)
	return nil
}

// servedImageName is the Secret asking the boot service to serve the image of an update's step.
func servedImageName(server string, step int) string {
	return fmt.Sprintf("firmware-image-%s-%d", server, step)
}

// servedImage asks the boot service to serve image for the update's step (a Secret in its
// namespace, owned by the ServerFirmware, holding the origin's URL, checksum and credentials)
// and returns the URL it serves it at; "" until it says.
func (r *Reconciler) servedImage(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, step int, image metalv1alpha1.FirmwareImage, user, pass string) (string, error) {
	want := map[string][]byte{metalv1alpha1.FirmwareImageURLKey: []byte(image.URL)}
	if image.Checksum != "" {
		want[metalv1alpha1.FirmwareImageChecksumKey] = []byte(image.Checksum)
	}
	if user != "" || pass != "" {
		want[metalv1alpha1.FirmwareImageUsernameKey], want[metalv1alpha1.FirmwareImagePasswordKey] = []byte(user), []byte(pass)
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: r.Update.BootNamespace, Name: servedImageName(server.Name, step)}
	err := r.APIReader.Get(ctx, key, &secret) // Secrets are not cached
	if err == nil {
		same := true
		for k, v := range want {
			same = same && string(secret.Data[k]) == string(v)
		}
		if same {
			return string(secret.Data[metalv1alpha1.FirmwareImageServedURLKey]), nil
		}
		// Another image than asked (a retry after the baseline changed): asked anew, under
		// another UID, so at another URL.
		if err := r.Client.Delete(ctx, &secret); client.IgnoreNotFound(err) != nil {
			return "", err
		}
		return "", nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: server.Name}}, Data: want}
	if err := controllerutil.SetControllerReference(sfw, &secret, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Create(ctx, &secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("asking the boot service to serve the image: %w", err)
	}
	return "", nil
}

// forgetServedImages deletes the Secrets by which the boot service serves images for server's
// update, in one request: the URLs die with them.
func (r *Reconciler) forgetServedImages(ctx context.Context, server string) error {
	if r.Update.BootNamespace == "" {
		return nil
	}
	return r.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(r.Update.BootNamespace),
		client.MatchingLabels{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: server})
}
