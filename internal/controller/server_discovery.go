package controller

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// Reasons of discovery steps.
const (
	ReasonWaitingForBootService = "WaitingForBootService"
	ReasonDiscoveryBackoff      = "DiscoveryBackoff"
	ReasonProbeBooting          = "ProbeBooting"
	ReasonReportReceived        = "ReportReceived"
	ReasonDiscoveryTimedOut     = "DiscoveryTimedOut"
	ReasonAttemptsExhausted     = "DiscoveryAttemptsExhausted"
	ReasonAwaitingReport        = "AwaitingReport"
)

// initial boots the probe: discovery boot configuration, PXE once, power on.
func (r *ServerReconciler) initial(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	attempts := server.Status.DiscoveryAttempts
	if attempts >= r.Discovery.Attempts {
		return step{event: fsm.EventFail, reason: ReasonAttemptsExhausted,
			message: fmt.Sprintf("no probe report after %d discovery boots of %v each; set the %s annotation to try again", attempts, r.Discovery.Timeout, AnnotationRetry)}, nil
	}
	if attempts > 0 {
		// After a timed-out attempt, wait before booting again: a host that never reports is
		// not rebooted in a tight loop.
		if remaining := time.Until(enteredAt(server).Add(r.discoveryBackoff(attempts))); remaining > 0 {
			return wait(ReasonDiscoveryBackoff, fmt.Sprintf("attempt %d of %d timed out; retrying in %v", attempts, r.Discovery.Attempts, remaining.Round(time.Second)), remaining), nil
		}
	}
	sbc, err := ensureProbeBoot(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeDiscovery)
	if err != nil {
		return step{}, err
	}
	if sbc.Status.State != metalv1alpha1.BootConfigurationStateReady {
		return wait(ReasonWaitingForBootService, fmt.Sprintf("waiting for the boot service to mark %s/%s Ready", sbc.Namespace, sbc.Name), 0), nil
	}
	c, err := connectBMC(ctx, r.Client, r.Clients, bmcName(server))
	if err != nil {
		return step{}, err
	}
	if err := c.SetBootOnce(ctx, server.Spec.SystemURI, bmc.BootPXE); err != nil {
		return step{}, err
	}
	// A server that is already on is restarted, so it picks up the one-time PXE boot.
	action := bmc.PowerOn
	if server.Status.PowerState == metalv1alpha1.PowerStateOn {
		action = bmc.PowerForceRestart
	}
	if err := c.SetPower(ctx, server.Spec.SystemURI, action); err != nil {
		return step{}, err
	}
	return step{
		event: fsm.EventDiscover, reason: ReasonProbeBooting,
		message:      fmt.Sprintf("attempt %d of %d: PXE once into %s, power %s", attempts+1, r.Discovery.Attempts, sbc.Name, action),
		apply:        func(s *metalv1alpha1.Server) { s.Status.DiscoveryAttempts++ },
		requeueAfter: r.Discovery.Timeout,
	}, nil
}

// discoveryBackoff is the pause before discovery attempt n+1.
func (r *ServerReconciler) discoveryBackoff(n int32) time.Duration {
	d := r.Settings.BackoffBase
	for i := int32(1); i < n && d < r.Settings.BackoffMax; i++ {
		d *= 2
	}
	return min(d, r.Settings.BackoffMax)
}

// discovery waits for the probe's report, then powers off and cleans up; or gives up at the
// timeout.
func (r *ServerReconciler) discovery(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	started := enteredAt(server)
	if reported := reportTime(server); !reported.IsZero() && server.Status.Inventory.Source == "Probe" && !reported.Before(started.Truncate(time.Second)) {
		if err := r.powerOffAndRemoveBoot(ctx, server, metalv1alpha1.BootPurposeDiscovery); err != nil {
			return step{}, err
		}
		inv := server.Status.Inventory
		return step{event: fsm.EventDiscovered, reason: ReasonReportReceived,
			message: fmt.Sprintf("probe reported %d CPU cores, %v memory, %d disks, %d NICs", inv.CPU.Cores, inv.Memory.Total.String(), len(inv.Storage), len(inv.NetworkInterfaces)),
			apply: func(s *metalv1alpha1.Server) {
				s.Status.DiscoveryAttempts = 0
				setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionDiscovered, metav1.ConditionTrue, ReasonReportReceived, "inventory from the in-band probe")
			}}, nil
	}
	deadline := started.Add(r.Discovery.Timeout)
	if remaining := deadline.Sub(r.now()); remaining > 0 {
		return wait(ReasonAwaitingReport, fmt.Sprintf("waiting for the probe's report until %s", deadline.UTC().Format(time.RFC3339)), remaining), nil
	}
	// Power off but keep the boot configuration: the next attempt reuses it.
	c, err := connectBMC(ctx, r.Client, r.Clients, bmcName(server))
	if err != nil {
		return step{}, err
	}
	if err := c.SetPower(ctx, server.Spec.SystemURI, bmc.PowerOff); err != nil {
		return step{}, err
	}
	return step{event: fsm.EventDiscoveryTimedOut, reason: ReasonDiscoveryTimedOut,
		message: fmt.Sprintf("no report within %v (attempt %d of %d)", r.Discovery.Timeout, server.Status.DiscoveryAttempts, r.Discovery.Attempts),
		apply: func(s *metalv1alpha1.Server) {
			setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionDiscovered, metav1.ConditionFalse, ReasonDiscoveryTimedOut, "the probe did not report in time")
		}}, nil
}

// powerOffAndRemoveBoot requests power off and removes the probe's boot configuration.
func (r *ServerReconciler) powerOffAndRemoveBoot(ctx context.Context, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	c, err := connectBMC(ctx, r.Client, r.Clients, bmcName(server))
	if err != nil {
		return err
	}
	if err := c.SetPower(ctx, server.Spec.SystemURI, bmc.PowerOff); err != nil {
		return err
	}
	return deleteProbeBoot(ctx, r.Client, r.Probe, server, purpose)
}
