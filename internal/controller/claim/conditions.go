package claim

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// The ServerClaim's conditions. Each is set by one function below and nowhere else
// (test/layout TestEachConditionIsSetInOnePlace): a handler says what happened (a reason and a
// message for people), and the condition's function decides from that whether it holds.

// setBound says whether a server holds the claim: True once one does (Bound); False while none
// matches, a bind lost a race, the server was lost, or the claim is being released.
func setBound(claim *metalv1alpha1.ServerClaim, reason, message string) {
	status.SetCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionBound,
		status.BoolStatus(reason == metalv1alpha1.ClaimReasonBound), reason, message)
}

// setReady says whether the claim's server is ready for its owner: True once it is Reserved
// for the claim with its image installed (or no image asked for) and its power as asked
// (ServerReady); False with what it waits for.
func setReady(claim *metalv1alpha1.ServerClaim, reason, message string) {
	status.SetCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady,
		status.BoolStatus(reason == metalv1alpha1.ReasonServerReady), reason, message)
}

// setProvisioned mirrors the server's install of the claim's image (the server's Provisioned
// condition); none when the claim has no server.
func setProvisioned(claim *metalv1alpha1.ServerClaim, server *metav1.Condition) {
	if server == nil {
		meta.RemoveStatusCondition(&claim.Status.Conditions, metalv1alpha1.ConditionProvisioned)
		return
	}
	status.SetCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionProvisioned, server.Status, server.Reason, server.Message)
}
