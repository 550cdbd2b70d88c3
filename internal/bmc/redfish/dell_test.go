package redfish_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestDellCdBootsTheVirtualCD: on an iDRAC (the simulator's Dell profile, whose Cd override
// boots the physical drive), a Cd boot set by the client boots the virtual CD, once or every
// time, through the Dell OEM import; the same override PATCHed the standard way (another
// client) boots the physical drive. A BMC of another vendor gets the standard PATCH.
func TestDellCdBootsTheVirtualCD(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileDell, Systems: []bmcsim.SystemSpec{testSystem(0)}})
	require.True(t, sim.Quirks().CdOverrideBootsPhysicalDrive)
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]
	boots := func() bmcsim.BootTarget {
		t.Helper()
		require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerForceRestart))
		log := sim.BootLog(sys.ID)
		require.NotEmpty(t, log)
		return log[len(log)-1].Boot
	}

	patch(t, sim, "/redfish/v1/Systems/"+sys.ID, map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
	assert.Equal(t, bmcsim.BootPhysicalCd, boots(), "the standard Cd override: iDRAC boots its physical drive")

	require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootCd, m.BootModeUEFI))
	target, enabled := sim.BootOverride(sys.ID)
	assert.Equal(t, bmcsim.BootCd, target)
	assert.Equal(t, "Once", enabled)
	assert.Equal(t, bmcsim.BootCd, boots(), "the virtual CD, once")
	assert.Equal(t, bmcsim.BootHdd, boots(), "then the disk")

	require.NoError(t, c.SetBootPersistent(ctx, sys.URI, bmc.BootCd, ""))
	assert.Equal(t, bmcsim.BootCd, boots())
	assert.Equal(t, bmcsim.BootCd, boots(), "the virtual CD, every boot")

	require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, m.BootModeUEFI))
	assert.Equal(t, bmcsim.BootPxe, boots(), "other targets: the standard override")

	generic := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
	gc := connect(t, generic)
	systems, err = gc.Systems(ctx)
	require.NoError(t, err)
	sys = systems[0]
	require.NoError(t, gc.SetBootOnce(ctx, sys.URI, bmc.BootCd, ""))
	assert.Equal(t, int64(1), generic.Stats().BootPatches, "the standard PATCH")
	require.NoError(t, gc.SetPower(ctx, sys.URI, bmc.PowerOn))
	log := generic.BootLog(sys.ID)
	require.NotEmpty(t, log)
	assert.Equal(t, bmcsim.BootCd, log[len(log)-1].Boot, "another vendor: the standard Cd override")
}
