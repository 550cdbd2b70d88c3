package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// provision asks the boot service for the claim's image and hands the server its boot
// configuration and power.
func (r *ServerClaimReconciler) provision(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) error {
	var bootRef *metalv1alpha1.ObjectReference
	if installsImages(r.BootOperator) {
		// The probe installs the image (the server's own boot): a configuration at the
		// claim's name is a stray (a create that landed late, or from before).
		if err := r.dropStrayBootConfig(ctx, claim); err != nil {
			return err
		}
	} else if needsBootConfig(claim, r.BootOperator) {
		sbc, err := r.ensureBootConfig(ctx, claim, server)
		if err != nil {
			return err
		}
		bootRef = &metalv1alpha1.ObjectReference{Namespace: sbc.Namespace, Name: sbc.Name, UID: string(sbc.UID)}
	}
	power := orDefault(claim.Spec.Power, metalv1alpha1.PowerOn)
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
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, metalv1alpha1.ReasonWaitingForServer,
			waitingForServerMessage(server))
	case claim.Spec.Image != "" && installsImages(r.BootOperator):
		showInstall(claim, server, power)
	case meta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionProvisioned) || claim.Spec.Image == "":
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, metalv1alpha1.ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim, power %s", server.Name, power))
	default:
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, metalv1alpha1.ReasonProvisioning,
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
	setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionProvisioned, prov.Status, prov.Reason, prov.Message)
	claim.Status.InstallProgress = ""
	if prov.Status == metav1.ConditionTrue {
		if last := server.Status.LastInstall; last != nil && last.Bytes > 0 {
			claim.Status.InstallProgress = metalv1alpha1.HumanBytes(last.Bytes) + " written"
		}
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, metalv1alpha1.ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim with %s installed, power %s", server.Name, claim.Spec.Image, power))
		return
	}
	if probe := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionProbe); probe != nil && probe.Reason == metalv1alpha1.ReasonInstalling && prov.Reason == metalv1alpha1.ReasonInstalling {
		claim.Status.InstallProgress = probe.Message
	}
	setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, prov.Reason, prov.Message)
}

func (r *ServerClaimReconciler) ensureBootConfig(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	key := client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := r.Client.Get(ctx, key, &sbc)
	if err == nil {
		return r.usableBootConfig(ctx, &sbc, claim, server)
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, Labels: bootConfigLabels(server, r.BootOperator)},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             claim.Spec.Image,
			IgnitionSecretRef: claim.Spec.IgnitionSecretRef,
			Purpose:           metalv1alpha1.BootPurposeProvisioning,
		},
	}
	if err := controllerutil.SetControllerReference(claim, &sbc, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, &sbc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			if err := r.Client.Get(ctx, key, &sbc); err != nil {
				return nil, err
			}
			return r.usableBootConfig(ctx, &sbc, claim, server)
		}
		return nil, fmt.Errorf("creating boot configuration %s: %w", key, err)
	}
	return &sbc, nil
}

// usableBootConfig passes the boot configuration at the claim's name when it is this claim's and
// for this server. One of an earlier claim of the name is refused (dropOrphanBootConfig deletes
// it); one this claim made for a server it does not hold now (it lost that server, or the create
// landed after it had) is deleted, for it would boot the claim's image into that server. Either
// way the claim is tried again.
func (r *ServerClaimReconciler) usableBootConfig(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	if !metav1.IsControlledBy(sbc, claim) {
		return nil, fmt.Errorf("boot configuration %s/%s belongs to an earlier claim of this name; waiting until it is deleted", sbc.Namespace, sbc.Name)
	}
	if sbc.Spec.ServerRef.Name == server.Name {
		return sbc, nil
	}
	if err := deleteBootConfig(ctx, r.Client, sbc); err != nil {
		return nil, err
	}
	r.Events.Eventf(claim, sbc, corev1.EventTypeWarning, metalv1alpha1.ReasonStaleBootConfiguration, "Delete",
		"deleted boot configuration %s, made for server %s, which the claim does not hold", sbc.Name, sbc.Spec.ServerRef.Name)
	return nil, fmt.Errorf("boot configuration %s/%s was for server %s, which the claim does not hold: deleted, to make one for server %s",
		sbc.Namespace, sbc.Name, sbc.Spec.ServerRef.Name, server.Name)
}

// dropOrphanBootConfig deletes the boot configuration at a claim's name when the claim that
// made it is gone: live is the claim as cached, nil when the cache has none.
//
// release deletes it before the claim goes, but a create sent by a manager that was then killed
// can land after its successor released the claim. Garbage collection removes such a
// configuration in time, if the cluster runs it; until then the boot service would serve the
// old tenant's image to whatever network-boots that server next — the wipe of its next
// release, or the next tenant. The owner is looked up in the API before anything is deleted:
// the cache may not have seen a claim created a moment ago.
func (r *ServerClaimReconciler) dropOrphanBootConfig(ctx context.Context, key client.ObjectKey, live *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := r.Client.Get(ctx, key, &sbc); err != nil {
		return client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(&sbc)
	if owner == nil || owner.Kind != "ServerClaim" || owner.APIVersion != metalv1alpha1.GroupVersion.String() || !sbc.DeletionTimestamp.IsZero() {
		return nil
	}
	if live != nil && live.UID == owner.UID {
		return nil
	}
	var claim metalv1alpha1.ServerClaim
	err := r.APIReader.Get(ctx, key, &claim)
	if err == nil && claim.UID == owner.UID {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := deleteBootConfig(ctx, r.Client, &sbc); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("deleted the boot configuration of a claim that is gone", "bootConfiguration", key.String(), "server", sbc.Spec.ServerRef.Name, "claimUID", owner.UID)
	return nil
}

// dropStrayBootConfig deletes the boot configuration of a claim that holds no server (it lost
// the server the configuration was made for, or a killed manager's create landed late): there is
// nothing it may boot.
func (r *ServerClaimReconciler) dropStrayBootConfig(ctx context.Context, claim *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), &sbc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&sbc, claim) || !sbc.DeletionTimestamp.IsZero() {
		return nil
	}
	return deleteBootConfig(ctx, r.Client, &sbc)
}

// deleteBootConfig deletes this boot configuration: not one made in its place since it was read.
func deleteBootConfig(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration) error {
	uid := sbc.UID
	err := c.Delete(ctx, sbc, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("deleting boot configuration %s/%s (server %s): %w", sbc.Namespace, sbc.Name, sbc.Spec.ServerRef.Name, err)
}

// release gives the server back (it goes to Cleanup) and lets the claim go: its finalizer is
// removed last.
func (r *ServerClaimReconciler) release(ctx context.Context, claim *metalv1alpha1.ServerClaim) error {
	// The image's boot configuration goes before the server does: a released server is
	// network-booted for its wipe, and a boot service still holding this image for it would
	// serve that instead (a manager that died between the two steps left exactly that).
	if installsImages(r.BootOperator) {
		// Claims make none when the probe installs their images: only a stray can be there,
		// and the cache shows it (a release costs no request for a configuration never made).
		if err := r.dropStrayBootConfig(ctx, claim); err != nil {
			return err
		}
	} else {
		// Made by this claim, perhaps so lately that the cache has not seen it: deleted by name.
		sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
		if err := r.Client.Delete(ctx, sbc); client.IgnoreNotFound(err) != nil {
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
