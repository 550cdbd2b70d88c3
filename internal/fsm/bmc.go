package fsm

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// BMCEvent is what a poll of a BMC found.
type BMCEvent string

// The BMC lifecycle's events.
const (
	// BMCEventConnected: the BMC answered a poll; its systems were read and have their Servers.
	BMCEventConnected BMCEvent = "connected"
	// BMCEventFailed: the BMC could not be reached, refused the credentials, answered wrongly,
	// or speaks a protocol Ironfleet does not.
	BMCEventFailed BMCEvent = "failed"
)

// BMCEvents lists every BMC event, in the table's order.
var BMCEvents = []BMCEvent{BMCEventConnected, BMCEventFailed}

// BMCStates lists every BMC state.
var BMCStates = []metalv1alpha1.BMCState{
	metalv1alpha1.BMCStatePending, metalv1alpha1.BMCStateEnabled, metalv1alpha1.BMCStateError,
}

// BMC is the BMC lifecycle: the one place its states are written down. Every poll fires the
// event it found, whatever the state: the state is the latest poll's outcome, and a poll that
// finds what the state already says moves nothing (a failing BMC's Ready condition follows its
// latest failure).
var BMC = Machine[metalv1alpha1.BMCState, BMCEvent, struct{}]{
	Kind: "BMC", Field: "state", Initial: metalv1alpha1.BMCStatePending,
	States: BMCStates, Events: BMCEvents,
	Rows: []Row[metalv1alpha1.BMCState, BMCEvent, struct{}]{
		{Event: BMCEventConnected, From: BMCStates, To: metalv1alpha1.BMCStateEnabled,
			When: "a poll logged in and read the manager and its systems; each system has its Server (Ready=True Connected). " +
				"It is polled again every resync period"},
		{Event: BMCEventFailed, From: BMCStates, To: metalv1alpha1.BMCStateError,
			When: "Ready=False says why: AuthenticationFailed (fix the BMCSecret or point spec.bmcSecretRef at a new one), " +
				"Unreachable (the address, the network, or an Endpoint without an IP), ProtocolError (the BMC answered wrongly), " +
				"UnsupportedProtocol (change spec.access.address: not retried until the spec changes), " +
				"VirtualMediaUnsupported (bootMethod is VirtualMedia but a system has no virtual CD/DVD). Retried with backoff; " +
				"its Servers stay"},
	},
	Intro: `A BMC's state says whether Ironfleet can manage it: the outcome of its latest poll. The
BMC reconciler polls it, fires the event the poll found, and writes the BMC's status once, and
not at all when nothing changed (a healthy fleet's polls cost the apiserver no writes).`,
}

// NextBMCState returns the state a BMC in state from moves to on event, or an error wrapping
// ErrRefused when the table has no such transition. An empty state is the initial one.
func NextBMCState(ctx context.Context, from metalv1alpha1.BMCState, event BMCEvent) (metalv1alpha1.BMCState, error) {
	if from == "" {
		from = BMC.Initial
	}
	return BMC.Next(ctx, from, event, struct{}{})
}
