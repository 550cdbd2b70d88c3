// Package status is how every reconciler writes its object's status: conditions stamped with
// the generation observed, and one patch at the end of a reconcile (none when nothing changed),
// answered with the object's metadata only.
package status

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/api/meta"
	v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SetCondition sets a condition on a status's conditions, stamped with the generation observed.
func SetCondition(conds *[]v1.Condition, generation int64, condType string, status v1.ConditionStatus, reason, message string) {
	metav1.SetStatusCondition(conds, v1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: generation,
	})
}

func BoolStatus(ok bool) v1.ConditionStatus {
	if ok {
		return v1.ConditionTrue
	}
	return v1.ConditionFalse
}

// Finish patches obj's status against original, once, at the end of a reconcile, and
// joins a failed patch to the reconcile's own error. A vanished object is not an error. A
// reconcile that changed nothing writes nothing: a fleet at rest costs the apiserver no writes.
func Finish(ctx context.Context, c client.Client, obj, original client.Object, result ctrl.Result, err error) (ctrl.Result, error) {
	if equality.Semantic.DeepEqual(obj, original) {
		return result, err
	}
	if patchErr := Patch(ctx, c, obj, client.MergeFrom(original)); patchErr != nil && !apierrors.IsNotFound(patchErr) {
		return ctrl.Result{}, errors.Join(err, fmt.Errorf("patching %s status: %w", obj.GetName(), patchErr))
	}
	return result, err
}
