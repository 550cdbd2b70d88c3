package capi

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/eventrec"
)

// SetupWithManager registers both reconcilers with mgr.
func SetupWithManager(mgr ctrl.Manager) error {
	rec, err := eventrec.For(mgr)
	if err != nil {
		return err
	}
	machines := &MachineReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Events: rec.Recorder("ironfleetmachine-controller")}
	if err := machines.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the IronfleetMachine controller: %w", err)
	}
	clusters := &ClusterReconciler{Client: mgr.GetClient()}
	if err := clusters.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the IronfleetCluster controller: %w", err)
	}
	return nil
}

// SetupWithManager watches IronfleetMachines, their Machines and Clusters (bootstrap data,
// pausing, infrastructure provisioned) and their claims.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.IronfleetMachine{}).
		Named("ironfleetmachine").
		Watches(&clusterv1.Machine{}, handler.EnqueueRequestsFromMapFunc(util.MachineToInfrastructureMapFunc(infrav1.GroupVersion.WithKind("IronfleetMachine")))).
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.clusterToMachines)).
		Watches(&metalv1alpha1.ServerClaim{}, handler.EnqueueRequestsFromMapFunc(claimToMachine)).
		Complete(r)
}

// clusterToMachines wakes a cluster's IronfleetMachines (infrastructure provisioned, paused,
// unpaused).
func (r *MachineReconciler) clusterToMachines(ctx context.Context, o client.Object) []reconcile.Request {
	var list infrav1.IronfleetMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingLabels{clusterv1.ClusterNameLabel: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, m := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
	}
	return out
}

// claimToMachine wakes the IronfleetMachine a claim belongs to (its label).
func claimToMachine(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[infrav1.LabelMachine]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
}
