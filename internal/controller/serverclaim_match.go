package controller

import (
	"k8s.io/apimachinery/pkg/labels"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// bindable is a server a claim may take: Available, unclaimed, not under maintenance.
func bindable(s *metalv1alpha1.Server) bool {
	return s.DeletionTimestamp.IsZero() &&
		s.Status.State == metalv1alpha1.ServerStateAvailable &&
		s.Spec.ServerClaimRef == nil &&
		s.Spec.MaintenanceRef == nil
}

// matches reports whether server satisfies what claim asks: its name, its labels, and its
// discovered hardware. A requirement the inventory cannot answer is not met.
func matches(claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (bool, error) {
	spec := &claim.Spec
	if spec.ServerRef != nil && spec.ServerRef.Name != server.Name {
		return false, nil
	}
	if spec.ServerSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.ServerSelector.LabelSelector())
		if err != nil {
			return false, err
		}
		if !sel.Matches(labels.Set(server.Labels)) {
			return false, nil
		}
	}
	if spec.MinCPUCores == nil && spec.MinMemory == nil && spec.MinTotalDisk == nil {
		return true, nil
	}
	inv := server.Status.Inventory
	if inv == nil {
		return false, nil
	}
	if spec.MinCPUCores != nil && inv.CPU.Cores < *spec.MinCPUCores {
		return false, nil
	}
	if spec.MinMemory != nil && (inv.Memory.Total == nil || inv.Memory.Total.Cmp(*spec.MinMemory) < 0) {
		return false, nil
	}
	if spec.MinTotalDisk != nil && (inv.TotalStorage == nil || inv.TotalStorage.Cmp(*spec.MinTotalDisk) < 0) {
		return false, nil
	}
	return true, nil
}
