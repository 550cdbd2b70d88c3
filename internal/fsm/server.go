// Package fsm holds Ironfleet's state machines as data, on github.com/looplab/fsm. It is pure:
// no Kubernetes client, no I/O. Controllers observe facts, pick one event, and ask the machine
// where it leads; docs/server-lifecycle.md is generated from the same table.
package fsm

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ServerEvent is something that happened to a server and may move it to another state.
type ServerEvent string

// The server lifecycle's events, as named in the architecture's table.
const (
	EventDiscover          ServerEvent = "discover"
	EventDiscovered        ServerEvent = "discovered"
	EventDiscoveryTimedOut ServerEvent = "discoveryTimedOut"
	EventClaim             ServerEvent = "claim"
	EventRelease           ServerEvent = "release"
	EventCleaned           ServerEvent = "cleaned"
	EventStartMaintenance  ServerEvent = "startMaintenance"
	EventEndMaintenance    ServerEvent = "endMaintenance"
	EventFail              ServerEvent = "fail"
	EventRetry             ServerEvent = "retry"
)

// ServerEvents lists every server event, in the table's order.
var ServerEvents = []ServerEvent{
	EventDiscover, EventDiscovered, EventDiscoveryTimedOut, EventClaim, EventRelease,
	EventCleaned, EventStartMaintenance, EventEndMaintenance, EventFail, EventRetry,
}

// ServerStates lists every server state.
var ServerStates = []metalv1alpha1.ServerState{
	metalv1alpha1.ServerStateInitial, metalv1alpha1.ServerStateDiscovery,
	metalv1alpha1.ServerStateAvailable, metalv1alpha1.ServerStateReserved,
	metalv1alpha1.ServerStateCleanup, metalv1alpha1.ServerStateMaintenance,
	metalv1alpha1.ServerStateError,
}

// Facts are what the server machine's guards are evaluated against.
type Facts struct {
	// Claimed is true when the server's claim still exists.
	Claimed bool
}

// The server machine's guards.
var (
	// Claimed holds when the server is still bound to a claim.
	Claimed = Guard[Facts]{Name: "claimed", Holds: func(f Facts) bool { return f.Claimed }}
	// Unclaimed holds when it is not.
	Unclaimed = Guard[Facts]{Name: "unclaimed", Holds: func(f Facts) bool { return !f.Claimed }}
	always    = Guard[Facts]{}
)

// Transition is one row of the server machine.
type Transition = Row[metalv1alpha1.ServerState, ServerEvent, Facts]

var (
	initial     = metalv1alpha1.ServerStateInitial
	discovery   = metalv1alpha1.ServerStateDiscovery
	available   = metalv1alpha1.ServerStateAvailable
	reserved    = metalv1alpha1.ServerStateReserved
	cleanup     = metalv1alpha1.ServerStateCleanup
	maintenance = metalv1alpha1.ServerStateMaintenance
	errored     = metalv1alpha1.ServerStateError
)

// ServerTransitions is the server lifecycle: the one place it is written down.
var ServerTransitions = []Transition{
	{EventDiscover, states(initial), discovery, always,
		"BMC answers; system read; discovery boot config Ready; PXE once; powered on"},
	{EventDiscovered, states(discovery), available, always,
		"a valid report for this server arrived; inventory written; powered off; boot config removed"},
	{EventDiscoveryTimedOut, states(discovery), initial, always,
		"no report within the discovery timeout; attempts counted, backoff"},
	{EventClaim, states(available), reserved, always,
		"a ServerClaim was bound to it"},
	{EventRelease, states(reserved), cleanup, always,
		"its claim is gone; powered off; cleanup boot config (metalprobe wipe)"},
	{EventCleaned, states(cleanup), available, always,
		"the probe reported every disk of the server's record wiped as requested"},
	{EventStartMaintenance, states(initial, discovery, available, reserved, cleanup, errored), maintenance, always,
		"a ServerMaintenance took it (owner-approved or enforced)"},
	{EventEndMaintenance, states(maintenance), reserved, Claimed,
		"maintenance ended and its claim still exists"},
	{EventEndMaintenance, states(maintenance), initial, Unclaimed,
		"maintenance ended and it has no claim: re-discover"},
	{EventFail, states(initial, discovery, cleanup), errored, always,
		"attempts exhausted, wipe failed, a report lists other hardware than the record, or the BMC refuses; with a reason"},
	{EventRetry, states(errored), initial, always,
		"a person set the metal.ironfleet.dev/retry annotation (after HardwareChanged: the next discovery records the hardware it finds)"},
}

func states(s ...metalv1alpha1.ServerState) []metalv1alpha1.ServerState { return s }

// Server is the server lifecycle machine.
var Server = Machine[metalv1alpha1.ServerState, ServerEvent, Facts]{
	Kind: "Server", Field: "state", Initial: initial,
	States: ServerStates, Events: ServerEvents, Rows: ServerTransitions,
	Cases: []Facts{{Claimed: false}, {Claimed: true}},
	Intro: `A Server moves between states only by these events. The reconciler observes facts,
fires at most one event per reconcile, and writes its status once, under an optimistic lock,
before it performs that transition's side effects (a BMC action); what the BMC did (the power
sent, and seen when the BMC shows it at once) is recorded in one more write. A new Server enters
Initial and takes Initial's first step in its first write; the probe boot it names goes in
` + "`status.probeBoot`" + ` with that write. A reconcile that finds nothing new writes nothing.`,
}

// NextServerState returns the state a server in state from moves to on event, given facts, or
// an error wrapping ErrRefused when the table has no such transition.
func NextServerState(ctx context.Context, from metalv1alpha1.ServerState, event ServerEvent, facts Facts) (metalv1alpha1.ServerState, error) {
	return Server.Next(ctx, from, event, facts)
}
