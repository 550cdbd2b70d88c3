package redfish_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestHealthOfTheSimulator: a healthy system costs the System and its chassis (its roll-up
// stands for its parts); a failing DIMM and drive show in the roll-up, and only they are
// listed, with their kind and health; the other system of the BMC stays OK.
func TestHealthOfTheSimulator(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	byID := map[string]string{}
	for _, s := range systems {
		byID[s.ID] = s.URI
	}
	first, second := byID[sim.SystemIDs()[0]], byID[sim.SystemIDs()[1]]

	before := sim.Stats().Requests
	h, err := c.Health(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, bmc.Health{Rollup: bmc.HealthOK}, h)
	assert.LessOrEqual(t, sim.Stats().Requests-before, int64(2), "the System and its chassis, no member")

	require.NoError(t, sim.SetHealth(sim.SystemIDs()[0], "Memory/DIMM1", "Critical"))
	require.NoError(t, sim.SetHealth(sim.SystemIDs()[0], "Storage/1/Drives/Disk1", "Warning"))
	h, err = c.Health(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, bmc.HealthCritical, h.Rollup)
	var got []string
	for _, p := range h.Components {
		got = append(got, p.Kind+" "+p.Name+" "+string(p.Health))
	}
	assert.ElementsMatch(t, []string{"Memory DIMM1 Critical", "Drive Disk1 Warning"}, got)

	h, err = c.Health(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, bmc.Health{Rollup: bmc.HealthOK}, h, "the other system's parts are its own")

	require.NoError(t, sim.SetHealth(sim.SystemIDs()[0], "Memory/DIMM1", "OK"))
	require.NoError(t, sim.SetHealth(sim.SystemIDs()[0], "Storage/1/Drives/Disk1", "OK"))
	h, err = c.Health(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, bmc.Health{Rollup: bmc.HealthOK}, h, "repaired")
	require.Error(t, sim.SetHealth(sim.SystemIDs()[0], "Memory/DIMM1", "Broken"), "only Redfish's health words")
}

// TestHealthOfTheDMTFMockup: DMTF's public-rackmount1 rolls its System up OK, while its
// chassis' power supply in bay 1 is in Warning (the empty bay 2 is Absent; CPU2's disabled
// temperature sensor says nothing): the chassis' power and thermal parts are read whatever the
// System's roll-up says.
func TestHealthOfTheDMTFMockup(t *testing.T) {
	c := startMockup(t, mockupDir(t))
	h, err := c.Health(context.Background(), "/redfish/v1/Systems/437XR1138R2")
	require.NoError(t, err)
	assert.Equal(t, bmc.HealthWarning, h.Rollup)
	require.Len(t, h.Components, 1, "%+v", h.Components)
	assert.Equal(t, bmc.ComponentHealth{Kind: "PowerSupply", Name: "Bay1", URI: "/redfish/v1/Chassis/1U/PowerSubsystem/PowerSupplies/Bay1", Health: bmc.HealthWarning}, h.Components[0])
}
