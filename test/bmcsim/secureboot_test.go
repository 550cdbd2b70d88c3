package bmcsim_test

import (
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestSystemSpecBootModes: each SystemSpec.BootMode shows on the wire as a client reads it
// (BootSourceOverrideMode, the linked SecureBoot resource) and through gofish; empty is the
// profile's override mode with Secure Boot off.
func TestSystemSpecBootModes(t *testing.T) {
	for _, tc := range []struct {
		profile               bmcsim.Profile
		mode                  string
		override, currentBoot string
		enable                bool
		want                  string
	}{
		{bmcsim.ProfileGeneric, bmcsim.BootModeUEFISecureBoot, "UEFI", "Enabled", true, bmcsim.BootModeUEFISecureBoot},
		{bmcsim.ProfileGeneric, bmcsim.BootModeUEFI, "UEFI", "Disabled", false, bmcsim.BootModeUEFI},
		{bmcsim.ProfileGeneric, bmcsim.BootModeLegacy, "Legacy", "Disabled", false, bmcsim.BootModeLegacy},
		{bmcsim.ProfileGeneric, "", "UEFI", "Disabled", false, bmcsim.BootModeUEFI},
		{bmcsim.ProfileSupermicro, "", "Legacy", "Disabled", false, bmcsim.BootModeLegacy},
		{bmcsim.ProfileDell, bmcsim.BootModeUEFISecureBoot, "UEFI", "Enabled", true, bmcsim.BootModeUEFISecureBoot},
	} {
		t.Run(string(tc.profile)+"/"+tc.mode, func(t *testing.T) {
			spec := bmcsim.DefaultSystem(1)
			spec.BootMode = tc.mode
			b := start(t, bmcsim.Options{Profile: tc.profile, Systems: []bmcsim.SystemSpec{spec}})
			id := b.SystemIDs()[0]
			sys := getOK(t, b, "/redfish/v1/Systems/"+id)
			assert.Equal(t, tc.override, sys["Boot"].(map[string]any)["BootSourceOverrideMode"])
			link, ok := sys["SecureBoot"].(map[string]any)
			require.True(t, ok, "the system links its SecureBoot resource")
			sb := getOK(t, b, link["@odata.id"].(string))
			assert.Equal(t, tc.enable, sb["SecureBootEnable"])
			assert.Equal(t, tc.currentBoot, sb["SecureBootCurrentBoot"])
			assert.Equal(t, "UserMode", sb["SecureBootMode"])
			assert.Equal(t, tc.want, b.BootMode(id))

			gs, err := redfish.GetComputerSystem(connect(t, b, true), "/redfish/v1/Systems/"+id)
			require.NoError(t, err)
			secureBoot, err := gs.SecureBoot()
			require.NoError(t, err)
			require.NotNil(t, secureBoot, "gofish follows the link")
			assert.Equal(t, tc.enable, secureBoot.SecureBootEnable)
			assert.Equal(t, redfish.SecureBootCurrentBootType(tc.currentBoot), secureBoot.SecureBootCurrentBoot)
		})
	}
	_, err := bmcsim.Start(bmcsim.Options{Systems: []bmcsim.SystemSpec{{BootMode: "BIOS"}}})
	assert.ErrorContains(t, err, "BootMode")
}

// TestSecureBootEnableTakesEffectAtTheNextPowerOn: a PATCH of SecureBootEnable is accepted and
// pending (SecureBootCurrentBoot keeps the running boot's state) until the system powers on or
// restarts; only SecureBootEnable is writable; a Legacy boot never runs Secure Boot.
func TestSecureBootEnableTakesEffectAtTheNextPowerOn(t *testing.T) {
	b := start(t, bmcsim.Options{Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(1)}})
	var mu sync.Mutex
	var ons []bmcsim.PowerOnEvent
	b.OnPowerOn(func(ev bmcsim.PowerOnEvent) { mu.Lock(); ons = append(ons, ev); mu.Unlock() })
	powerOns := func() []bmcsim.PowerOnEvent { mu.Lock(); defer mu.Unlock(); return slices.Clone(ons) }
	const path = "/redfish/v1/Systems/1/SecureBoot"
	patch := func(body any) int {
		status, _, _ := call(t, b, http.MethodPatch, path, body)
		return status
	}
	reset := func(resetType string) {
		status, _, _ := call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": resetType})
		require.Equal(t, http.StatusNoContent, status)
	}

	require.Equal(t, http.StatusNoContent, patch(map[string]any{"SecureBootEnable": true}))
	sb := getOK(t, b, path)
	assert.Equal(t, true, sb["SecureBootEnable"])
	assert.Equal(t, "Disabled", sb["SecureBootCurrentBoot"], "pending until the next power-on")
	assert.Equal(t, bmcsim.BootModeUEFI, b.BootMode("1"))

	reset("On")
	assert.Equal(t, "Enabled", getOK(t, b, path)["SecureBootCurrentBoot"])
	assert.Equal(t, bmcsim.BootModeUEFISecureBoot, b.BootMode("1"))
	require.Len(t, powerOns(), 1)
	assert.Equal(t, bmcsim.BootModeUEFISecureBoot, powerOns()[0].BootMode, "the host is told the mode it boots in")

	require.Equal(t, http.StatusNoContent, patch(map[string]any{"SecureBootEnable": false}))
	enable, current := b.SecureBoot("1")
	assert.False(t, enable)
	assert.True(t, current, "the running boot keeps Secure Boot")
	reset("ForceRestart")
	assert.Equal(t, "Disabled", getOK(t, b, path)["SecureBootCurrentBoot"], "a restart applies it")
	require.Len(t, powerOns(), 2)
	assert.Equal(t, bmcsim.BootModeUEFI, powerOns()[1].BootMode)

	for _, bad := range []any{
		map[string]any{"SecureBootCurrentBoot": "Enabled"},
		map[string]any{"SecureBootMode": "SetupMode"},
		map[string]any{"SecureBootEnable": "yes"},
	} {
		assert.Equal(t, http.StatusBadRequest, patch(bad), "%v", bad)
	}

	// Enabled in Legacy mode: the setting is kept, the boot runs without it.
	require.Equal(t, http.StatusNoContent, patch(map[string]any{"SecureBootEnable": true}))
	status, _, _ := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]string{"BootSourceOverrideMode": "Legacy"}})
	require.Equal(t, http.StatusNoContent, status)
	reset("ForceRestart")
	assert.Equal(t, "Disabled", getOK(t, b, path)["SecureBootCurrentBoot"])
	assert.Equal(t, bmcsim.BootModeLegacy, b.BootMode("1"))
}
