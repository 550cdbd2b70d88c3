package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// Power requests of a server at rest (Available, Reserved, Maintenance), and the power-offs
// that end discovery, installs and wipes, are delivered at least once, through internal/fsm's
// power table (docs/power-lifecycle.md) and status.powerDelivery. The step that asks records
// the request (Requested) in its status write; the BMC call runs after that write, and marks
// the request Sent (or ShuttingDown, for a graceful one) once the BMC took it. A manager that
// dies in between leaves it Requested, and the state's handler sends it again. A sent request
// is watched until the BMC reports it (Confirmed); one not reported within the confirmation
// timeout is sent once more, then left Unconfirmed (still watched, never sent again: no loop);
// a graceful shutdown the OS ignores past the grace period is forced. A confirmed request is
// not repeated: a power change made outside Ironfleet afterwards stands.

func poweredReason(d *metalv1alpha1.PowerDelivery) string {
	return "Power" + string(d.Want) + string(d.State)
}

// poweredStatus: Sent and Confirmed say the power asked for is on its way or there; the others
// say it is not (yet).
func poweredStatus(d *metalv1alpha1.PowerDelivery) metav1.ConditionStatus {
	return status.BoolStatus(d.State == metalv1alpha1.PowerSent || d.State == metalv1alpha1.PowerConfirmed)
}

// poweredMessage tells people what the delivery state means for them.
func poweredMessage(d *metalv1alpha1.PowerDelivery) string {
	switch d.State {
	case metalv1alpha1.PowerRequested:
		return fmt.Sprintf("%s: power %s requested, not sent to the BMC yet", d.Reason, d.Want)
	case metalv1alpha1.PowerSent:
		return fmt.Sprintf("%s: the BMC took power %s (attempt %d); waiting for it to report it", d.Reason, d.Want, d.Attempts)
	case metalv1alpha1.PowerShuttingDown:
		return fmt.Sprintf("%s: the BMC took GracefulShutdown; the OS has the grace period (--graceful-shutdown-timeout) to stop, then the power is forced off", d.Reason)
	case metalv1alpha1.PowerConfirmed:
		return fmt.Sprintf("%s: the BMC reports power %s", d.Reason, d.Want)
	case metalv1alpha1.PowerUnconfirmed:
		return fmt.Sprintf("%s: the BMC took power %s twice but still reports otherwise after the confirmation timeout (--power-confirm-timeout) each time; not sent again: check the BMC and the server; it is sent again when the power asked for changes (the claim's spec.power, or a maintenance's)",
			d.Reason, d.Want)
	}
	return d.Reason
}

// movePower fires one event of the power table on a server's delivery, stamps the time it
// entered its new state, and mirrors it on the Powered condition.
func movePower(s *metalv1alpha1.Server, event fsm.PowerEvent, at time.Time) error {
	d := s.Status.PowerDelivery
	to, err := fsm.Power.Next(context.Background(), d.State, event, fsm.PowerFacts{Graceful: d.Graceful, Resent: d.Attempts >= 2})
	if err != nil {
		return err
	}
	if to != d.State || event == fsm.PowerEventRequest {
		d.Since = metav1.NewTime(at)
	}
	d.State = to
	setPowered(s, nil)
	return nil
}

// requestPower records a forced power request (On, ForceOff), not sent yet, in status.
func requestPower(s *metalv1alpha1.Server, want metalv1alpha1.Power, message string) {
	request(s, want, false, message)
}

// requestShutdown records a graceful power-off: GracefulShutdown, ForceOff after the grace
// period.
func requestShutdown(s *metalv1alpha1.Server, message string) {
	request(s, metalv1alpha1.PowerOff, true, message)
}

func request(s *metalv1alpha1.Server, want metalv1alpha1.Power, graceful bool, message string) {
	from := metalv1alpha1.PowerRequested
	if d := s.Status.PowerDelivery; d != nil {
		from = d.State
	}
	s.Status.PowerDelivery = &metalv1alpha1.PowerDelivery{Want: want, Graceful: graceful && want == metalv1alpha1.PowerOff,
		State: from, Generation: s.Generation, Reason: message}
	_ = movePower(s, fsm.PowerEventRequest, time.Now()) // request is allowed from every state
}

// forgetPower drops the last request: the next state asks for its own power.
func forgetPower(s *metalv1alpha1.Server) {
	s.Status.PowerDelivery = nil
	setPowered(s, nil)
}

// sendPower is the BMC call that delivers a forced power request, and marks it sent once it has
// been. It does not read the power state first: some BMCs report the previous state for a while
// after a change (a server the probe just powered on still reads Off), and the request would be
// lost.
func sendPower(uri string, want metalv1alpha1.Power, message string) effect {
	eff := setPower(uri, powerAction(want))
	eff.done = func(s *metalv1alpha1.Server) { powerSent(s, want, message) }
	return eff
}

// sendDelivery sends the request recorded in d: GracefulShutdown for a graceful one.
func sendDelivery(uri string, d *metalv1alpha1.PowerDelivery) effect {
	if !d.Graceful {
		return sendPower(uri, d.Want, d.Reason)
	}
	eff := setPower(uri, bmc.PowerGracefulShutdown)
	eff.done = func(s *metalv1alpha1.Server) { powerSent(s, d.Want, d.Reason) }
	return eff
}

// powerSent marks the recorded request sent, counting the attempt.
func powerSent(s *metalv1alpha1.Server, want metalv1alpha1.Power, message string) {
	if s.Status.PowerDelivery == nil || s.Status.PowerDelivery.Want != want {
		requestPower(s, want, message) // recorded by another path: record it now
	}
	s.Status.PowerDelivery.Attempts++
	_ = movePower(s, fsm.PowerEventSent, time.Now())
}

// powerStep asks for a power state: recorded with the step's status write, sent after it.
func powerStep(server *metalv1alpha1.Server, want metalv1alpha1.Power, message string) step {
	return step{effect: sendPower(server.Spec.SystemURI, want, message), apply: func(s *metalv1alpha1.Server) { requestPower(s, want, message) }}
}

// shutdownStep asks the OS to shut down, and forces the power off after the grace period.
func shutdownStep(server *metalv1alpha1.Server, message string) step {
	d := &metalv1alpha1.PowerDelivery{Want: metalv1alpha1.PowerOff, Graceful: true, Reason: message}
	return step{effect: sendDelivery(server.Spec.SystemURI, d), apply: func(s *metalv1alpha1.Server) { requestShutdown(s, message) }}
}

// unsent says whether the server's last power request may never have reached its BMC.
func unsent(server *metalv1alpha1.Server) bool {
	d := server.Status.PowerDelivery
	return d != nil && d.State == metalv1alpha1.PowerRequested
}

// resendPower sends again a power request that may never have reached the BMC (or is to be
// sent once more, or forced); nothing when there is none.
func resendPower(server *metalv1alpha1.Server) step {
	if !unsent(server) {
		return step{}
	}
	return step{effect: sendDelivery(server.Spec.SystemURI, server.Status.PowerDelivery)}
}

// watched says whether a delivery waits for the BMC to report it.
func watched(d *metalv1alpha1.PowerDelivery) bool {
	return d != nil && (d.State == metalv1alpha1.PowerSent || d.State == metalv1alpha1.PowerShuttingDown || d.State == metalv1alpha1.PowerUnconfirmed)
}

// bootDisk points the server's boots at its disk: for good (BootSourceOverrideEnabled
// Continuous) where the BMC allows it; for the next boot only (persistent false) on a BMC that
// offers one-time overrides alone (Supermicro's). Either way the next boot is the disk.
func bootDisk(ctx context.Context, c bmc.Client, uri string, mode metalv1alpha1.BootMode) (persistent bool, err error) {
	err = c.SetBootPersistent(ctx, uri, bmc.BootDisk, mode)
	if !errors.Is(err, bmc.ErrUnsupported) {
		return err == nil, err
	}
	return false, c.SetBootOnce(ctx, uri, bmc.BootDisk, mode)
}

// bootOnceOnlyNote ends the Provisioned message of an installed server whose BMC allows only
// one-time boot overrides.
const bootOnceOnlyNote = " (when Ironfleet powers it on: its BMC allows only one-time boot overrides, so a power-on outside Ironfleet follows the firmware's boot order)"

// fromDisk makes a power effect boot the disk: the boot override is set (bootDisk) before the
// power action, and once both are done the Provisioned condition says whether the disk boot
// holds for every power-on or only for Ironfleet's.
func fromDisk(eff effect, uri string, mode metalv1alpha1.BootMode) effect {
	run, done := eff.run, eff.done
	persistent := true // what this effect's bootDisk found, for its done
	eff.run = func(ctx context.Context, c bmc.Client) error {
		var err error
		if persistent, err = bootDisk(ctx, c, uri, mode); err != nil {
			return err
		}
		return run(ctx, c)
	}
	eff.done = func(s *metalv1alpha1.Server) {
		if done != nil {
			done(s)
		}
		c := meta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionProvisioned)
		if c == nil || c.Status != metav1.ConditionTrue {
			return
		}
		c.Message = strings.TrimSuffix(c.Message, bootOnceOnlyNote)
		if !persistent {
			c.Message += bootOnceOnlyNote
		}
	}
	return eff
}

func powerAction(p metalv1alpha1.Power) bmc.PowerAction {
	if p == metalv1alpha1.PowerOff {
		return bmc.PowerOff
	}
	return bmc.PowerOn
}

// showUnsentPower says in the Powered condition why a power request is still not sent: the BMC
// call that was to send it failed. It is sent again with backoff, and the message goes when it
// is sent. The caller writes it (when it is news).
func showUnsentPower(server *metalv1alpha1.Server, err error) {
	d := server.Status.PowerDelivery
	if d == nil || d.State != metalv1alpha1.PowerRequested {
		return
	}
	setPowered(server, err)
}

// powerObserveDelay is how soon a requested power change is looked at again.
const powerObserveDelay = 2 * time.Second

func minPositive(a, b time.Duration) time.Duration {
	if a <= 0 || b < a {
		return b
	}
	return a
}

// observePower reads the power state of a server whose last change was requested but not yet
// seen, into its status, and moves its power delivery on: Confirmed once the BMC reports it;
// sent once more, then Unconfirmed, when it does not within the confirmation timeout; forced
// off when the OS ignores a graceful shutdown past the grace period. It says how soon to look
// again (0: no need).
func (r *Reconciler) observePower(ctx context.Context, server *metalv1alpha1.Server) time.Duration {
	ps, d := server.Status.PowerState, server.Status.PowerDelivery
	powering := ps == metalv1alpha1.PowerStatePoweringOn || ps == metalv1alpha1.PowerStatePoweringOff
	if !powering && !watched(d) {
		return 0
	}
	timeouts := r.Settings.EffectivePower()
	// A request given up on (Unconfirmed) is still watched, once per confirmation timeout.
	again := powerObserveDelay
	if d != nil && d.State == metalv1alpha1.PowerUnconfirmed {
		again = timeouts.Confirm
	}
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err != nil {
		return again
	}
	now, err := c.PowerState(ctx, server.Spec.SystemURI)
	if err != nil {
		return again
	}
	if (ps == metalv1alpha1.PowerStatePoweringOn && now == metalv1alpha1.PowerStateOn) || (ps == metalv1alpha1.PowerStatePoweringOff && now == metalv1alpha1.PowerStateOff) {
		server.Status.PowerState = now
		powering = false
	}
	if !watched(d) {
		if powering {
			return powerObserveDelay // the BMC has not got there yet (some lag by seconds)
		}
		return 0
	}
	if now == wantedPowerState(d.Want) {
		server.Status.PowerState = now
		_ = movePower(server, fsm.PowerEventObserved, r.now())
		return 0
	}
	waited := r.now().Sub(d.Since.Time)
	switch {
	case d.State == metalv1alpha1.PowerShuttingDown && waited >= timeouts.GracefulShutdown:
		_ = movePower(server, fsm.PowerEventEscalate, r.now())
		d.Graceful, d.Attempts = false, 0
		setPowered(server, nil)
		r.Events.Eventf(server, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonGracefulShutdownIgnored, "ForceOff",
			"the OS did not shut down within %s of GracefulShutdown (the BMC reports %s): forcing the power off", timeouts.GracefulShutdown, now)
		return 0 // the state's handler sends the ForceOff in this reconcile
	case d.State == metalv1alpha1.PowerSent && waited >= timeouts.Confirm:
		_ = movePower(server, fsm.PowerEventTimedOut, r.now())
		if d.State == metalv1alpha1.PowerUnconfirmed {
			server.Status.PowerState = now // stop showing Powering*: the BMC says otherwise
			r.Events.Eventf(server, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonPowerUnconfirmed, "Power",
				"the BMC took power %s twice but still reports %s after %s each time; not sending it again", d.Want, now, timeouts.Confirm)
			return timeouts.Confirm // still watched
		}
		r.Events.Eventf(server, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonPowerResent, "Power",
			"the BMC took power %s but still reports %s after %s: sending it once more", d.Want, now, timeouts.Confirm)
		return 0 // the state's handler sends it again in this reconcile
	}
	return again
}

func wantedPowerState(p metalv1alpha1.Power) metalv1alpha1.PowerState {
	if p == metalv1alpha1.PowerOff {
		return metalv1alpha1.PowerStateOff
	}
	return metalv1alpha1.PowerStateOn
}
