package fsm

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// MaintenanceEvent is something that happened to a ServerMaintenance's server.
type MaintenanceEvent string

// The maintenance lifecycle's events.
const (
	// MaintenanceEventServerEntered: the server, holding this maintenance's reference, is in
	// Maintenance.
	MaintenanceEventServerEntered MaintenanceEvent = "serverEntered"
	// MaintenanceEventServerLeft: the server is no longer in Maintenance for this maintenance.
	MaintenanceEventServerLeft MaintenanceEvent = "serverLeft"
	// MaintenanceEventServerMissing: no server has the name the maintenance gives.
	MaintenanceEventServerMissing MaintenanceEvent = "serverMissing"
	// MaintenanceEventServerAppeared: a server of that name exists again.
	MaintenanceEventServerAppeared MaintenanceEvent = "serverAppeared"
)

// MaintenanceEvents lists every maintenance event, in the table's order.
var MaintenanceEvents = []MaintenanceEvent{
	MaintenanceEventServerEntered, MaintenanceEventServerLeft, MaintenanceEventServerMissing, MaintenanceEventServerAppeared,
}

// MaintenanceStates lists every maintenance state.
var MaintenanceStates = []metalv1alpha1.MaintenanceState{
	metalv1alpha1.MaintenanceStatePending, metalv1alpha1.MaintenanceStateInMaintenance, metalv1alpha1.MaintenanceStateFailed,
}

func maintenanceStates(s ...metalv1alpha1.MaintenanceState) []metalv1alpha1.MaintenanceState {
	return s
}

// Maintenance is the ServerMaintenance lifecycle: the one place its states are written down.
var Maintenance = Machine[metalv1alpha1.MaintenanceState, MaintenanceEvent, struct{}]{
	Kind: "ServerMaintenance", Field: "state", Initial: metalv1alpha1.MaintenanceStatePending,
	States: MaintenanceStates, Events: MaintenanceEvents,
	Rows: []Row[metalv1alpha1.MaintenanceState, MaintenanceEvent, struct{}]{
		{Event: MaintenanceEventServerEntered, From: maintenanceStates(metalv1alpha1.MaintenanceStatePending), To: metalv1alpha1.MaintenanceStateInMaintenance,
			When: "the server took this maintenance's reference (at once when Enforced; when OwnerApproval and the server is claimed, " +
				"after the claim's owner set metal.ironfleet.dev/approve-maintenance=true on the claim: Ready=False " +
				"WaitingForOwnerApproval until then) and its reconciler moved it to Maintenance. Delete the maintenance to give it back"},
		{Event: MaintenanceEventServerLeft, From: maintenanceStates(metalv1alpha1.MaintenanceStateInMaintenance), To: metalv1alpha1.MaintenanceStatePending,
			When: "the server is no longer in Maintenance for this maintenance (its reference was cleared or taken by another, " +
				"or it was re-created): it is taken again"},
		{Event: MaintenanceEventServerMissing, From: maintenanceStates(metalv1alpha1.MaintenanceStatePending, metalv1alpha1.MaintenanceStateInMaintenance),
			To:   metalv1alpha1.MaintenanceStateFailed,
			When: "no server has the name spec.serverRef gives (Ready=False ServerNotFound): fix the name, or delete the maintenance"},
		{Event: MaintenanceEventServerAppeared, From: maintenanceStates(metalv1alpha1.MaintenanceStateFailed), To: metalv1alpha1.MaintenanceStatePending,
			When: "a server of that name exists now: it is taken as above"},
	},
	Intro: `A ServerMaintenance takes a server out of service; deleting it gives the server back to
its claim, or to re-discovery. Its state moves only by these events: the maintenance reconciler
observes the server, fires at most one event per reconcile, and writes the maintenance's status
once. While Pending, its Ready condition says what it waits for: WaitingForOwnerApproval,
ServerHeldByOtherMaintenance, or TakingServer.`,
}

// NextMaintenanceState returns the state a maintenance in state from moves to on event, or an
// error wrapping ErrRefused when the table has no such transition. An empty state is the
// initial one.
func NextMaintenanceState(ctx context.Context, from metalv1alpha1.MaintenanceState, event MaintenanceEvent) (metalv1alpha1.MaintenanceState, error) {
	if from == "" {
		from = Maintenance.Initial
	}
	return Maintenance.Next(ctx, from, event, struct{}{})
}
