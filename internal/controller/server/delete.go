package server

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// mayHoldTenantData says whether a server's disks may hold data of a tenant that no verified
// wipe has removed: it is (or was just) claimed, being cleaned, or its last wipe is not
// verified (released, taken from its tenant into maintenance, or a wipe that failed).
func mayHoldTenantData(s *metalv1alpha1.Server) bool {
	if s.Spec.ServerClaimRef != nil {
		return true
	}
	switch s.Status.State {
	case metalv1alpha1.ServerStateReserved, metalv1alpha1.ServerStateCleanup:
		return true
	}
	c := meta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionCleaned)
	return c != nil && c.Status == metav1.ConditionFalse
}

// deleting decides about a deleted Server: done when it may go (its finalizer is removed, with
// its probe boots), or not yet, and its lifecycle goes on until the machine is wiped.
func (r *Reconciler) deleting(ctx context.Context, server *metalv1alpha1.Server) (done bool, err error) {
	if !controllerutil.ContainsFinalizer(server, metalv1alpha1.ServerFinalizer) {
		return true, nil
	}
	dirty := mayHoldTenantData(server)
	forced := server.Annotations[metalv1alpha1.AnnotationDeleteWithoutWipe] == "true"
	if dirty && !forced {
		// Said once per deletion (and once more by a restarted manager), not at every look.
		if _, told := r.toldDeleting.LoadOrStore(server.UID, true); !told {
			r.Events.Eventf(server, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonWipeBeforeDeletion, "Delete",
				"deleted while it may hold a tenant's data (%s): it goes once it is wiped; %s=true lets it go at once", state(server), metalv1alpha1.AnnotationDeleteWithoutWipe)
		}
		return false, nil
	}
	if dirty {
		r.Events.Eventf(server, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonDeletedWithoutWipe, "Delete",
			"deleted without a wipe, as %s says: the machine may still hold a tenant's data (%s)", metalv1alpha1.AnnotationDeleteWithoutWipe, state(server))
	}
	if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeDiscovery,
		metalv1alpha1.BootPurposeCleanup, metalv1alpha1.BootPurposeProvisioning); err != nil {
		return false, err
	}
	r.ejectBeforeGoing(ctx, server)
	before := server.DeepCopy()
	controllerutil.RemoveFinalizer(server, metalv1alpha1.ServerFinalizer)
	if err := r.Client.Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("letting deleted server %s go: %w", server.Name, err)
	}
	r.toldDeleting.Delete(server.UID)
	return true, nil
}

// ensureFinalizer gives a Server that has none (made before Ironfleet added it, or by hand) its
// finalizer, moving server on to the version that wrote.
func (r *Reconciler) ensureFinalizer(ctx context.Context, server *metalv1alpha1.Server) error {
	if controllerutil.ContainsFinalizer(server, metalv1alpha1.ServerFinalizer) {
		return nil
	}
	before := server.DeepCopy()
	controllerutil.AddFinalizer(server, metalv1alpha1.ServerFinalizer)
	if err := r.Client.Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("adding the finalizer of server %s: %w", server.Name, err)
	}
	return nil
}

func state(s *metalv1alpha1.Server) string {
	st := string(s.Status.State)
	if s.Spec.ServerClaimRef != nil {
		st += fmt.Sprintf(", claimed by %s/%s", s.Spec.ServerClaimRef.Namespace, s.Spec.ServerClaimRef.Name)
	}
	if c := meta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionCleaned); c != nil && c.Status == metav1.ConditionFalse {
		st += "; " + c.Message
	}
	return st
}
