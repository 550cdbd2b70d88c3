package redfish_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestBootModeIsReadFromTheBMC: the mode a simulated system boots in, read over HTTPS through
// BootMode and with the inventory: BootSourceOverrideMode, and the SecureBoot resource where
// the system links one. A BMC without one (the OpenBMC profile, the NoSecureBoot quirk) gives
// UEFI or Legacy from the override mode, without an error, even for a machine that enforces
// Secure Boot: the BMC cannot tell.
func TestBootModeIsReadFromTheBMC(t *testing.T) {
	for name, tc := range map[string]struct {
		profile bmcsim.Profile
		quirks  *bmcsim.Quirks
		mode    string
		want    m.BootMode
	}{
		"UEFI":                               {mode: bmcsim.BootModeUEFI, want: m.BootModeUEFI},
		"UEFI with Secure Boot":              {mode: bmcsim.BootModeUEFISecureBoot, want: m.BootModeUEFISecureBoot},
		"Legacy":                             {mode: bmcsim.BootModeLegacy, want: m.BootModeLegacy},
		"Dell, Secure Boot":                  {profile: bmcsim.ProfileDell, mode: bmcsim.BootModeUEFISecureBoot, want: m.BootModeUEFISecureBoot},
		"Supermicro, the profile's Legacy":   {profile: bmcsim.ProfileSupermicro, want: m.BootModeLegacy},
		"no SecureBoot resource (OpenBMC)":   {profile: bmcsim.ProfileOpenBMC, mode: bmcsim.BootModeUEFISecureBoot, want: m.BootModeUEFI},
		"no SecureBoot resource, Legacy":     {profile: bmcsim.ProfileOpenBMC, mode: bmcsim.BootModeLegacy, want: m.BootModeLegacy},
		"no SecureBoot resource (the quirk)": {quirks: &bmcsim.Quirks{NoSecureBoot: true}, mode: bmcsim.BootModeUEFI, want: m.BootModeUEFI},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			spec := testSystem(0)
			spec.BootMode = tc.mode
			sim := startSim(t, bmcsim.Options{Profile: tc.profile, Quirks: tc.quirks, Systems: []bmcsim.SystemSpec{spec}})
			c := connect(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			require.Len(t, systems, 1)

			got, err := c.BootMode(ctx, systems[0].URI)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			inv, err := c.Inventory(ctx, systems[0].URI)
			require.NoError(t, err)
			assert.Equal(t, tc.want, inv.BootMode, "the inventory carries it too")
		})
	}
}

// TestSecureBootCountsFromThePowerOnThatAppliesIt: UEFISecureBoot needs the setting and the
// current boot to agree: a setting turned on since the last power-on does not count until the
// power-on that applies it, and one turned off counts at once (the next boot is without it).
func TestSecureBootCountsFromThePowerOnThatAppliesIt(t *testing.T) {
	ctx := context.Background()
	spec := testSystem(0)
	spec.BootMode = bmcsim.BootModeUEFISecureBoot
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{spec}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	uri := systems[0].URI
	secureBoot := uri + "/SecureBoot"

	patch(t, sim, secureBoot, map[string]any{"SecureBootEnable": false})
	got, err := c.BootMode(ctx, uri)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFI, got, "disabled for the next boot, though this one still enforces it")
	require.NoError(t, c.SetPower(ctx, uri, bmc.PowerOn))
	got, err = c.BootMode(ctx, uri)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFI, got)

	patch(t, sim, secureBoot, map[string]any{"SecureBootEnable": true})
	got, err = c.BootMode(ctx, uri)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFI, got, "enabled for the next boot: not yet")
	require.NoError(t, c.SetPower(ctx, uri, bmc.PowerForceRestart))
	got, err = c.BootMode(ctx, uri)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFISecureBoot, got)
}

// TestBootOverrideFollowsTheMode: a mode given to SetBootOnce/SetBootPersistent sets
// BootSourceOverrideMode (UEFI for UEFISecureBoot) when it differs; no mode leaves it; a BMC
// that refuses to PATCH the mode (iDRAC) still gets the boot override, in its own mode, and one
// whose mode is already right is sent none (one PATCH).
func TestBootOverrideFollowsTheMode(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{testSystem(0)}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]

	require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, m.BootModeLegacy))
	assert.Equal(t, bmcsim.BootModeLegacy, sim.BootMode(sys.ID))
	target, enabled := sim.BootOverride(sys.ID)
	assert.Equal(t, bmcsim.BootTarget("Pxe"), target)
	assert.Equal(t, "Once", enabled)
	require.NoError(t, c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, ""))
	assert.Equal(t, bmcsim.BootModeLegacy, sim.BootMode(sys.ID), "no mode: left as it is")
	require.NoError(t, c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, m.BootModeUEFISecureBoot))
	assert.Equal(t, bmcsim.BootModeUEFI, sim.BootMode(sys.ID), "UEFISecureBoot boots the UEFI override")
	got, err := c.BootMode(ctx, sys.URI)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFI, got)

	dell := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileDell, Systems: []bmcsim.SystemSpec{testSystem(0)}})
	require.True(t, dell.Quirks().RejectBootModePatch)
	dc := connect(t, dell)
	systems, err = dc.Systems(ctx)
	require.NoError(t, err)
	sys = systems[0]
	dell.ResetStats()
	require.NoError(t, dc.SetBootOnce(ctx, sys.URI, bmc.BootPXE, m.BootModeUEFI))
	assert.Equal(t, int64(1), dell.Stats().BootPatches, "already UEFI: no mode sent, nothing refused")
	require.NoError(t, dc.SetBootOnce(ctx, sys.URI, bmc.BootPXE, m.BootModeLegacy), "the mode refused: sent again without it")
	target, enabled = dell.BootOverride(sys.ID)
	assert.Equal(t, bmcsim.BootTarget("Pxe"), target)
	assert.Equal(t, "Once", enabled)
	assert.Equal(t, bmcsim.BootModeUEFI, dell.BootMode(sys.ID), "the firmware's own mode")
}

// patch PATCHes body to a simulator's resource, as another client (a person at the BMC's web
// page) would.
func patch(t *testing.T, sim *bmcsim.BMC, path string, body any) {
	t.Helper()
	data, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPatch, "https://"+sim.Host()+path, bytes.NewReader(data))
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: trusting(sim).RootCAs}}}
	resp, err := hc.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "PATCH %s", path)
}

// TestSetSecureBootPatchesTheSecureBootResource: SetSecureBoot turns a system's Secure Boot on
// for its next boot (the simulator applies it at the power-on), answers "unchanged" when it is
// already so, turns it off again, and answers ErrUnsupported on a BMC without the resource.
func TestSetSecureBootPatchesTheSecureBootResource(t *testing.T) {
	ctx := context.Background()
	spec := testSystem(0)
	spec.BootMode = bmcsim.BootModeUEFI
	sim := startSim(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{spec}})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	uri, id := systems[0].URI, systems[0].ID

	changed, err := c.SetSecureBoot(ctx, uri, true)
	require.NoError(t, err)
	assert.True(t, changed)
	enable, current := sim.SecureBoot(id)
	assert.True(t, enable, "SecureBootEnable patched")
	assert.False(t, current, "not before the power-on that applies it")
	require.NoError(t, c.SetPower(ctx, uri, bmc.PowerOn))
	got, err := c.BootMode(ctx, uri)
	require.NoError(t, err)
	assert.Equal(t, m.BootModeUEFISecureBoot, got, "the power-on applied it")
	changed, err = c.SetSecureBoot(ctx, uri, true)
	require.NoError(t, err)
	assert.False(t, changed, "already on: no PATCH")

	changed, err = c.SetSecureBoot(ctx, uri, false)
	require.NoError(t, err)
	assert.True(t, changed)
	enable, _ = sim.SecureBoot(id)
	assert.False(t, enable)

	none := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileOpenBMC, Systems: []bmcsim.SystemSpec{testSystem(0)}})
	nc := connect(t, none)
	systems, err = nc.Systems(ctx)
	require.NoError(t, err)
	_, err = nc.SetSecureBoot(ctx, systems[0].URI, true)
	assert.ErrorIs(t, err, bmc.ErrUnsupported)
}
