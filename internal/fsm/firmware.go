package fsm

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// UpdateEvent is something that happened to a server's firmware update.
type UpdateEvent string

// The firmware update's events.
const (
	// UpdateEventAdmit: the baseline's rollout gave the server its turn.
	UpdateEventAdmit UpdateEvent = "admit"
	// UpdateEventMaintenanceHeld: the update's ServerMaintenance holds the server.
	UpdateEventMaintenanceHeld UpdateEvent = "maintenanceHeld"
	// UpdateEventStaged: every setting and image was sent to the BMC.
	UpdateEventStaged UpdateEvent = "staged"
	// UpdateEventInstalled: every task the BMC started ended Completed.
	UpdateEventInstalled UpdateEvent = "installed"
	// UpdateEventRebooted: the maintenance was ended and the server left it.
	UpdateEventRebooted UpdateEvent = "rebooted"
	// UpdateEventVerified: the BMC, read again, and the host itself agree with the baseline.
	UpdateEventVerified UpdateEvent = "verified"
	// UpdateEventFail: something went wrong; the reason says what.
	UpdateEventFail UpdateEvent = "fail"
	// UpdateEventRetry: a person asked for it again, or the baseline changed.
	UpdateEventRetry UpdateEvent = "retry"
	// UpdateEventWithdraw: before anything was sent, the baseline stopped wanting it.
	UpdateEventWithdraw UpdateEvent = "withdraw"
)

// UpdateEvents lists every update event, in the table's order.
var UpdateEvents = []UpdateEvent{
	UpdateEventAdmit, UpdateEventMaintenanceHeld, UpdateEventStaged, UpdateEventInstalled, UpdateEventRebooted,
	UpdateEventVerified, UpdateEventFail, UpdateEventRetry, UpdateEventWithdraw,
}

// UpdateStates lists every update state.
var UpdateStates = []metalv1alpha1.FirmwareUpdateState{
	metalv1alpha1.FirmwareUpdateWaiting, metalv1alpha1.FirmwareUpdateEnteringMaintenance, metalv1alpha1.FirmwareUpdateStaging,
	metalv1alpha1.FirmwareUpdateInstalling, metalv1alpha1.FirmwareUpdateRebooting, metalv1alpha1.FirmwareUpdateVerifying,
	metalv1alpha1.FirmwareUpdateSucceeded, metalv1alpha1.FirmwareUpdateFailed, metalv1alpha1.FirmwareUpdateWithdrawn,
}

// UpdateFacts are what the update machine's guards read.
type UpdateFacts struct {
	// HostReset: the update needs the host out of service and reset (a BIOS, a device, BIOS
	// settings); false for a BMC's own firmware alone.
	HostReset bool
}

// The update machine's guards.
var (
	HostReset = Guard[UpdateFacts]{Name: "host reset", Holds: func(f UpdateFacts) bool { return f.HostReset }}
	BMCOnly   = Guard[UpdateFacts]{Name: "BMC only", Holds: func(f UpdateFacts) bool { return !f.HostReset }}
)

func updateStates(s ...metalv1alpha1.FirmwareUpdateState) []metalv1alpha1.FirmwareUpdateState {
	return s
}

var (
	upWaiting     = metalv1alpha1.FirmwareUpdateWaiting
	upEntering    = metalv1alpha1.FirmwareUpdateEnteringMaintenance
	upStaging     = metalv1alpha1.FirmwareUpdateStaging
	upInstalling  = metalv1alpha1.FirmwareUpdateInstalling
	upRebooting   = metalv1alpha1.FirmwareUpdateRebooting
	upVerifying   = metalv1alpha1.FirmwareUpdateVerifying
	upSucceeded   = metalv1alpha1.FirmwareUpdateSucceeded
	upFailed      = metalv1alpha1.FirmwareUpdateFailed
	upWithdrawn   = metalv1alpha1.FirmwareUpdateWithdrawn
	upInterrupted = updateStates(upEntering, upStaging, upInstalling, upRebooting, upVerifying)
)

// Update is a server's firmware update to its baseline: the one place its states are written
// down.
var Update = Machine[metalv1alpha1.FirmwareUpdateState, UpdateEvent, UpdateFacts]{
	Kind: "ServerFirmware update", Field: "update.state", Initial: upWaiting,
	States: UpdateStates, Events: UpdateEvents,
	Cases: []UpdateFacts{{HostReset: false}, {HostReset: true}},
	Rows: []Row[metalv1alpha1.FirmwareUpdateState, UpdateEvent, UpdateFacts]{
		{Event: UpdateEventAdmit, From: updateStates(upWaiting), To: upEntering, Guard: HostReset,
			When: "fewer of the baseline's servers than rollout.maxUnavailable are out of service for it, and fewer than " +
				"rollout.maxFailures failed at its generation: the server is tainted metal.ironfleet.dev/firmware-update " +
				"(NoClaim) and a ServerMaintenance with the baseline's policy is made for it"},
		{Event: UpdateEventAdmit, From: updateStates(upWaiting), To: upStaging, Guard: BMCOnly,
			When: "as above, for a BMC's own firmware alone: no maintenance, no taint; the host stays in service, claimed and powered"},
		{Event: UpdateEventMaintenanceHeld, From: updateStates(upEntering), To: upStaging,
			When: "the maintenance holds the server (a claimed server under OwnerApproval: once its owner approved)"},
		{Event: UpdateEventStaged, From: updateStates(upStaging), To: upInstalling,
			When: "the BIOS settings were written to the Bios settings object (applied at the next reset) and every image " +
				"was handed to the BMC (SimpleUpdate, or a multipart push), each giving a task"},
		{Event: UpdateEventInstalled, From: updateStates(upInstalling), To: upRebooting, Guard: HostReset,
			When: "every task ended Completed: the maintenance is deleted, so the host boots with what was installed " +
				"(a pool server: its probe, by re-discovery; a claimed one: its claim's power)"},
		{Event: UpdateEventInstalled, From: updateStates(upInstalling), To: upVerifying, Guard: BMCOnly,
			When: "every task ended Completed"},
		{Event: UpdateEventRebooted, From: updateStates(upRebooting), To: upVerifying,
			When: "the server left the maintenance"},
		{Event: UpdateEventVerified, From: updateStates(upVerifying), To: upSucceeded,
			When: "the BMC, read after the reset, reports what the baseline wants, and a pool server's probe reported the " +
				"BIOS version the BMC reports (SMBIOS, read in the host): the taint is removed"},
		{Event: UpdateEventFail, From: upInterrupted, To: upFailed,
			When: "the BMC refused, a task failed, a step timed out, or the BMC or the host disagree with the baseline after " +
				"the reset: the server stays in (or is taken back into) maintenance, tainted, with the reason"},
		{Event: UpdateEventRetry, From: updateStates(upFailed), To: upWaiting,
			When: "a person set metal.ironfleet.dev/retry-update on the ServerFirmware, or the baseline changed: it waits for " +
				"its turn again, in the maintenance that still holds it"},
		{Event: UpdateEventWithdraw, From: updateStates(upWaiting, upEntering), To: upWithdrawn,
			When: "nothing was sent yet (not retried after a failure) and no baseline wants it any more (deleted, changed, " +
				"the server left its selector): the maintenance and the taint are removed"},
		{Event: UpdateEventWithdraw, From: updateStates(upFailed), To: upWithdrawn,
			When: "a person deleted the failed update's ServerMaintenance, giving the server back as it is: the taint is " +
				"removed (a baseline that still wants something of it starts a new update, unless paused)"},
	},
	Intro: `A ServerFirmware's update brings its server to a FirmwareBaseline. The firmware reconciler
observes the server, its maintenance, the BMC's tasks and the host's reports, fires at most one
event per reconcile, and writes the update's status once. A server differing from its
baselines gets a new update in Waiting; a Succeeded or Withdrawn one is replaced by the next.
While an update is under way (EnteringMaintenance to Verifying) or Failed, the server counts
against its baseline's rollout.maxUnavailable.`,
}

// NextUpdateState returns the state an update in state from moves to on event, given facts, or
// an error wrapping ErrRefused when the table has no such transition. An empty state is the
// initial one.
func NextUpdateState(ctx context.Context, from metalv1alpha1.FirmwareUpdateState, event UpdateEvent, facts UpdateFacts) (metalv1alpha1.FirmwareUpdateState, error) {
	if from == "" {
		from = Update.Initial
	}
	return Update.Next(ctx, from, event, facts)
}
