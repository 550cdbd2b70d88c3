package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Reasons of the Powered condition: a power request is recorded before it is sent, and marked
// sent once the BMC took it.
const (
	ReasonPowerOnRequested  = "PowerOnRequested"
	ReasonPowerOffRequested = "PowerOffRequested"
	ReasonPowerOnSent       = "PowerOnSent"
	ReasonPowerOffSent      = "PowerOffSent"
)

// Power requests of a server at rest (Available, Reserved, Maintenance) are delivered at least
// once. The step that asks records the request in its status write (Powered=False,
// Power<X>Requested); the BMC call runs after that write, and marks the request sent
// (Powered=True, Power<X>Sent) once the BMC took it. A manager that dies in between leaves a
// request marked unsent, and the state's handler sends it again. A request that was sent is
// not repeated: a power change made outside Ironfleet afterwards stands.

func requestedReason(want metalv1alpha1.Power) string {
	if want == metalv1alpha1.PowerOff {
		return ReasonPowerOffRequested
	}
	return ReasonPowerOnRequested
}

func sentReason(want metalv1alpha1.Power) string {
	if want == metalv1alpha1.PowerOff {
		return ReasonPowerOffSent
	}
	return ReasonPowerOnSent
}

// requestPower records a power request, not sent yet, in status.
func requestPower(s *metalv1alpha1.Server, want metalv1alpha1.Power, message string) {
	setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionPowered, metav1.ConditionFalse, requestedReason(want), message)
}

// sendPower is the BMC call that delivers a power request, and marks it sent once it has been.
// It does not read the power state first: some BMCs report the previous state for a while after
// a change (a server the probe just powered on still reads Off), and the request would be lost.
func sendPower(uri string, want metalv1alpha1.Power, message string) effect {
	eff := setPower(uri, powerAction(want))
	eff.done = func(s *metalv1alpha1.Server) {
		setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionPowered, metav1.ConditionTrue, sentReason(want), message)
	}
	return eff
}

// powerStep asks for a power state: recorded with the step's status write, sent after it.
func powerStep(server *metalv1alpha1.Server, want metalv1alpha1.Power, message string) step {
	return step{effect: sendPower(server.Spec.SystemURI, want, message), apply: func(s *metalv1alpha1.Server) { requestPower(s, want, message) }}
}

// unsentPower is the power a server was asked for that may never have reached its BMC.
func unsentPower(server *metalv1alpha1.Server) (want metalv1alpha1.Power, message string, ok bool) {
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionPowered)
	if c == nil || c.Status != metav1.ConditionFalse {
		return "", "", false
	}
	switch c.Reason {
	case ReasonPowerOnRequested:
		return metalv1alpha1.PowerOn, c.Message, true
	case ReasonPowerOffRequested:
		return metalv1alpha1.PowerOff, c.Message, true
	}
	return "", "", false
}

// resendPower sends again a power request that may never have reached the BMC; nothing when
// there is none.
func resendPower(server *metalv1alpha1.Server) step {
	want, message, ok := unsentPower(server)
	if !ok {
		return step{}
	}
	return step{effect: sendPower(server.Spec.SystemURI, want, message)}
}

func powerAction(p metalv1alpha1.Power) bmc.PowerAction {
	if p == metalv1alpha1.PowerOff {
		return bmc.PowerOff
	}
	return bmc.PowerOn
}
