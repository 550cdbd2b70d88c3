package firmware

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
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
			if !bmcOnly(d.Kind, d.Name) {
				p.hostReset = true
			}
		}
		if len(p.steps) > 0 {
			return p
		}
	}
	return nil
}

// bmcOnly says whether a step changes the BMC alone, which needs no host downtime: its own
// firmware, or its settings.
func bmcOnly(kind metalv1alpha1.FirmwareDifferenceKind, name string) bool {
	return kind == metalv1alpha1.FirmwareDifferenceBMCSetting ||
		kind == metalv1alpha1.FirmwareDifferenceComponent && name == string(metalv1alpha1.FirmwareComponentBMC)
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

// sameSteps says whether two plans send the same things from the same versions (tasks and
// what was read aside).
func sameSteps(a, b []metalv1alpha1.FirmwareUpdateStep) bool {
	return slices.EqualFunc(a, b, func(x, y metalv1alpha1.FirmwareUpdateStep) bool {
		return x.Kind == y.Kind && x.Name == y.Name && x.From == y.From && x.To == y.To
	})
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
