package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestBootOnceMatchesSecureBootToTheSpec runs the probe boot's BMC effect against a simulated
// Redfish BMC: a server whose spec.bootMode is UEFISecureBoot, on a system with Secure Boot off,
// has SecureBootEnable set before the power-on, which applies it (the BMC then reports
// UEFISecureBoot); spec.bootMode UEFI turns it off again; no spec.bootMode leaves it alone; and
// a BMC without a SecureBoot resource is booted all the same.
func TestBootOnceMatchesSecureBootToTheSpec(t *testing.T) {
	ctx := context.Background()
	start := func(opts bmcsim.Options) (*bmcsim.BMC, bmc.Client, bmc.SystemInfo) {
		spec := bmcsim.DefaultSystem(0)
		spec.BootMode = bmcsim.BootModeUEFI
		opts.Username, opts.Password, opts.Systems = "admin", "secret", []bmcsim.SystemSpec{spec}
		sim, err := bmcsim.Start(opts)
		require.NoError(t, err)
		t.Cleanup(func() { _ = sim.Close() })
		addr, err := bmc.ParseAddress("redfish+http://" + sim.Host() + "/redfish/v1")
		require.NoError(t, err)
		c, err := redfish.Connect(ctx, bmc.Target{Address: addr, Credentials: bmc.Credentials{Username: "admin", Password: "secret"}}, redfish.Options{})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		systems, err := c.Systems(ctx)
		require.NoError(t, err)
		require.Len(t, systems, 1)
		return sim, c, systems[0]
	}
	server := func(uri string, mode m.BootMode) *m.Server {
		return &m.Server{Spec: m.ServerSpec{SystemURI: uri, BootMode: mode}, Status: m.ServerStatus{BootMode: m.BootModeUEFI}}
	}

	sim, c, sys := start(bmcsim.Options{})
	require.NoError(t, bootOnce(server(sys.URI, ""), bmc.BootPXE, "").run(ctx, c))
	enable, _ := sim.SecureBoot(sys.ID)
	assert.False(t, enable, "no spec.bootMode: the setting is left as found")

	require.NoError(t, bootOnce(server(sys.URI, m.BootModeUEFISecureBoot), bmc.BootPXE, "").run(ctx, c))
	enable, current := sim.SecureBoot(sys.ID)
	assert.True(t, enable, "SecureBootEnable set to match spec.bootMode")
	assert.True(t, current, "and applied by the restart that boots the probe")
	mode, err := c.BootMode(ctx, sys.URI)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFISecureBoot, mode)

	require.NoError(t, bootOnce(server(sys.URI, m.BootModeUEFI), bmc.BootPXE, "").run(ctx, c))
	enable, current = sim.SecureBoot(sys.ID)
	assert.False(t, enable, "spec.bootMode UEFI turns it off")
	assert.False(t, current)

	none, nc, nsys := start(bmcsim.Options{Profile: bmcsim.ProfileOpenBMC})
	require.NoError(t, bootOnce(server(nsys.URI, m.BootModeUEFISecureBoot), bmc.BootPXE, "").run(ctx, nc), "no SecureBoot resource: booted all the same")
	assert.Equal(t, "On", none.PowerState(nsys.ID))
}
