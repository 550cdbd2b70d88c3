// Package fsm holds Ironfleet's state machines as data, on github.com/looplab/fsm. It is pure:
// no Kubernetes client, no I/O. Controllers observe facts, pick one event, and ask the machine
// where it leads; docs/server-lifecycle.md is generated from the same table.
package fsm

import (
	"context"
	"errors"
	"fmt"

	lfsm "github.com/looplab/fsm"

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

// Guard is a fact a transition needs besides its source state. Rows that share an event and a
// source state are told apart by their guards; at most one of them holds for any Facts.
type Guard string

const (
	// Always holds.
	Always Guard = ""
	// Claimed holds when the server is still bound to a claim.
	Claimed Guard = "claimed"
	// Unclaimed holds when it is not.
	Unclaimed Guard = "unclaimed"
)

// Facts are what guards are evaluated against.
type Facts struct {
	// Claimed is true when the server's claim still exists.
	Claimed bool
}

func (g Guard) holds(f Facts) bool {
	switch g {
	case Claimed:
		return f.Claimed
	case Unclaimed:
		return !f.Claimed
	default:
		return true
	}
}

// Transition is one row of a state machine's table.
type Transition struct {
	Event ServerEvent
	From  []metalv1alpha1.ServerState
	To    metalv1alpha1.ServerState
	Guard Guard
	// When says, for people, what has to be true; it is printed in the generated docs.
	When string
}

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
	{EventDiscover, states(initial), discovery, Always,
		"BMC answers; system read; discovery boot config Ready; PXE once; powered on"},
	{EventDiscovered, states(discovery), available, Always,
		"a valid report for this server arrived; inventory written; powered off; boot config removed"},
	{EventDiscoveryTimedOut, states(discovery), initial, Always,
		"no report within the discovery timeout; attempts counted, backoff"},
	{EventClaim, states(available), reserved, Always,
		"a ServerClaim was bound to it"},
	{EventRelease, states(reserved), cleanup, Always,
		"its claim is gone; powered off; cleanup boot config (metalprobe wipe)"},
	{EventCleaned, states(cleanup), available, Always,
		"the probe reported every disk wiped as requested"},
	{EventStartMaintenance, states(initial, discovery, available, reserved, cleanup, errored), maintenance, Always,
		"a ServerMaintenance took it (owner-approved or enforced)"},
	{EventEndMaintenance, states(maintenance), reserved, Claimed,
		"maintenance ended and its claim still exists"},
	{EventEndMaintenance, states(maintenance), initial, Unclaimed,
		"maintenance ended and it has no claim: re-discover"},
	{EventFail, states(initial, discovery, cleanup), errored, Always,
		"attempts exhausted, wipe failed, or the BMC refuses; with a reason"},
	{EventRetry, states(errored), initial, Always,
		"a person set the retry annotation, or the spec changed"},
}

func states(s ...metalv1alpha1.ServerState) []metalv1alpha1.ServerState { return s }

// ErrRefused is returned (wrapped) when an event is not allowed in the current state.
var ErrRefused = errors.New("transition refused")

// NextServerState returns the state a server in state `from` moves to on event, given facts, or
// an error wrapping ErrRefused when the table has no such transition.
func NextServerState(ctx context.Context, from metalv1alpha1.ServerState, event ServerEvent, facts Facts) (metalv1alpha1.ServerState, error) {
	machine := lfsm.NewFSM(string(from), eventDescs(facts), nil)
	if err := machine.Event(ctx, string(event)); err != nil {
		return from, fmt.Errorf("%w: %s in state %s: %v", ErrRefused, event, from, err)
	}
	return metalv1alpha1.ServerState(machine.Current()), nil
}

// eventDescs turns the rows whose guards hold into looplab's form.
func eventDescs(facts Facts) []lfsm.EventDesc {
	descs := make([]lfsm.EventDesc, 0, len(ServerTransitions))
	for _, t := range ServerTransitions {
		if t.Guard.holds(facts) {
			descs = append(descs, lfsm.EventDesc{Name: string(t.Event), Src: strs(t.From), Dst: string(t.To)})
		}
	}
	return descs
}

func strs(ss []metalv1alpha1.ServerState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// ServerMermaid renders the whole table, every guard included, as a Mermaid state diagram with
// looplab's visualizer. Guarded rows are labelled "event [guard]".
func ServerMermaid() (string, error) {
	descs := make([]lfsm.EventDesc, 0, len(ServerTransitions))
	for _, t := range ServerTransitions {
		name := string(t.Event)
		if t.Guard != Always {
			name = fmt.Sprintf("%s [%s]", t.Event, t.Guard)
		}
		descs = append(descs, lfsm.EventDesc{Name: name, Src: strs(t.From), Dst: string(t.To)})
	}
	return lfsm.VisualizeForMermaidWithGraphType(lfsm.NewFSM(string(initial), descs, nil), lfsm.StateDiagram)
}
