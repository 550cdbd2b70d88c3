package server

import (
	"fmt"

	"github.com/ironfleet/ironfleet/internal/controller/cached"

	"context"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// What wakes the Server reconciler: its watches, and the predicate that drops what changes
// nothing it acts on.

// SetupWithManager registers the reconciler.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.written = cached.NewWrites()
	if err := indexBySystemUUID(mgr); err != nil {
		return fmt.Errorf("indexing servers by system UUID: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("server").
		For(&metalv1alpha1.Server{}, builder.WithPredicates(serverChanged())).
		Watches(&metalv1alpha1.ServerBootConfiguration{}, handler.EnqueueRequestsFromMapFunc(bootConfigServer)).
		Watches(&metalv1alpha1.ServerMaintenance{}, handler.EnqueueRequestsFromMapFunc(maintenanceServer)).
		// A claim's new image re-provisions the server that holds it.
		Watches(&metalv1alpha1.ServerClaim{}, handler.EnqueueRequestsFromMapFunc(claimServer), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(r.Settings.ControllerOptions("server")).
		Complete(r)
}

// serverChanged lets through what the lifecycle reacts to (spec, metadata, a new probe report,
// a boot mode found: the BootMode condition), and not the status writes of the reconcilers
// themselves or the BMC's power polls.
func serverChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*metalv1alpha1.Server)
			now, ok2 := e.ObjectNew.(*metalv1alpha1.Server)
			if !ok1 || !ok2 {
				return true
			}
			return old.Generation != now.Generation ||
				!mapsEqual(old.Annotations, now.Annotations) ||
				old.Status.State == "" ||
				reportTime(old) != reportTime(now) || reportSource(old) != reportSource(now) ||
				wipeTime(old) != wipeTime(now) || hardwareRecord(old) != hardwareRecord(now) ||
				old.Status.BootMode != now.Status.BootMode || old.Status.BootModeSource != now.Status.BootModeSource
		},
	}
}

// reportSource is where the server's inventory came from: a probe's report that replaces the
// BMC's out-of-band inventory in the same second (stamps are whole seconds) is news too.
func reportSource(s *metalv1alpha1.Server) string {
	if s.Status.Inventory == nil {
		return ""
	}
	return s.Status.Inventory.Source
}

func reportTime(s *metalv1alpha1.Server) time.Time {
	if s.Status.Inventory == nil || s.Status.Inventory.ReportedAt == nil {
		return time.Time{}
	}
	return s.Status.Inventory.ReportedAt.Time
}

// hardwareRecord is the status of the server's HardwareRecord condition: a report that lists
// other hardware changes it without a new inventory.
func hardwareRecord(s *metalv1alpha1.Server) metav1.ConditionStatus {
	if c := apimeta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionHardwareRecord); c != nil {
		return c.Status
	}
	return ""
}

func wipeTime(s *metalv1alpha1.Server) time.Time {
	if s.Status.LastWipe == nil || s.Status.LastWipe.ReportedAt == nil {
		return time.Time{}
	}
	return s.Status.LastWipe.ReportedAt.Time
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// claimServer maps a claim to the Server it holds.
func claimServer(_ context.Context, o client.Object) []reconcile.Request {
	claim, ok := o.(*metalv1alpha1.ServerClaim)
	if !ok || claim.Status.ServerRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: claim.Status.ServerRef.Name}}}
}

// maintenanceServer maps a maintenance to its Server.
func maintenanceServer(_ context.Context, o client.Object) []reconcile.Request {
	sm, ok := o.(*metalv1alpha1.ServerMaintenance)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: sm.Spec.ServerRef.Name}}}
}

// bootConfigServer maps a boot configuration to its Server.
func bootConfigServer(_ context.Context, o client.Object) []reconcile.Request {
	sbc, ok := o.(*metalv1alpha1.ServerBootConfiguration)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: sbc.Spec.ServerRef.Name}}}
}
