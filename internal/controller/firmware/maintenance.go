package firmware

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/taints"
)

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
	switch s.Kind {
	case metalv1alpha1.FirmwareDifferenceBIOSSetting:
		return fmt.Sprintf("BIOS %s=%s", s.Name, s.To)
	case metalv1alpha1.FirmwareDifferenceBMCSetting:
		return fmt.Sprintf("BMC %s=%s", s.Name, s.To)
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
	_, err := taints.Set(ctx, r.Client, server, metalv1alpha1.Taint{Key: metalv1alpha1.TaintFirmwareUpdate, Value: "updating",
		Effect: metalv1alpha1.TaintNoClaim, TimeAdded: &now})
	return err
}

// untaint removes the firmware-update taint, and only it.
func (r *Reconciler) untaint(ctx context.Context, server *metalv1alpha1.Server) error {
	_, err := taints.Remove(ctx, r.Client, server, metalv1alpha1.TaintFirmwareUpdate)
	return err
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
