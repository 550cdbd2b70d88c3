package server

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// An error a server at rest showed in Ready is over once a reconcile succeeds: it was left
// there, Ready=False ReconcileError on a Reserved server, for good.
func TestAServerAtRestIsReadyAgainAfterAnError(t *testing.T) {
	server := &m.Server{
		Spec:   m.ServerSpec{ServerClaimRef: &m.ObjectReference{Namespace: "tenant", Name: "web"}},
		Status: m.ServerStatus{State: m.ServerStateReserved, LastTransitionReason: m.ReasonClaimed},
	}
	ready := func() *metav1.Condition { return meta.FindStatusCondition(server.Status.Conditions, m.ConditionReady) }

	showReady(server, step{}, errors.New("listing boot configurations: connection refused"))
	assert.Equal(t, metav1.ConditionFalse, ready().Status)
	assert.Equal(t, "ReconcileError", ready().Reason)

	showReady(server, step{reason: m.ReasonWaitingForClaim, message: "not written at rest"}, nil)
	assert.Equal(t, metav1.ConditionTrue, ready().Status, "the next reconcile that succeeds clears it")
	assert.Equal(t, m.ReasonClaimed, ready().Reason)
	assert.Equal(t, "held by claim tenant/web", ready().Message)

	// A server on its way shows what it waits for; a Ready it has is left alone at rest.
	server.Status.State = m.ServerStateInitial
	showReady(server, step{reason: m.ReasonDiscoveryBackoff, message: "retrying in 5s"}, nil)
	assert.Equal(t, m.ReasonDiscoveryBackoff, ready().Reason)
	server.Status.State = m.ServerStateAvailable
	server.Status.Conditions = []metav1.Condition{{Type: m.ConditionReady, Status: metav1.ConditionTrue, Reason: m.ReasonWipeVerified, Message: "2 disks wiped"}}
	showReady(server, step{}, nil)
	assert.Equal(t, "2 disks wiped", ready().Message, "a server Ready at rest keeps its message")
}
