package bmcsim_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// firmwareSystems are two systems whose BIOS versions differ from every profile's default, so
// a member that shows them shows the model, not a profile's constant.
func firmwareSystems() []bmcsim.SystemSpec {
	a, b := bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)
	a.BIOSVersion, b.BIOSVersion = "2.1.0", "2.1.1"
	return []bmcsim.SystemSpec{a, b}
}

func TestGofishReadsTheFirmwareInventory(t *testing.T) {
	for _, tc := range []struct {
		profile bmcsim.Profile
		ids     []string // BMC, then each system's BIOS and first NIC (Dell: the previous BMC firmware second)
		sysIDs  []string
		mgrID   string
	}{
		{bmcsim.ProfileGeneric, []string{"1", "2", "3", "4", "5"}, []string{"1", "2"}, "BMC"},
		{bmcsim.ProfileHPE, []string{"1", "2", "3", "4", "5"}, []string{"1", "2"}, "1"},
		{bmcsim.ProfileSupermicro, []string{"BMC", "BIOS", "NIC", "BIOS_2", "NIC_2"}, []string{"1", "2"}, "1"},
		{bmcsim.ProfileDell, []string{
			"Installed-25227-9.9.9__iDRAC.Embedded.1-1", "Previous-25227-7.00.30.00__iDRAC.Embedded.1-1",
			"Installed-159-2.1.0__BIOS.Setup.1-1", "Installed-105008-22.31.6__NIC.Integrated.1-1-1",
			"Installed-159-2.1.1__BIOS.Setup.1-2", "Installed-105008-22.31.6__NIC.Integrated.2-1-1",
		}, []string{"System.Embedded.1", "System.Embedded.2"}, "iDRAC.Embedded.1"},
	} {
		t.Run(string(tc.profile), func(t *testing.T) {
			t.Parallel()
			b := start(t, bmcsim.Options{TLS: true, Profile: tc.profile, FirmwareVersion: "9.9.9", Systems: firmwareSystems()})
			c := connect(t, b, false)
			us, err := c.Service.UpdateService()
			require.NoError(t, err)
			members, err := us.FirmwareInventories()
			require.NoError(t, err)
			byID := map[string]*redfish.SoftwareInventory{}
			for _, f := range members {
				byID[f.ID] = f
				assert.Equal(t, 1, f.RelatedItemCount, "%s names what it is the firmware of", f.ID)
			}
			require.Len(t, byID, len(tc.ids))
			for _, id := range tc.ids {
				require.Contains(t, byID, id)
			}

			bmcFW := byID[tc.ids[0]]
			assert.Equal(t, "9.9.9", bmcFW.Version, "the BMC's firmware is the Manager's")
			assert.Equal(t, []string{"/redfish/v1/Managers/" + tc.mgrID}, relatedItems(t, b, bmcFW.ODataID))
			sysMembers := tc.ids[1:]
			if tc.profile == bmcsim.ProfileDell {
				assert.Equal(t, "7.00.30.00", byID[tc.ids[1]].Version)
				assert.Equal(t, "25227", byID[tc.ids[1]].SoftwareID)
				assert.Equal(t, "159", byID[tc.ids[2]].SoftwareID)
				sysMembers = tc.ids[2:]
			}
			for i, sysID := range tc.sysIDs {
				sys, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/"+sysID)
				require.NoError(t, err)
				bios, nic := byID[sysMembers[2*i]], byID[sysMembers[2*i+1]]
				assert.Equal(t, sys.BIOSVersion, bios.Version, "the BIOS member is the System's BiosVersion")
				assert.Equal(t, firmwareSystems()[i].BIOSVersion, bios.Version)
				sysURI := strings.TrimSuffix(sys.ODataID, "/")
				assert.Equal(t, []string{sysURI}, relatedItems(t, b, bios.ODataID))
				assert.Equal(t, "22.31.6", nic.Version)
				nicLink := relatedItems(t, b, nic.ODataID)
				require.Len(t, nicLink, 1)
				assert.True(t, strings.HasPrefix(nicLink[0], sysURI+"/EthernetInterfaces/"), nicLink[0])
				assert.NotContains(t, strings.ToLower(nic.Name), "bios")
			}
		})
	}
}

// relatedItems reads a member's RelatedItem links on the wire (gofish v0.20 keeps them
// unexported), without the trailing slash of the HPE profile.
func relatedItems(t *testing.T, b *bmcsim.BMC, uri string) []string {
	t.Helper()
	var out []string
	items, _ := getOK(t, b, uri)["RelatedItem"].([]any)
	for _, item := range items {
		out = append(out, strings.TrimSuffix(item.(map[string]any)["@odata.id"].(string), "/"))
	}
	return out
}

// biosOf reads a system's Bios through gofish.
func biosOf(t *testing.T, c *gofish.APIClient, systemURI string) *redfish.Bios {
	t.Helper()
	sys, err := redfish.GetComputerSystem(c, systemURI)
	require.NoError(t, err)
	bios, err := sys.Bios()
	require.NoError(t, err)
	require.NotNil(t, bios)
	return bios
}

// pendingOf reads what a system's Bios/Settings holds, through gofish (a Bios resource too).
func pendingOf(t *testing.T, c *gofish.APIClient, systemURI string) redfish.SettingsAttributes {
	t.Helper()
	settings, err := redfish.GetBios(c, strings.TrimSuffix(systemURI, "/")+"/Bios/Settings")
	require.NoError(t, err)
	return settings.Attributes
}

func TestGofishReadsBIOSSettingsAndTheirRegistry(t *testing.T) {
	for name, q := range map[string]bmcsim.Quirks{"": {}, "TrailingSlashIDs,LowercaseIDs": {TrailingSlashIDs: true, LowercaseIDs: true}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := start(t, bmcsim.Options{TLS: true, Quirks: &q, Systems: firmwareSystems()})
			c := connect(t, b, false)
			sys := walk(t, c).system(t, "1").System
			bios := biosOf(t, c, sys.ODataID)
			assert.Equal(t, "Uefi", bios.Attributes["BootMode"], "the generic profile boots UEFI")
			assert.Equal(t, "Enabled", bios.Attributes["ProcVirtualization"])
			assert.InDelta(t, 0, bios.Attributes["ProcCoreDisable"], 0)
			assert.Equal(t, "", bios.Attributes["AssetTag"])
			assert.Equal(t, "2.1.0", bios.Attributes["SystemBiosVersion"], "the BIOS's version, as the System says it")
			assert.Equal(t, "BiosAttributeRegistry.1.0.0", bios.AttributeRegistry)
			assert.Equal(t, []string{"OnReset"}, toStrings(bios.AllowedAttributeUpdateApplyTimes()))
			assert.Empty(t, pendingOf(t, c, sys.ODataID), "nothing staged")

			// The registry: its file is found by its Registry property, and its Location names
			// where the registry itself is.
			files, err := c.Service.Registries()
			require.NoError(t, err)
			var location string
			for _, f := range files {
				if f.Registry == bios.AttributeRegistry {
					require.Len(t, f.Location, 1)
					location = f.Location[0].URI
					assert.NotEqual(t, bios.AttributeRegistry, f.ID, "the file's Id is not the registry's name")
				}
			}
			require.NotEmpty(t, location, "a file for %s among %d", bios.AttributeRegistry, len(files))
			registry, err := redfish.GetAttributeRegistry(c, location)
			require.NoError(t, err)
			entries := map[string]redfish.Attribute{}
			for _, a := range registry.RegistryEntries.Attributes {
				entries[a.AttributeName] = a
			}
			for attr := range bios.Attributes {
				assert.Contains(t, entries, attr, "every attribute is in the registry")
			}
			virt := entries["ProcVirtualization"]
			assert.Equal(t, redfish.EnumerationAttributeType, virt.Type)
			assert.Equal(t, []redfish.AttributeValue{{ValueName: "Enabled", ValueDisplayName: "Enabled"}, {ValueName: "Disabled", ValueDisplayName: "Disabled"}}, virt.Value)
			cores := entries["ProcCoreDisable"]
			assert.Equal(t, redfish.IntegerAttributeType, cores.Type)
			assert.Equal(t, int64(0), cores.LowerBound)
			assert.Equal(t, int64(63), cores.UpperBound.Int64())
			assert.Equal(t, int64(32), entries["AssetTag"].MaxLength)
			assert.True(t, entries["SystemBiosVersion"].ReadOnly)
			assert.True(t, entries["BootMode"].ResetRequired)
		})
	}
}

func toStrings[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

// TestStagedBIOSSettingsApplyAtTheNextPowerOn stages settings through gofish and shows them
// staged, not applied, until the system powers on or resets; a power-off applies nothing.
func TestStagedBIOSSettingsApplyAtTheNextPowerOn(t *testing.T) {
	specs := firmwareSystems()
	specs[0].PowerState = "On"
	b := start(t, bmcsim.Options{TLS: true, Systems: specs})
	c := connect(t, b, false)
	sys, err := redfish.GetComputerSystem(c, "/redfish/v1/Systems/1")
	require.NoError(t, err)

	require.NoError(t, biosOf(t, c, sys.ODataID).UpdateBiosAttributesApplyAt(redfish.SettingsAttributes{
		"ProcVirtualization": "Disabled", "ProcCoreDisable": 4, "AssetTag": "rack-7", "BootMode": "Bios",
	}, "OnReset"))
	staged := map[string]any{"ProcVirtualization": "Disabled", "ProcCoreDisable": float64(4), "AssetTag": "rack-7", "BootMode": "Bios"}
	assert.Equal(t, staged, map[string]any(pendingOf(t, c, sys.ODataID)), "GET Settings shows what is staged")
	bios := biosOf(t, c, sys.ODataID)
	assert.Equal(t, "Enabled", bios.Attributes["ProcVirtualization"], "not applied while the system runs")
	assert.Equal(t, "Uefi", bios.Attributes["BootMode"])

	require.NoError(t, sys.Reset(redfish.ForceOffResetType))
	assert.Equal(t, "Enabled", biosOf(t, c, sys.ODataID).Attributes["ProcVirtualization"], "a power-off applies nothing")
	assert.Len(t, pendingOf(t, c, sys.ODataID), 4, "still staged")

	require.NoError(t, sys.Reset(redfish.OnResetType))
	bios = biosOf(t, c, sys.ODataID)
	assert.Equal(t, "Disabled", bios.Attributes["ProcVirtualization"], "applied at the power-on")
	assert.InDelta(t, 4, bios.Attributes["ProcCoreDisable"], 0)
	assert.Equal(t, "rack-7", bios.Attributes["AssetTag"])
	assert.Equal(t, "Bios", bios.Attributes["BootMode"])
	assert.Empty(t, pendingOf(t, c, sys.ODataID), "the Settings object empties")
	log := b.BootLog("1")
	require.NotEmpty(t, log)
	assert.Equal(t, bmcsim.BootModeLegacy, log[len(log)-1].BootMode, "the power-on that applied BootMode boots in it")
	sys, err = redfish.GetComputerSystem(c, sys.ODataID)
	require.NoError(t, err)
	assert.Equal(t, redfish.LegacyBootSourceOverrideMode, sys.Boot.BootSourceOverrideMode)

	// A restart of a running system applies too; staging twice merges.
	require.NoError(t, biosOf(t, c, sys.ODataID).UpdateBiosAttributes(redfish.SettingsAttributes{"ProcVirtualization": "Enabled"}))
	require.NoError(t, biosOf(t, c, sys.ODataID).UpdateBiosAttributes(redfish.SettingsAttributes{"SriovGlobalEnable": "Enabled"}))
	assert.Len(t, pendingOf(t, c, sys.ODataID), 2)
	require.NoError(t, sys.Reset(redfish.ForceRestartResetType))
	bios = biosOf(t, c, sys.ODataID)
	assert.Equal(t, "Enabled", bios.Attributes["ProcVirtualization"])
	assert.Equal(t, "Enabled", bios.Attributes["SriovGlobalEnable"])
	assert.Equal(t, "Disabled", biosOf(t, c, "/redfish/v1/Systems/2").Attributes["SriovGlobalEnable"], "the other system's are its own")
}

func TestBIOSSettingsPatchIsValidated(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})
	const settings = "/redfish/v1/Systems/1/Bios/Settings"
	for _, tc := range []struct {
		name      string
		body      any
		messageID string
		names     string // what the message must name
	}{
		{"unknown attribute", map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled", "NoSuchThing": 1}}, "Base.1.8.PropertyUnknown", "NoSuchThing"},
		{"read-only attribute", map[string]any{"Attributes": map[string]any{"SystemBiosVersion": "9"}}, "Base.1.8.PropertyNotWritable", "SystemBiosVersion"},
		{"value not in the enumeration", map[string]any{"Attributes": map[string]any{"ProcVirtualization": "On"}}, "Base.1.8.PropertyValueNotInList", "ProcVirtualization"},
		{"integer out of bounds", map[string]any{"Attributes": map[string]any{"ProcCoreDisable": 64}}, "Base.1.8.PropertyValueFormatError", "ProcCoreDisable"},
		{"integer as a string", map[string]any{"Attributes": map[string]any{"ProcCoreDisable": "4"}}, "Base.1.8.PropertyValueTypeError", "ProcCoreDisable"},
		{"fractional integer", map[string]any{"Attributes": map[string]any{"ProcCoreDisable": 1.5}}, "Base.1.8.PropertyValueTypeError", "ProcCoreDisable"},
		{"string too long", map[string]any{"Attributes": map[string]any{"AssetTag": strings.Repeat("x", 33)}}, "Base.1.8.PropertyValueFormatError", "AssetTag"},
		{"string not matching its expression", map[string]any{"Attributes": map[string]any{"AssetTag": "tab\there"}}, "Base.1.8.PropertyValueFormatError", "AssetTag"},
		{"enumeration as a number", map[string]any{"Attributes": map[string]any{"BootMode": 1}}, "Base.1.8.PropertyValueTypeError", "BootMode"},
		{"attributes not an object", map[string]any{"Attributes": []string{"BootMode"}}, "Base.1.8.PropertyValueTypeError", "Attributes"},
		{"no attributes", map[string]any{}, "Base.1.8.PropertyMissing", "Attributes"},
		{"another property", map[string]any{"Attributes": map[string]any{}, "AttributeRegistry": "x"}, "Base.1.8.PropertyNotWritable", "AttributeRegistry"},
		{"apply time other than OnReset", map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled"},
			"@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "Immediate"}}, "Base.1.8.PropertyValueNotInList", "ApplyTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := call(t, b, http.MethodPatch, settings, tc.body)
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, tc.messageID, messageID(body))
			assert.Contains(t, fmtBody(body), tc.names)
		})
	}
	assert.Empty(t, getOK(t, b, settings)["Attributes"], "nothing refused was staged, not even the valid part")

	status, _, _ := call(t, b, http.MethodPatch, settings, map[string]any{"Attributes": map[string]any{"ProcCoreDisable": 63, "AssetTag": "A-1 b"},
		"@Redfish.SettingsApplyTime": map[string]string{"ApplyTime": "OnReset"}})
	assert.Equal(t, http.StatusNoContent, status, "bounds are inclusive")
	status, hdr, _ := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1/Bios", map[string]any{"Attributes": map[string]any{"AssetTag": "x"}})
	assert.Equal(t, http.StatusMethodNotAllowed, status, "the Bios resource is changed through its Settings object")
	assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))
}

// fmtBody is a Redfish error's messages and arguments, for assertions on what it names.
func fmtBody(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	var parts []string
	for _, info := range infos {
		i := info.(map[string]any)
		parts = append(parts, i["Message"].(string))
		for _, arg := range i["MessageArgs"].([]any) {
			parts = append(parts, arg.(string))
		}
	}
	return strings.Join(parts, " | ")
}
