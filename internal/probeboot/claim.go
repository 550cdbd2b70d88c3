package probeboot

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// A claim's boot configuration: with another boot operator than Ironfleet's, a claim's image is
// served by that operator from a boot configuration at the claim's name and namespace, which
// the claim owns (its controller reference) and which names the server the claim holds.

// EnsureClaimBoot gets or creates the boot configuration that boots claim's image on server,
// labelled for operator. One at the claim's name that it may not use (usableClaimBoot) is an
// error: a *StaleClaimBootError when it was deleted for being another server's.
func EnsureClaimBoot(ctx context.Context, c client.Client, operator string, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	key := client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := c.Get(ctx, key, &sbc)
	if err == nil {
		return usableClaimBoot(ctx, c, &sbc, claim, server)
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, Labels: labels(server.Name, operator)},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             claim.Spec.Image,
			IgnitionSecretRef: claim.Spec.IgnitionSecretRef,
			Purpose:           metalv1alpha1.BootPurposeProvisioning,
		},
	}
	if err := controllerutil.SetControllerReference(claim, &sbc, c.Scheme()); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &sbc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			if err := c.Get(ctx, key, &sbc); err != nil {
				return nil, err
			}
			return usableClaimBoot(ctx, c, &sbc, claim, server)
		}
		return nil, fmt.Errorf("creating boot configuration %s: %w", key, err)
	}
	return &sbc, nil
}

// StaleClaimBootError says that the boot configuration at a claim's name was made for a server
// the claim does not hold, and was deleted: the claim is tried again.
type StaleClaimBootError struct {
	// Deleted is the boot configuration as it was read; Server is the one the claim holds.
	Deleted *metalv1alpha1.ServerBootConfiguration
	Server  string
}

func (e *StaleClaimBootError) Error() string {
	return fmt.Sprintf("boot configuration %s/%s was for server %s, which the claim does not hold: deleted, to make one for server %s",
		e.Deleted.Namespace, e.Deleted.Name, e.Deleted.Spec.ServerRef.Name, e.Server)
}

// usableClaimBoot passes the boot configuration at the claim's name when it is this claim's and
// for this server. One of an earlier claim of the name is refused (DropOrphanClaimBoot deletes
// it); one this claim made for a server it does not hold now (it lost that server, or the create
// landed after it had) is deleted, for it would boot the claim's image into that server. Either
// way the claim is tried again.
func usableClaimBoot(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	if !metav1.IsControlledBy(sbc, claim) {
		return nil, fmt.Errorf("boot configuration %s/%s belongs to an earlier claim of this name; waiting until it is deleted", sbc.Namespace, sbc.Name)
	}
	if sbc.Spec.ServerRef.Name == server.Name {
		return sbc, nil
	}
	if err := deleteClaimBoot(ctx, c, sbc); err != nil {
		return nil, err
	}
	return nil, &StaleClaimBootError{Deleted: sbc, Server: server.Name}
}

// DropOrphanClaimBoot deletes the boot configuration at a claim's name when the claim that
// made it is gone: live is the claim as cached, nil when the cache has none.
//
// The claim's release deletes it before the claim goes, but a create sent by a manager that
// was then killed can land after its successor released the claim. Garbage collection removes
// such a configuration in time, if the cluster runs it; until then the boot service would serve
// the old tenant's image to whatever network-boots that server next — the wipe of its next
// release, or the next tenant. The owner is looked up in api before anything is deleted: the
// cache may not have seen a claim created a moment ago.
func DropOrphanClaimBoot(ctx context.Context, c client.Client, api client.Reader, key client.ObjectKey, live *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := c.Get(ctx, key, &sbc); err != nil {
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
	err := api.Get(ctx, key, &claim)
	if err == nil && claim.UID == owner.UID {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := deleteClaimBoot(ctx, c, &sbc); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("deleted the boot configuration of a claim that is gone", "bootConfiguration", key.String(), "server", sbc.Spec.ServerRef.Name, "claimUID", owner.UID)
	return nil
}

// DropStrayClaimBoot deletes the boot configuration of a claim that holds no server (it lost
// the server the configuration was made for, or a killed manager's create landed late), or
// whose image the probe installs (a claim makes none then): there is nothing it may boot. The
// cache shows it: a claim without one costs no request.
func DropStrayClaimBoot(ctx context.Context, c client.Client, claim *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := c.Get(ctx, client.ObjectKeyFromObject(claim), &sbc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&sbc, claim) || !sbc.DeletionTimestamp.IsZero() {
		return nil
	}
	return deleteClaimBoot(ctx, c, &sbc)
}

// DeleteClaimBoot deletes the boot configuration at the claim's name, by name: made by this
// claim, perhaps so lately that the cache has not seen it.
func DeleteClaimBoot(ctx context.Context, c client.Client, claim *metalv1alpha1.ServerClaim) error {
	sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
	if err := c.Delete(ctx, sbc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting boot configuration %s/%s: %w", sbc.Namespace, sbc.Name, err)
	}
	return nil
}

// deleteClaimBoot deletes this boot configuration: not one made in its place since it was read.
func deleteClaimBoot(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration) error {
	uid := sbc.UID
	err := c.Delete(ctx, sbc, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("deleting boot configuration %s/%s (server %s): %w", sbc.Namespace, sbc.Name, sbc.Spec.ServerRef.Name, err)
}
