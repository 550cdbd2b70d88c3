package fsm

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// expected is written out by hand from the architecture's table, independently of
// ServerTransitions, so that a wrong row in the code fails here. A missing key means refused.
type pair struct {
	from  m.ServerState
	event ServerEvent
}

func expected(claimed bool) map[pair]m.ServerState {
	want := map[pair]m.ServerState{
		{m.ServerStateInitial, EventDiscover}:            m.ServerStateDiscovery,
		{m.ServerStateDiscovery, EventDiscovered}:        m.ServerStateAvailable,
		{m.ServerStateDiscovery, EventDiscoveryTimedOut}: m.ServerStateInitial,
		{m.ServerStateAvailable, EventClaim}:             m.ServerStateReserved,
		{m.ServerStateReserved, EventRelease}:            m.ServerStateCleanup,
		{m.ServerStateCleanup, EventCleaned}:             m.ServerStateAvailable,
		{m.ServerStateInitial, EventFail}:                m.ServerStateError,
		{m.ServerStateDiscovery, EventFail}:              m.ServerStateError,
		{m.ServerStateCleanup, EventFail}:                m.ServerStateError,
		{m.ServerStateError, EventRetry}:                 m.ServerStateInitial,
	}
	for _, s := range []m.ServerState{m.ServerStateInitial, m.ServerStateDiscovery, m.ServerStateAvailable,
		m.ServerStateReserved, m.ServerStateCleanup, m.ServerStateError} {
		want[pair{s, EventStartMaintenance}] = m.ServerStateMaintenance
	}
	if claimed {
		want[pair{m.ServerStateMaintenance, EventEndMaintenance}] = m.ServerStateReserved
	} else {
		want[pair{m.ServerStateMaintenance, EventEndMaintenance}] = m.ServerStateInitial
	}
	return want
}

func TestEveryStateEventPair(t *testing.T) {
	require.Len(t, ServerStates, 7)
	require.Len(t, ServerEvents, 10)
	for _, claimed := range []bool{false, true} {
		want := expected(claimed)
		for _, from := range ServerStates {
			for _, event := range ServerEvents {
				got, err := NextServerState(context.Background(), from, event, Facts{Claimed: claimed})
				to, allowed := want[pair{from, event}]
				if allowed {
					if assert.NoError(t, err, "%s on %s (claimed=%v) must be allowed", event, from, claimed) {
						assert.Equal(t, to, got, "%s on %s (claimed=%v)", event, from, claimed)
					}
				} else {
					assert.ErrorIs(t, err, ErrRefused, "%s on %s (claimed=%v) must be refused", event, from, claimed)
					assert.Equal(t, from, got, "a refused event leaves the state alone")
				}
			}
		}
	}
}

func TestUnknownEventIsRefused(t *testing.T) {
	_, err := NextServerState(context.Background(), m.ServerStateInitial, "explode", Facts{})
	assert.True(t, errors.Is(err, ErrRefused))
}

func TestMermaidHasEveryRow(t *testing.T) {
	out, err := Server.Mermaid()
	require.NoError(t, err)
	assert.Contains(t, out, "stateDiagram-v2")
	assert.Contains(t, out, "Maintenance --> Reserved: endMaintenance [claimed]")
	assert.Contains(t, out, "Maintenance --> Initial: endMaintenance [unclaimed]")
	assert.Contains(t, out, "Error --> Initial: retry")
	assert.Contains(t, out, "Reserved --> Maintenance: startMaintenance")
}
