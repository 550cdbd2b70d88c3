package fsm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// The tables below are written out by hand from what each kind's reconciler must do,
// independently of the machines' rows, so that a wrong row fails here. A missing key means the
// event is refused in that state.

// walk checks every (state, event) pair of a machine against want: allowed to the right
// target, or refused with the state unchanged.
func walk[S, E ~string](t *testing.T, kind string, states []S, events []E, want map[S]map[E]S, next func(S, E) (S, error)) {
	t.Helper()
	for _, from := range states {
		for _, event := range events {
			got, err := next(from, event)
			if to, allowed := want[from][event]; allowed {
				if assert.NoError(t, err, "%s: %s in %s must be allowed", kind, event, from) {
					assert.Equal(t, to, got, "%s: %s in %s", kind, event, from)
				}
			} else {
				assert.ErrorIs(t, err, ErrRefused, "%s: %s in %s must be refused", kind, event, from)
				assert.Equal(t, from, got, "%s: a refused event leaves the state alone", kind)
			}
		}
	}
}

func TestEveryClaimPhaseEventPair(t *testing.T) {
	require.Len(t, ClaimPhases, 3)
	require.Len(t, ClaimEvents, 3)
	want := map[m.ClaimPhase]map[ClaimEvent]m.ClaimPhase{
		m.ClaimPhasePending: {
			ClaimEventServerBound: m.ClaimPhaseBound,
			ClaimEventDeleted:     m.ClaimPhaseReleasing,
		},
		m.ClaimPhaseBound: {
			ClaimEventServerLost: m.ClaimPhasePending,
			ClaimEventDeleted:    m.ClaimPhaseReleasing,
		},
		// Releasing ends with the claim: nothing moves it.
		m.ClaimPhaseReleasing: {},
	}
	walk(t, "ServerClaim", ClaimPhases, ClaimEvents, want, func(from m.ClaimPhase, e ClaimEvent) (m.ClaimPhase, error) {
		return NextClaimPhase(context.Background(), from, e)
	})
	// A claim no reconcile has written yet is Pending.
	got, err := NextClaimPhase(context.Background(), "", ClaimEventServerBound)
	require.NoError(t, err)
	assert.Equal(t, m.ClaimPhaseBound, got)
	_, err = NextClaimPhase(context.Background(), "", ClaimEventServerLost)
	assert.ErrorIs(t, err, ErrRefused)
}

func TestEveryBMCStateEventPair(t *testing.T) {
	require.Len(t, BMCStates, 3)
	require.Len(t, BMCEvents, 2)
	// The state is the latest poll's outcome, from any state.
	want := map[m.BMCState]map[BMCEvent]m.BMCState{}
	for _, s := range []m.BMCState{m.BMCStatePending, m.BMCStateEnabled, m.BMCStateError} {
		want[s] = map[BMCEvent]m.BMCState{BMCEventConnected: m.BMCStateEnabled, BMCEventFailed: m.BMCStateError}
	}
	walk(t, "BMC", BMCStates, BMCEvents, want, func(from m.BMCState, e BMCEvent) (m.BMCState, error) {
		return NextBMCState(context.Background(), from, e)
	})
	got, err := NextBMCState(context.Background(), "", BMCEventFailed)
	require.NoError(t, err)
	assert.Equal(t, m.BMCStateError, got)
	_, err = NextBMCState(context.Background(), m.BMCStateEnabled, "rebooted")
	assert.ErrorIs(t, err, ErrRefused, "an unknown event is refused")
}

func TestEveryMaintenanceStateEventPair(t *testing.T) {
	require.Len(t, MaintenanceStates, 3)
	require.Len(t, MaintenanceEvents, 4)
	want := map[m.MaintenanceState]map[MaintenanceEvent]m.MaintenanceState{
		m.MaintenanceStatePending: {
			MaintenanceEventServerEntered: m.MaintenanceStateInMaintenance,
			MaintenanceEventServerMissing: m.MaintenanceStateFailed,
		},
		m.MaintenanceStateInMaintenance: {
			MaintenanceEventServerLeft:    m.MaintenanceStatePending,
			MaintenanceEventServerMissing: m.MaintenanceStateFailed,
		},
		m.MaintenanceStateFailed: {
			MaintenanceEventServerAppeared: m.MaintenanceStatePending,
		},
	}
	walk(t, "ServerMaintenance", MaintenanceStates, MaintenanceEvents, want, func(from m.MaintenanceState, e MaintenanceEvent) (m.MaintenanceState, error) {
		return NextMaintenanceState(context.Background(), from, e)
	})
	got, err := NextMaintenanceState(context.Background(), "", MaintenanceEventServerMissing)
	require.NoError(t, err)
	assert.Equal(t, m.MaintenanceStateFailed, got)
}

// Each kind's generated document has its diagram and every row, with the text people act on.
func TestKindDocumentsHaveEveryRow(t *testing.T) {
	for _, tc := range []struct {
		doc  Document
		want []string
	}{
		{&Claim, []string{"stateDiagram-v2", "Pending --> Bound: serverBound", "Bound --> Pending: serverLost",
			"Bound --> Releasing: deleted", "NoMatchingServer", "`status.phase` starts as `Pending`"}},
		{&BMC, []string{"Error --> Enabled: connected", "Enabled --> Error: failed", "Enabled --> Enabled: connected",
			"AuthenticationFailed", "UnsupportedProtocol"}},
		{&Maintenance, []string{"Pending --> InMaintenance: serverEntered", "InMaintenance --> Pending: serverLeft",
			"Failed --> Pending: serverAppeared", "metal.ironfleet.dev/approve-maintenance=true", "ServerNotFound"}},
	} {
		doc, err := tc.doc.Markdown("test")
		require.NoError(t, err)
		for _, w := range tc.want {
			assert.Contains(t, string(doc), w)
		}
	}
}

func TestEveryFirmwareUpdateStateEventPair(t *testing.T) {
	require.Len(t, UpdateStates, 9)
	require.Len(t, UpdateEvents, 9)
	failed := map[UpdateEvent]m.FirmwareUpdateState{UpdateEventFail: m.FirmwareUpdateFailed}
	with := func(a, b map[UpdateEvent]m.FirmwareUpdateState) map[UpdateEvent]m.FirmwareUpdateState {
		out := map[UpdateEvent]m.FirmwareUpdateState{}
		for k, v := range a {
			out[k] = v
		}
		for k, v := range b {
			out[k] = v
		}
		return out
	}
	for _, hostReset := range []bool{false, true} {
		admitted, installed := m.FirmwareUpdateStaging, m.FirmwareUpdateVerifying
		if hostReset {
			admitted, installed = m.FirmwareUpdateEnteringMaintenance, m.FirmwareUpdateRebooting
		}
		want := map[m.FirmwareUpdateState]map[UpdateEvent]m.FirmwareUpdateState{
			m.FirmwareUpdateWaiting: {UpdateEventAdmit: admitted, UpdateEventWithdraw: m.FirmwareUpdateWithdrawn},
			m.FirmwareUpdateEnteringMaintenance: with(failed, map[UpdateEvent]m.FirmwareUpdateState{
				UpdateEventMaintenanceHeld: m.FirmwareUpdateStaging, UpdateEventWithdraw: m.FirmwareUpdateWithdrawn}),
			m.FirmwareUpdateStaging:    with(failed, map[UpdateEvent]m.FirmwareUpdateState{UpdateEventStaged: m.FirmwareUpdateInstalling}),
			m.FirmwareUpdateInstalling: with(failed, map[UpdateEvent]m.FirmwareUpdateState{UpdateEventInstalled: installed}),
			m.FirmwareUpdateRebooting:  with(failed, map[UpdateEvent]m.FirmwareUpdateState{UpdateEventRebooted: m.FirmwareUpdateVerifying}),
			m.FirmwareUpdateVerifying:  with(failed, map[UpdateEvent]m.FirmwareUpdateState{UpdateEventVerified: m.FirmwareUpdateSucceeded}),
			m.FirmwareUpdateFailed:     {UpdateEventRetry: m.FirmwareUpdateWaiting, UpdateEventWithdraw: m.FirmwareUpdateWithdrawn},
			// Succeeded and Withdrawn end an update: the next one is a new update, in Waiting.
			m.FirmwareUpdateSucceeded: {},
			m.FirmwareUpdateWithdrawn: {},
		}
		facts := UpdateFacts{HostReset: hostReset}
		walk(t, "firmware update", UpdateStates, UpdateEvents, want, func(from m.FirmwareUpdateState, e UpdateEvent) (m.FirmwareUpdateState, error) {
			return NextUpdateState(context.Background(), from, e, facts)
		})
	}
}
