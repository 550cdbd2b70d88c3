package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// TestReservedWaitsForTheClaimsPower: a server bound a moment ago, before its claim handed over
// its power and boot configuration, is not powered at all (powering it on by default booted a
// claim that wanted its server off from disk); once the claim's power is there, it is requested.
func TestReservedWaitsForTheClaimsPower(t *testing.T) {
	ctx := context.Background()
	server := &m.Server{
		Spec: m.ServerSpec{SystemURI: "/redfish/v1/Systems/1",
			ServerClaimRef: &m.ObjectReference{Namespace: "tenant", Name: "cold", UID: "0b4d3c2a-0000-4000-8000-000000000001"}},
		Status: m.ServerStatus{State: m.ServerStateReserved},
	}
	// Another boot operator's claims: the power handover alone, without reading the claim
	// (which installs to disk need).
	r := Reconciler{Probe: probeboot.Config{BootOperator: "other-boot-operator"}}
	st, err := r.reserved(ctx, server)
	require.NoError(t, err)
	assert.Nil(t, st.effect.run, "no BMC action before the claim's power is known")
	assert.Empty(t, st.event)
	assert.Equal(t, m.ReasonWaitingForClaim, st.reason)
	assert.Contains(t, st.message, "tenant/cold")

	server.Spec.Power = m.PowerOff
	st, err = r.reserved(ctx, server)
	require.NoError(t, err)
	assert.NotNil(t, st.effect.run, "the claim's power is requested once handed over")
	require.NotNil(t, st.apply)
	st.apply(server)
	assert.Equal(t, m.ReasonPowerOffRequested, server.Status.Conditions[0].Reason)
}
