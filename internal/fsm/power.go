package fsm

import (
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// PowerEvent is something that happened to a power request.
type PowerEvent string

// The power delivery's events.
const (
	PowerEventRequest  PowerEvent = "request"
	PowerEventSent     PowerEvent = "sent"
	PowerEventObserved PowerEvent = "observed"
	PowerEventTimedOut PowerEvent = "timedOut"
	PowerEventEscalate PowerEvent = "escalate"
)

// PowerFacts are what the power table's guards look at.
type PowerFacts struct {
	// Graceful is true for a request that asks the OS to shut down first.
	Graceful bool
	// Resent is true once the request was sent twice.
	Resent bool
}

var (
	graceful = Guard[PowerFacts]{Name: "graceful", Holds: func(f PowerFacts) bool { return f.Graceful }}
	forced   = Guard[PowerFacts]{Name: "forced", Holds: func(f PowerFacts) bool { return !f.Graceful }}
	once     = Guard[PowerFacts]{Name: "sent once", Holds: func(f PowerFacts) bool { return !f.Resent }}
	twice    = Guard[PowerFacts]{Name: "sent twice", Holds: func(f PowerFacts) bool { return f.Resent }}
)

var (
	pRequested    = metalv1alpha1.PowerRequested
	pSent         = metalv1alpha1.PowerSent
	pShuttingDown = metalv1alpha1.PowerShuttingDown
	pConfirmed    = metalv1alpha1.PowerConfirmed
	pUnconfirmed  = metalv1alpha1.PowerUnconfirmed
)

func pstates(s ...metalv1alpha1.PowerDeliveryState) []metalv1alpha1.PowerDeliveryState { return s }

// Power is the delivery of a server's power request (status.powerDelivery): asked, sent,
// watched until the BMC shows it, sent once more, or escalated from a shutdown the OS ignores.
var Power = Machine[metalv1alpha1.PowerDeliveryState, PowerEvent, PowerFacts]{
	Kind: "Power", Field: "powerDelivery.state", Initial: pRequested,
	States: pstates(pRequested, pSent, pShuttingDown, pConfirmed, pUnconfirmed),
	Events: []PowerEvent{PowerEventRequest, PowerEventSent, PowerEventObserved, PowerEventTimedOut, PowerEventEscalate},
	Rows: []Row[metalv1alpha1.PowerDeliveryState, PowerEvent, PowerFacts]{
		{Event: PowerEventRequest, From: pstates(pRequested, pSent, pShuttingDown, pConfirmed, pUnconfirmed), To: pRequested,
			When: "a state asks for another power (claim, maintenance, Available), or a request made for an earlier generation; recorded before it is sent"},
		{Event: PowerEventSent, From: pstates(pRequested), To: pSent, Guard: forced,
			When: "the BMC took the reset (On, ForceOff); a 409/400 \"already in that state\" counts as taken"},
		{Event: PowerEventSent, From: pstates(pRequested), To: pShuttingDown, Guard: graceful,
			When: "the BMC took a GracefulShutdown: the OS has the grace period to stop"},
		{Event: PowerEventObserved, From: pstates(pSent, pShuttingDown, pUnconfirmed), To: pConfirmed,
			When: "the BMC reports the power asked for (some report the old state for seconds: observed, never assumed)"},
		{Event: PowerEventTimedOut, From: pstates(pSent), To: pRequested, Guard: once,
			When: "not reported within the confirmation timeout: sent once more"},
		{Event: PowerEventTimedOut, From: pstates(pSent), To: pUnconfirmed, Guard: twice,
			When: "sent twice and still not reported: not sent again (no loop); Powered=False says so, a Warning event records it, and it is still watched"},
		{Event: PowerEventEscalate, From: pstates(pShuttingDown), To: pRequested,
			When: "the OS did not stop within the grace period: ForceOff is requested, with a Warning event"},
	},
	Cases: []PowerFacts{{}, {Graceful: true}, {Resent: true}, {Graceful: true, Resent: true}},
	Intro: `A power request of Ironfleet's (status.powerDelivery) is recorded before it is sent and
moves only by these events, so a manager that dies half way sends it again, a BMC that accepts a
reset and never acts on it is noticed without a loop, and a shutdown the OS ignores is forced.`,
}
