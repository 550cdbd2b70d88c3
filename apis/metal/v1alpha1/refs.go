package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Names says whether the reference names obj: its namespace, name and UID. A reference that
// pinned no UID names nothing (the API refuses such a claim reference), and an object deleted
// and made again under the same name is not the one a reference names.
func (r *ObjectReference) Names(obj metav1.Object) bool {
	return r != nil && r.UID != "" && r.UID == string(obj.GetUID()) &&
		r.Namespace == obj.GetNamespace() && r.Name == obj.GetName()
}

// SameReference says whether two references are equal, two nil ones included.
func SameReference(a, b *ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// HeldByClaim says whether the server is bound to this very claim: spec.serverClaimRef names it,
// UID and all, as the claim controller binds.
func (s *Server) HeldByClaim(claim *ServerClaim) bool {
	return s.Spec.ServerClaimRef.Names(claim)
}

// HeldByMaintenance says whether the server is held by this ServerMaintenance.
func (s *Server) HeldByMaintenance(sm *ServerMaintenance) bool {
	ref := s.Spec.MaintenanceRef
	return ref != nil && ref.Namespace == sm.Namespace && ref.Name == sm.Name
}

// BMCName is the name of the server's BMC, or "" when it has none.
func (s *Server) BMCName() string {
	if s.Spec.BMCRef == nil {
		return ""
	}
	return s.Spec.BMCRef.Name
}
