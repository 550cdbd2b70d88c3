package fsm

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

type powerPair struct {
	from  m.PowerDeliveryState
	event PowerEvent
}

// expectedPower is the power table written out by hand, per facts; a missing key is refused.
func expectedPower(f PowerFacts) map[powerPair]m.PowerDeliveryState {
	want := map[powerPair]m.PowerDeliveryState{
		{m.PowerSent, PowerEventObserved}:         m.PowerConfirmed,
		{m.PowerShuttingDown, PowerEventObserved}: m.PowerConfirmed,
		{m.PowerUnconfirmed, PowerEventObserved}:  m.PowerConfirmed,
		{m.PowerShuttingDown, PowerEventEscalate}: m.PowerRequested,
	}
	for _, s := range []m.PowerDeliveryState{m.PowerRequested, m.PowerSent, m.PowerShuttingDown, m.PowerConfirmed, m.PowerUnconfirmed} {
		want[powerPair{s, PowerEventRequest}] = m.PowerRequested
	}
	if f.Graceful {
		want[powerPair{m.PowerRequested, PowerEventSent}] = m.PowerShuttingDown
	} else {
		want[powerPair{m.PowerRequested, PowerEventSent}] = m.PowerSent
	}
	if f.Resent {
		want[powerPair{m.PowerSent, PowerEventTimedOut}] = m.PowerUnconfirmed
	} else {
		want[powerPair{m.PowerSent, PowerEventTimedOut}] = m.PowerRequested
	}
	return want
}

func TestEveryPowerStateEventPair(t *testing.T) {
	require.Len(t, Power.States, 5)
	require.Len(t, Power.Events, 5)
	for _, f := range Power.Cases {
		want := expectedPower(f)
		for _, from := range Power.States {
			for _, event := range Power.Events {
				got, err := Power.Next(context.Background(), from, event, f)
				to, allowed := want[powerPair{from, event}]
				if allowed {
					if assert.NoError(t, err, "%s on %s (%+v) must be allowed", event, from, f) {
						assert.Equal(t, to, got, "%s on %s (%+v)", event, from, f)
					}
				} else {
					assert.ErrorIs(t, err, ErrRefused, "%s on %s (%+v) must be refused", event, from, f)
					assert.Equal(t, from, got, "a refused event leaves the state alone")
				}
			}
		}
	}
}
