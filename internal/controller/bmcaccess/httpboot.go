package bmcaccess

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// SetHTTPBoot keeps a BMC's HTTPBoot condition, the one place it is written: none on a BMC that
// does not boot by UefiHttp; else True (HTTPBootURI) when it can boot its servers from a URI, or
// False (HTTPBootURIUnsupported) when it cannot, and its servers boot by PXE, with message. The
// BMC reconciler sets it when the BMC (re)connects; the Server reconciler turns it False when
// the BMC refuses a boot's URI.
func SetHTTPBoot(b *metalv1alpha1.BMC, can bool, message string) {
	if b.Spec.BootMethod != metalv1alpha1.BootMethodUefiHttp {
		meta.RemoveStatusCondition(&b.Status.Conditions, metalv1alpha1.ConditionHTTPBoot)
		return
	}
	status, reason := metav1.ConditionTrue, metalv1alpha1.ReasonHTTPBootURI
	if !can {
		status, reason = metav1.ConditionFalse, metalv1alpha1.ReasonHTTPBootURIUnsupported
	}
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionHTTPBoot, Status: status,
		Reason: reason, Message: message, ObservedGeneration: b.Generation})
}
