package claim

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// bindable is a server a claim may take: Available, unclaimed, not under maintenance. Its
// NoClaim taints are the claim's requirement (requirements: tolerated by spec.tolerations).
func bindable(s *metalv1alpha1.Server) bool {
	return s.DeletionTimestamp.IsZero() &&
		s.Status.State == metalv1alpha1.ServerStateAvailable &&
		s.Spec.ServerClaimRef == nil &&
		s.Spec.MaintenanceRef == nil
}

// requirement is one thing a claim asks of a server: what it is, in the claim's words, and
// whether a server meets it.
type requirement struct {
	what string
	met  func(*metalv1alpha1.Server) bool
	// quiet: named among what a claim asks only when an Available server does not meet it.
	quiet bool
}

// requirements are what claim asks of a server: its name, its labels, its discovered hardware
// and the mode its firmware boots in. A requirement the inventory cannot answer is not met.
func requirements(claim *metalv1alpha1.ServerClaim) ([]requirement, error) {
	spec := &claim.Spec
	var reqs []requirement
	if ref := spec.ServerRef; ref != nil {
		reqs = append(reqs, requirement{what: "is server " + ref.Name + " (spec.serverRef)", met: func(s *metalv1alpha1.Server) bool { return s.Name == ref.Name }})
	}
	if spec.ServerSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.ServerSelector.LabelSelector())
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, requirement{what: "has labels " + sel.String() + " (spec.serverSelector)", met: func(s *metalv1alpha1.Server) bool { return sel.Matches(labels.Set(s.Labels)) }})
	}
	if n := spec.MinCPUCores; n != nil {
		reqs = append(reqs, requirement{what: fmt.Sprintf("has %d CPU cores or more (spec.minCPUCores)", *n), met: func(s *metalv1alpha1.Server) bool {
			return s.Status.Inventory != nil && s.Status.Inventory.CPU.Cores >= *n
		}})
	}
	if q := spec.MinMemory; q != nil {
		reqs = append(reqs, requirement{what: "has " + q.String() + " of memory or more (spec.minMemory)", met: func(s *metalv1alpha1.Server) bool {
			inv := s.Status.Inventory
			return inv != nil && inv.Memory.Total != nil && inv.Memory.Total.Cmp(*q) >= 0
		}})
	}
	if q := spec.MinTotalDisk; q != nil {
		reqs = append(reqs, requirement{what: "has " + q.String() + " of disk or more (spec.minTotalDisk)", met: func(s *metalv1alpha1.Server) bool {
			inv := s.Status.Inventory
			return inv != nil && inv.TotalStorage != nil && inv.TotalStorage.Cmp(*q) >= 0
		}})
	}
	if mode := spec.BootMode; mode != "" {
		reqs = append(reqs, requirement{what: "boots " + string(mode) + " (spec.bootMode)", met: func(s *metalv1alpha1.Server) bool { return bootsIn(s, mode) }})
	}
	tolerations := spec.Tolerations
	reqs = append(reqs, requirement{what: "is free of NoClaim taints the claim does not tolerate (spec.tolerations)", quiet: true, met: func(s *metalv1alpha1.Server) bool {
		return !metalv1alpha1.Untolerated(s.Spec.Taints, tolerations, metalv1alpha1.TaintNoClaim)
	}})
	return reqs, nil
}

// bootsIn says whether a server's firmware was found booting mode and the server is not to be
// switched to another: its spec.bootMode is empty or mode too. A server whose BootMode
// condition is False (found in another mode than its spec.bootMode) is never one, whichever
// mode is asked for: it is judged by the fields the condition is computed from, which the
// cache shows as they are, not by the condition, which the next reconcile writes.
func bootsIn(s *metalv1alpha1.Server, mode metalv1alpha1.BootMode) bool {
	return s.Status.BootMode == mode && (s.Spec.BootMode == "" || s.Spec.BootMode == mode)
}

// matches reports whether server satisfies every requirement of claim.
func matches(claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (bool, error) {
	reqs, err := requirements(claim)
	if err != nil {
		return false, err
	}
	return meetsAll(reqs, server), nil
}

func meetsAll(reqs []requirement, server *metalv1alpha1.Server) bool {
	for _, req := range reqs {
		if !req.met(server) {
			return false
		}
	}
	return true
}

// noMatchMessage says why none of the bindable servers matches the claim, in words its owner can
// act on: the requirements no Available server meets, or that each is met by some but all by
// none. It names no counts, so it changes (and costs a status write) only when what it says
// does.
func noMatchMessage(reqs []requirement, pool []*metalv1alpha1.Server) string {
	const then = "; the claim binds as soon as one does"
	if len(pool) == 0 {
		return "no server is Available; the claim binds as soon as one is"
	}
	var unmet, all []string
	for _, req := range reqs {
		met, metByAll := false, true
		for _, s := range pool {
			if req.met(s) {
				met = true
			} else {
				metByAll = false
			}
		}
		if !req.quiet || !metByAll {
			all = append(all, req.what)
		}
		if !met {
			unmet = append(unmet, req.what)
		}
	}
	if len(unmet) > 0 {
		return "no Available server " + strings.Join(unmet, ", and none ") + then
	}
	return "each requirement is met by an Available server, but none meets them all: it " + strings.Join(all, ", ") + then
}
