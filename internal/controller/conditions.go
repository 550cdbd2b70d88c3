// Package controller holds one reconciler per kind. Each observes, decides, and patches its
// object's status once per reconcile; conditions carry machine-readable reasons and messages
// for people. No reconciler ever logs, records or writes a credential.
package controller

import (
	metav1 "k8s.io/apimachinery/pkg/api/meta"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets a condition on a status's conditions, stamped with the generation observed.
func setCondition(conds *[]v1.Condition, generation int64, condType string, status v1.ConditionStatus, reason, message string) {
	metav1.SetStatusCondition(conds, v1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

func boolStatus(ok bool) v1.ConditionStatus {
	if ok {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}
