// Package capi is Ironfleet's Cluster API infrastructure provider: the IronfleetMachine and
// IronfleetCluster reconcilers (cmd/capi-provider). A Machine's infrastructure is a ServerClaim
// named after its IronfleetMachine, its bootstrap data the claim's ignition; the operator binds,
// installs, and on release wipes and pools the server. The provider keeps no state but its
// objects: what a claim belongs to is in labels, so clusterctl move and restarts lose nothing.
// docs/capi.md is the user's guide.
package capi

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// bootstrapSecretSuffix names a machine's copy of its bootstrap data, in the claim's form.
const bootstrapSecretSuffix = "-bootstrap-data"

// setCondition sets a condition stamped with the generation observed.
func setCondition(conds *[]metav1.Condition, generation int64, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(conds, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}
