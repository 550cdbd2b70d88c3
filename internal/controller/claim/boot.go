package claim

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// provision asks the boot service for the claim's image and hands the server its boot
// configuration and power.
func (r *Reconciler) provision(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) error {
	var bootRef *metalv1alpha1.ObjectReference
	if installsImages(r.BootOperator) {
		// The probe installs the image (the server's own boot): a configuration at the
		// claim's name is a stray (a create that landed late, or from before).
		if err := probeboot.DropStrayClaimBoot(ctx, r.Client, claim); err != nil {
			return err
		}
	} else if needsBootConfig(claim, r.BootOperator) {
		sbc, err := r.ensureBootConfig(ctx, claim, server)
		if err != nil {
			return err
		}
		bootRef = &metalv1alpha1.ObjectReference{Namespace: sbc.Namespace, Name: sbc.Name, UID: string(sbc.UID)}
	}
	power := cmp.Or(claim.Spec.Power, metalv1alpha1.PowerOn)
	if server.Spec.Power != power || !metalv1alpha1.SameReference(server.Spec.BootConfigurationRef, bootRef) {
		err := patchHeldServer(ctx, r.Client, server, claim, func(spec *metalv1alpha1.ServerSpec) {
			spec.Power, spec.BootConfigurationRef = power, bootRef
		})
		if err != nil {
			return fmt.Errorf("handing server %s its boot configuration and power: %w", server.Name, err)
		}
	}
	switch {
	case server.Status.State != metalv1alpha1.ServerStateReserved:
		setReady(claim, metalv1alpha1.ReasonWaitingForServer,
			waitingForServerMessage(server))
	case claim.Spec.Image != "" && installsImages(r.BootOperator):
		showInstall(claim, server, power)
	case meta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionProvisioned) || claim.Spec.Image == "":
		setReady(claim, metalv1alpha1.ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim, power %s", server.Name, power))
	default:
		setReady(claim, metalv1alpha1.ReasonProvisioning,
			"waiting for the boot service to serve "+claim.Spec.Image)
	}
	return nil
}

// waitingForServerMessage tells a claim's owner why its server is not Reserved for it yet.
func waitingForServerMessage(server *metalv1alpha1.Server) string {
	switch {
	case server.Status.State == metalv1alpha1.ServerStateMaintenance, server.Spec.MaintenanceRef != nil:
		msg := fmt.Sprintf("server %s is in maintenance", server.Name)
		if ref := server.Spec.MaintenanceRef; ref != nil {
			msg += fmt.Sprintf(" (ServerMaintenance %s/%s)", ref.Namespace, ref.Name)
		}
		return msg + "; it comes back to this claim when an admin ends the maintenance"
	case server.Status.State == metalv1alpha1.ServerStateAvailable:
		return fmt.Sprintf("server %s is being reserved for this claim", server.Name)
	}
	return fmt.Sprintf("server %s is %s", server.Name, server.Status.State)
}

// installsImages says whether claims' images are installed to disk by Ironfleet's probe: with
// Ironfleet's boot operator. Another boot operator is handed a boot configuration to serve.
func installsImages(bootOperator string) bool {
	return bootOperator == "" || bootOperator == metalv1alpha1.BootOperatorIronfleet
}

// needsBootConfig says whether the claim's image is served by another boot operator, from a
// boot configuration the claim makes for its server.
func needsBootConfig(claim *metalv1alpha1.ServerClaim, bootOperator string) bool {
	return claim.Spec.Image != "" && !installsImages(bootOperator)
}

// showInstall mirrors the server's install onto the claim: its Provisioned condition, its
// progress, and Ready once the image is installed.
func showInstall(claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server, power metalv1alpha1.Power) {
	prov := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionProvisioned)
	if prov == nil {
		prov = &metav1.Condition{Status: metav1.ConditionFalse, Reason: metalv1alpha1.ReasonInstalling, Message: "waiting for the server to start installing " + claim.Spec.Image}
	}
	setProvisioned(claim, prov)
	claim.Status.InstallProgress = ""
	if prov.Status == metav1.ConditionTrue {
		if last := server.Status.LastInstall; last != nil && last.Bytes > 0 {
			claim.Status.InstallProgress = metalv1alpha1.HumanBytes(last.Bytes) + " written"
		}
		setReady(claim, metalv1alpha1.ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim with %s installed, power %s", server.Name, claim.Spec.Image, power))
		return
	}
	if probe := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionProbe); probe != nil && probe.Reason == metalv1alpha1.ReasonInstalling && prov.Reason == metalv1alpha1.ReasonInstalling {
		claim.Status.InstallProgress = probe.Message
	}
	setReady(claim, prov.Reason, prov.Message)
}

func sameRef(a, b *metalv1alpha1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ensureBootConfig gets or makes the claim's boot configuration for server
// (probeboot.EnsureClaimBoot), and says so in an event when it deleted one made for a server
// the claim does not hold.
func (r *Reconciler) ensureBootConfig(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	sbc, err := probeboot.EnsureClaimBoot(ctx, r.Client, r.BootOperator, claim, server)
	var stale *probeboot.StaleClaimBootError
	if errors.As(err, &stale) {
		r.Events.Eventf(claim, stale.Deleted, corev1.EventTypeWarning, metalv1alpha1.ReasonStaleBootConfiguration, "Delete",
			"deleted boot configuration %s, made for server %s, which the claim does not hold", stale.Deleted.Name, stale.Deleted.Spec.ServerRef.Name)
	}
	return sbc, err
}

// release gives the server back (it goes to Cleanup) and lets the claim go: its finalizer is
// removed last.
func (r *Reconciler) release(ctx context.Context, claim *metalv1alpha1.ServerClaim) error {
	// The image's boot configuration goes before the server does: a released server is
	// network-booted for its wipe, and a boot service still holding this image for it would
	// serve that instead (a manager that died between the two steps left exactly that).
	if installsImages(r.BootOperator) {
		// Claims make none when the probe installs their images: only a stray can be there,
		// and the cache shows it (a release costs no request for a configuration never made).
		if err := probeboot.DropStrayClaimBoot(ctx, r.Client, claim); err != nil {
			return err
		}
	} else {
		// Made by this claim, perhaps so lately that the cache has not seen it: deleted by name.
		if err := probeboot.DeleteClaimBoot(ctx, r.Client, claim); err != nil {
			return err
		}
	}
	server, err := r.boundServer(ctx, claim)
	if err != nil {
		return err
	}
	if server != nil {
		err := patchHeldServer(ctx, r.Client, server, claim, func(spec *metalv1alpha1.ServerSpec) {
			spec.ServerClaimRef, spec.BootConfigurationRef, spec.Power = nil, nil, ""
		})
		if err != nil {
			return fmt.Errorf("releasing server %s: %w", server.Name, err)
		}
		r.Events.Eventf(claim, server, corev1.EventTypeNormal, metalv1alpha1.ClaimReasonReleasing, "Release", "released server %s for cleanup", server.Name)
	}
	controllerutil.RemoveFinalizer(claim, metalv1alpha1.ClaimFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, claim))
}
