package server

import (
	"cmp"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// showReady writes what a reconcile that moved no state found into Ready: its error, or what
// a state on its way waits for. A server at rest is Ready again once a reconcile succeeds: an
// error it showed is over (the Warning events keep it).
func showReady(server *metalv1alpha1.Server, st step, err error) {
	switch {
	case err != nil:
		setReady(server, true, reasonOf(err), err.Error())
	case st.event != "":
	case !settled(server.Status.State):
		if st.reason != "" {
			setReady(server, false, st.reason, st.message)
		}
	case !apimeta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionReady):
		setReady(server, false, cmp.Or(server.Status.LastTransitionReason, string(server.Status.State)), restingMessage(server))
	}
}

// restingMessage says what holds a server at rest.
func restingMessage(server *metalv1alpha1.Server) string {
	switch ref := server.Spec.ServerClaimRef; {
	case server.Status.State == metalv1alpha1.ServerStateMaintenance && server.Spec.MaintenanceRef != nil:
		return fmt.Sprintf("held by ServerMaintenance %s/%s", server.Spec.MaintenanceRef.Namespace, server.Spec.MaintenanceRef.Name)
	case server.Status.State == metalv1alpha1.ServerStateReserved && ref != nil:
		return fmt.Sprintf("held by claim %s/%s", ref.Namespace, ref.Name)
	}
	if server.Status.State == metalv1alpha1.ServerStateAvailable {
		return "in the pool"
	}
	return string(server.Status.State)
}
