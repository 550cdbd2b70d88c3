package server

import (
	"cmp"
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// startMaintenance takes the server from whatever it was doing. Probe boots in flight are
// abandoned; a dirty server stays marked dirty, so it is wiped before it is pooled again. A
// Reserved server is marked dirty here: its tenant has had its disks, and if the claim goes
// while it is in maintenance, it leaves through re-discovery, not through Cleanup.
func (r *Reconciler) startMaintenance(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeDiscovery,
		metalv1alpha1.BootPurposeCleanup, metalv1alpha1.BootPurposeProvisioning); err != nil {
		return step{}, err
	}
	ref := server.Spec.MaintenanceRef
	fromTenant := server.Status.State == metalv1alpha1.ServerStateReserved
	return step{event: fsm.EventStartMaintenance, reason: metalv1alpha1.ReasonMaintenanceStarted,
		message: fmt.Sprintf("taken by ServerMaintenance %s/%s", ref.Namespace, ref.Name),
		apply: func(s *metalv1alpha1.Server) {
			s.Status.DiscoveryAttempts, s.Status.LastProbeBootTime = 0, nil
			// An install under way is abandoned with its boot; back with its claim, the
			// server installs afresh, with every attempt.
			s.Status.ProvisionAttempts = 0
			if c := meta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionProvisioned); c != nil && c.Status != metav1.ConditionTrue {
				setProvisioned(s, metalv1alpha1.ReasonInstallInterrupted,
					fmt.Sprintf("the install was stopped by ServerMaintenance %s/%s; it starts again when the maintenance ends", ref.Namespace, ref.Name))
			}
			setInMaintenance(s, ref)
			if fromTenant {
				setCleaned(s, metalv1alpha1.ReasonTakenFromTenant,
					"taken into maintenance from its claim; wiped before it is pooled again")
				s.Status.LastWipe = nil // before the tenant: it does not count
			}
		}}, nil
}

// maintenance keeps the server's power as the maintenance asks, and gives the server back
// when the maintenance is gone: to its claim, or to re-discovery.
func (r *Reconciler) maintenance(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	ref := server.Spec.MaintenanceRef
	if ref == nil {
		return r.endMaintenance(server), nil
	}
	var sm metalv1alpha1.ServerMaintenance
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sm); err != nil {
		if apierrors.IsNotFound(err) {
			return step{}, nil // its finalizer clears the reference
		}
		return step{}, err
	}
	want := cmp.Or(sm.Spec.Power, metalv1alpha1.PowerOff)
	if d := server.Status.PowerDelivery; d != nil && d.Want == want && !d.Graceful {
		return resendPower(server), nil // nothing when it was sent
	}
	return powerStep(server, want, fmt.Sprintf("power %s, as ServerMaintenance %s/%s asks", want, sm.Namespace, sm.Name)), nil
}

// endMaintenance returns the server to its claim (whose power is requested again) or to Initial.
func (r *Reconciler) endMaintenance(server *metalv1alpha1.Server) step {
	where := "no claim: re-discovering"
	if server.Spec.ServerClaimRef != nil {
		where = fmt.Sprintf("back to claim %s/%s", server.Spec.ServerClaimRef.Namespace, server.Spec.ServerClaimRef.Name)
	}
	return step{event: fsm.EventEndMaintenance, reason: metalv1alpha1.ReasonMaintenanceEnded, message: "maintenance ended; " + where,
		apply: func(s *metalv1alpha1.Server) {
			setInMaintenance(s, nil)
			// The claim's power is requested afresh once the server is Reserved again.
			forgetPower(s)
			if s.Spec.ServerClaimRef == nil {
				// Its claim went while it was in maintenance: the image it booted was that
				// claim's, and the next claim's must be booted, not taken as done.
				setProvisioned(s, "", "")
			}
		}}
}
