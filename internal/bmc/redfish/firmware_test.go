package redfish_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// byClass groups an inventory's components by class.
func byClass(components []bmc.FirmwareComponent) map[bmc.ComponentClass][]bmc.FirmwareComponent {
	out := map[bmc.ComponentClass][]bmc.FirmwareComponent{}
	for _, c := range components {
		out[c.Class] = append(out[c.Class], c)
	}
	return out
}

// TestFirmwareInventoryOfEachVendor reads the simulator's inventory in each Id style (numbered,
// iDRAC's Installed-/Previous-, Supermicro's BIOS/BMC) on a BMC of two systems: each system
// gets its own BIOS and NIC, and the BMC's firmware, classified.
func TestFirmwareInventoryOfEachVendor(t *testing.T) {
	for _, profile := range []bmcsim.Profile{bmcsim.ProfileGeneric, bmcsim.ProfileHPE, bmcsim.ProfileDell, bmcsim.ProfileSupermicro} {
		t.Run(string(profile), func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, bmcsim.Options{Profile: profile, FirmwareVersion: "9.9.9"})
			c := connect(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			require.Len(t, systems, 2)
			for _, sys := range systems {
				inv, err := c.FirmwareInventory(ctx, sys.URI)
				require.NoError(t, err)
				require.True(t, slices.IsSortedFunc(inv, func(a, b bmc.FirmwareComponent) int { return strings.Compare(a.ID, b.ID) }), "sorted by Id")
				classes := byClass(inv)

				require.Len(t, classes[bmc.ComponentBIOS], 1, "this system's BIOS only: %+v", inv)
				bios := classes[bmc.ComponentBIOS][0]
				assert.Equal(t, sys.BIOSVersion, bios.Version)
				assert.True(t, bios.Installed)
				assert.True(t, bios.Updateable)
				require.Len(t, bios.RelatedItems, 1)
				assert.Equal(t, strings.TrimSuffix(sys.URI, "/"), strings.TrimSuffix(bios.RelatedItems[0], "/"))

				var installed, previous []bmc.FirmwareComponent
				for _, f := range classes[bmc.ComponentBMC] {
					if f.Installed {
						installed = append(installed, f)
					} else {
						previous = append(previous, f)
					}
				}
				require.Len(t, installed, 1)
				assert.Equal(t, "9.9.9", installed[0].Version)
				if profile == bmcsim.ProfileDell {
					require.Len(t, previous, 1, "iDRAC lists the firmware it ran before")
					assert.Equal(t, "7.00.30.00", previous[0].Version)
					assert.True(t, strings.HasPrefix(previous[0].ID, "Previous-25227-"))
					assert.True(t, strings.HasPrefix(bios.ID, "Installed-159-"))
				} else {
					assert.Empty(t, previous)
				}
				if profile == bmcsim.ProfileSupermicro {
					assert.Equal(t, "BMC", installed[0].ID)
				}

				require.Len(t, classes[bmc.ComponentOther], 1, "the system's NIC")
				nic := classes[bmc.ComponentOther][0]
				assert.Equal(t, "22.31.6", nic.Version)
				assert.Contains(t, strings.ToLower(nic.RelatedItems[0]), strings.ToLower(sys.ID)+"/ethernetinterfaces/")
				assert.Len(t, inv, 3+len(previous), "nothing of the other system")
			}
		})
	}
}

func TestBIOSSettingsOfTheSimulator(t *testing.T) {
	for name, opts := range map[string]bmcsim.Options{
		"generic":                          {},
		"supermicro":                       {Profile: bmcsim.ProfileSupermicro},
		"dell":                             {Profile: bmcsim.ProfileDell},
		"links in lower case with a slash": {Quirks: &bmcsim.Quirks{LowercaseIDs: true, TrailingSlashIDs: true}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, opts)
			c := connect(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			sys := systems[0]
			for _, s := range systems {
				if s.ID == sim.SystemIDs()[0] {
					sys = s
				}
			}

			settings, err := c.BIOSSettings(ctx, sys.URI)
			require.NoError(t, err)
			wantMode := "Uefi"
			if opts.Profile == bmcsim.ProfileSupermicro {
				wantMode = "Bios" // the profile boots Legacy
			}
			assert.Equal(t, map[string]string{
				"BootMode": wantMode, "ProcVirtualization": "Enabled", "SriovGlobalEnable": "Disabled",
				"ProcCoreDisable": "0", "AssetTag": "", "SystemBiosVersion": sys.BIOSVersion,
			}, settings.Current)
			assert.Nil(t, settings.Pending, "nothing staged")

			reg := settings.Registry
			require.NotNil(t, reg)
			assert.Equal(t, "BiosAttributeRegistry.1.0.0", reg.Name)
			assert.Len(t, reg.Attributes, len(settings.Current), "every attribute is defined")
			virt := reg.Attributes["ProcVirtualization"]
			assert.Equal(t, bmc.AttributeEnumeration, virt.Type)
			assert.Equal(t, []string{"Enabled", "Disabled"}, virt.AllowedValues)
			assert.True(t, virt.ResetRequired)
			assert.False(t, virt.ReadOnly)
			cores := reg.Attributes["ProcCoreDisable"]
			assert.Equal(t, bmc.AttributeInteger, cores.Type)
			require.NotNil(t, cores.LowerBound, "a bound of 0 is a bound")
			require.NotNil(t, cores.UpperBound)
			assert.Equal(t, int64(0), *cores.LowerBound)
			assert.Equal(t, int64(63), *cores.UpperBound)
			assert.Nil(t, cores.MaxLength, "an integer has no length")
			tag := reg.Attributes["AssetTag"]
			assert.Equal(t, bmc.AttributeString, tag.Type)
			require.NotNil(t, tag.MaxLength)
			assert.Equal(t, int64(32), *tag.MaxLength)
			assert.Equal(t, "^[ -~]*$", tag.ValueExpression)
			assert.Nil(t, tag.LowerBound)
			assert.True(t, reg.Attributes["SystemBiosVersion"].ReadOnly)

			// Staged settings are pending until the system's next power-on, then current.
			patch(t, sim, strings.TrimSuffix(sys.URI, "/")+"/Bios/Settings",
				map[string]any{"Attributes": map[string]any{"ProcVirtualization": "Disabled", "ProcCoreDisable": 4, "AssetTag": ""}})
			settings, err = c.BIOSSettings(ctx, sys.URI)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"ProcVirtualization": "Disabled", "ProcCoreDisable": "4"}, settings.Pending,
				"a staged value equal to the current one changes nothing, and is not pending")
			assert.Equal(t, "Enabled", settings.Current["ProcVirtualization"])

			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			settings, err = c.BIOSSettings(ctx, sys.URI)
			require.NoError(t, err)
			assert.Nil(t, settings.Pending)
			assert.Equal(t, "Disabled", settings.Current["ProcVirtualization"])
			assert.Equal(t, "4", settings.Current["ProcCoreDisable"])
		})
	}
}

// TestFirmwareAndBIOSOfTheDMTFMockup reads what DMTF's public-rackmount1 holds: an UpdateService
// whose FirmwareInventory lists BMC, SS and BIOS (it says Members@odata.count 2; an AC-RoT0
// member exists but is not listed, so it is not read), and a Bios with a Settings object that
// holds every attribute, naming a registry (BiosAttributeRegistryP89.v1_0_0) the mockup does
// not publish: its Registries list the Base message registry only.
func TestFirmwareAndBIOSOfTheDMTFMockup(t *testing.T) {
	dir := mockupDir(t)
	sim, err := bmcsim.StartStatic(dir, true)
	require.NoError(t, err)
	defer sim.Close()
	c := connect(t, sim)
	ctx := context.Background()
	const system = "/redfish/v1/Systems/437XR1138R2"

	inv, err := c.FirmwareInventory(ctx, system)
	require.NoError(t, err)
	assert.Equal(t, []bmc.FirmwareComponent{
		{ID: "BIOS", URI: "/redfish/v1/UpdateService/FirmwareInventory/BIOS", Name: "Contoso BIOS Firmware", Version: "P79 v1.45",
			Updateable: true, Class: bmc.ComponentBIOS, RelatedItems: []string{system}, Installed: true},
		{ID: "BMC", URI: "/redfish/v1/UpdateService/FirmwareInventory/BMC", Name: "Contoso BMC Firmware", Version: "1.45.455b66-rev4",
			Updateable: true, Class: bmc.ComponentBMC, RelatedItems: []string{"/redfish/v1/Managers/BMC"}, Installed: true},
		{ID: "SS", URI: "/redfish/v1/UpdateService/FirmwareInventory/SS", Name: "Contoso Simple Storage Firmware", Version: "2.50",
			Updateable: true, Class: bmc.ComponentOther, RelatedItems: []string{system + "/SimpleStorage/1"}, Installed: true},
	}, inv)

	settings, err := c.BIOSSettings(ctx, system)
	require.NoError(t, err)
	var bios struct{ Attributes map[string]any }
	raw, err := os.ReadFile(filepath.Join(dir, "Systems", "437XR1138R2", "Bios", "index.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &bios))
	require.Len(t, settings.Current, len(bios.Attributes))
	assert.Equal(t, "Uefi", settings.Current["BootMode"])
	assert.Equal(t, "0", settings.Current["ProcCoreDisable"], "an integer in decimal")
	assert.Equal(t, "", settings.Current["AdminPhone"])
	assert.Equal(t, map[string]string{
		"AdminPhone": "(404) 555-1212", "EmbeddedSata": "Ahci", "NicBoot2": "NetworkBoot", "ProcTurboMode": "Disabled",
	}, settings.Pending, "the Settings object's attributes that differ from the current ones")
	assert.Nil(t, settings.Registry, "the registry is not published: not an error")
}

// mockupCopy copies the DMTF mockup into a temporary directory for a test to change.
func mockupCopy(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "mockup")
	require.NoError(t, os.CopyFS(dst, os.DirFS(mockupDir(t))))
	return dst
}

// editJSON rewrites a mockup resource's index.json.
func editJSON(t *testing.T, dir, resource string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(resource), "index.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	edit(doc)
	raw, err = json.Marshal(doc)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o600))
}

// writeResource adds a mockup resource.
func writeResource(t *testing.T, dir, resource, body string) {
	t.Helper()
	path := filepath.Join(dir, filepath.FromSlash(resource), "index.json")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(body), 0o600))
}

func startMockup(t *testing.T, dir string) *redfish.Client {
	t.Helper()
	sim, err := bmcsim.StartStatic(dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return connect(t, sim)
}

func TestFirmwareReaderUnsupported(t *testing.T) {
	ctx := context.Background()
	const system = "/redfish/v1/Systems/437XR1138R2"
	unsupported := func(t *testing.T, err error, says string) {
		t.Helper()
		require.ErrorIs(t, err, bmc.ErrUnsupported)
		assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
		assert.Contains(t, err.Error(), says)
	}

	t.Run("no UpdateService", func(t *testing.T) {
		dir := mockupCopy(t)
		editJSON(t, dir, ".", func(root map[string]any) { delete(root, "UpdateService") })
		_, err := startMockup(t, dir).FirmwareInventory(ctx, system)
		unsupported(t, err, "no UpdateService")
	})
	t.Run("no FirmwareInventory", func(t *testing.T) {
		dir := mockupCopy(t)
		editJSON(t, dir, "UpdateService", func(us map[string]any) { delete(us, "FirmwareInventory") })
		_, err := startMockup(t, dir).FirmwareInventory(ctx, system)
		unsupported(t, err, "no FirmwareInventory")
	})
	t.Run("no Bios", func(t *testing.T) {
		dir := mockupCopy(t)
		editJSON(t, dir, "Systems/437XR1138R2", func(s map[string]any) { delete(s, "Bios") })
		_, err := startMockup(t, dir).BIOSSettings(ctx, system)
		unsupported(t, err, "no Bios")
	})
	t.Run("a member that fails to read", func(t *testing.T) {
		dir := mockupCopy(t)
		require.NoError(t, os.RemoveAll(filepath.Join(dir, "UpdateService", "FirmwareInventory", "SS")))
		_, err := startMockup(t, dir).FirmwareInventory(ctx, system)
		require.Error(t, err, "an inventory with a hole is no inventory")
		assert.NotErrorIs(t, err, bmc.ErrUnsupported)
		assert.Contains(t, err.Error(), "FirmwareInventory/SS")
	})
}

// TestAnAttributeRegistryServedAtItsFilesURI is a BMC whose Registries member is the registry
// itself (no Location), with bounds vendors write oddly: in strings, beyond int64, absent, and
// one attribute too malformed to read, which is skipped; and a password the Bios echoes.
func TestAnAttributeRegistryServedAtItsFilesURI(t *testing.T) {
	dir := mockupCopy(t)
	const name = "BiosAttributeRegistryP89.v1_0_0"
	editJSON(t, dir, "Registries", func(col map[string]any) {
		col["Members"] = append(col["Members"].([]any), map[string]any{"@odata.id": "/redfish/v1/Registries/" + name})
		col["Members@odata.count"] = 2
	})
	// A BMC that echoes a password it should read as null.
	editJSON(t, dir, "Systems/437XR1138R2/Bios", func(bios map[string]any) {
		bios["Attributes"].(map[string]any)["SetupPassword"] = "hunter2"
		// A hash the registry does not type Password (some BMCs type them String).
		bios["Attributes"].(map[string]any)["AdminSHA256Password"] = "9f86d081884c7d65"
	})
	writeResource(t, dir, "Registries/"+name, `{
		"@odata.id": "/redfish/v1/Registries/`+name+`",
		"@odata.type": "#AttributeRegistry.v1_3_6.AttributeRegistry",
		"Id": "`+name+`", "Name": "BIOS Attribute Registry", "Language": "en", "RegistryVersion": "1.0.0",
		"RegistryEntries": {"Attributes": [
			{"AttributeName": "ProcCoreDisable", "Type": "Integer", "LowerBound": "0", "UpperBound": 18446744073709551615, "ResetRequired": true},
			{"AttributeName": "AdminPhone", "Type": "String", "MaxLength": 64.0, "ReadOnly": false},
			{"AttributeName": "EmbeddedSata", "Type": "Enumeration", "Value": [{"ValueName": "Raid"}, {"ValueName": "Ahci"}], "LowerBound": null},
			{"AttributeName": "UsbControl", "Type": "Enumeration", "Immutable": true, "Value": [{"ValueName": "UsbEnabled"}]},
			{"AttributeName": "ProcTurboMode", "Type": "Enumeration", "ReadOnly": "no"},
			{"AttributeName": "SetupPassword", "Type": "Password"},
			{"Type": "String"}
		]}
	}`)
	settings, err := startMockup(t, dir).BIOSSettings(context.Background(), "/redfish/v1/Systems/437XR1138R2")
	require.NoError(t, err)
	reg := settings.Registry
	require.NotNil(t, reg)
	assert.Equal(t, name, reg.Name)
	assert.Len(t, reg.Attributes, 5, "the malformed and the nameless attributes are skipped")
	assert.Equal(t, bmc.AttributePassword, reg.Attributes["SetupPassword"].Type)
	require.Contains(t, settings.Current, "SetupPassword")
	assert.Empty(t, settings.Current["SetupPassword"], "a password is not copied out")
	require.Contains(t, settings.Current, "AdminSHA256Password")
	assert.Empty(t, settings.Current["AdminSHA256Password"], "nor is what its name says is a password")
	cores := reg.Attributes["ProcCoreDisable"]
	require.NotNil(t, cores.LowerBound)
	require.NotNil(t, cores.UpperBound)
	assert.Equal(t, int64(0), *cores.LowerBound, "a bound in a string")
	assert.Equal(t, int64(1<<63-1), *cores.UpperBound, "a bound beyond int64 is held at its end")
	assert.True(t, cores.ResetRequired)
	phone := reg.Attributes["AdminPhone"]
	require.NotNil(t, phone.MaxLength)
	assert.Equal(t, int64(64), *phone.MaxLength)
	assert.Nil(t, phone.MinLength)
	assert.Nil(t, reg.Attributes["EmbeddedSata"].LowerBound, "null is no bound")
	assert.Equal(t, []string{"Raid", "Ahci"}, reg.Attributes["EmbeddedSata"].AllowedValues)
	assert.True(t, reg.Attributes["UsbControl"].ReadOnly, "an immutable attribute cannot be set either")
}

// TestAnAttributeRegistryOverTheResponseBound: a registry larger than the client reads fails
// BIOSSettings naming the bound, rather than being read whole or taken for no registry.
func TestAnAttributeRegistryOverTheResponseBound(t *testing.T) {
	dir := mockupCopy(t)
	const name = "BiosAttributeRegistryP89.v1_0_0"
	editJSON(t, dir, "Registries", func(col map[string]any) {
		col["Members"] = append(col["Members"].([]any), map[string]any{"@odata.id": "/redfish/v1/Registries/" + name})
	})
	var attrs []string
	for i := range 4000 {
		attrs = append(attrs, fmt.Sprintf(`{"AttributeName": "Padding%04d", "Type": "String", "DisplayName": "An attribute among thousands"}`, i))
	}
	writeResource(t, dir, "Registries/"+name, `{"Id": "`+name+`", "Registry": "`+name+`",
		"Location": [{"Language": "en", "Uri": "/redfish/v1/Registries/`+name+`/Registry"}]}`)
	writeResource(t, dir, "Registries/"+name+"/Registry", `{"Id": "`+name+`", "RegistryEntries": {"Attributes": [`+strings.Join(attrs, ",")+`]}}`)
	sim, err := bmcsim.StartStatic(dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	opts := trusting(sim)
	opts.MaxResponseBytes = 64 << 10
	c, err := redfish.Connect(context.Background(), target(t, sim, password), opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)

	_, err = c.BIOSSettings(context.Background(), "/redfish/v1/Systems/437XR1138R2")
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
	assert.Contains(t, err.Error(), "64 KiB limit")
	assert.Contains(t, err.Error(), "attribute registry")
}

// TestManagerSettingsOfADell reads and sets the iDRAC's own attributes, the one kind of BMC
// settings a vendor exposes over Redfish with a registry: the Manager's
// Links.Oem.Dell.DellAttributes, ManagerAttributeRegistry. A change applies at once, without a
// reset; a value the BMC refuses comes back with its message; a BMC without them (every
// other profile, DMTF's mockup) answers ErrUnsupported, as IPMI does.
func TestManagerSettingsOfADell(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileDell, FirmwareVersion: "7.10.50.00"})
	c := connect(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	system := systems[0].URI

	settings, err := c.ManagerSettings(ctx, system)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"IPMILan.1.Enable": "Enabled", "SerialRedirection.1.Enable": "Enabled", "NTPConfigGroup.1.NTPEnable": "Disabled",
		"NTPConfigGroup.1.NTP1": "", "WebServer.1.Timeout": "1800", "Info.1.Version": "7.10.50.00",
	}, settings.Current)
	assert.Nil(t, settings.Pending, "applied at once: nothing is ever pending")
	reg := settings.Registry
	require.NotNil(t, reg)
	assert.Equal(t, "ManagerAttributeRegistry.v1_0_0", reg.Name)
	assert.Len(t, reg.Attributes, len(settings.Current))
	assert.True(t, reg.Attributes["Info.1.Version"].ReadOnly)
	assert.False(t, reg.Attributes["IPMILan.1.Enable"].ResetRequired)
	timeout := reg.Attributes["WebServer.1.Timeout"]
	require.NotNil(t, timeout.LowerBound)
	assert.Equal(t, int64(60), *timeout.LowerBound)

	require.NoError(t, c.SetManagerSettings(ctx, system, map[string]string{"NTPConfigGroup.1.NTPEnable": "Enabled", "WebServer.1.Timeout": "3600"}))
	assert.Equal(t, "Enabled", sim.ManagerAttribute("NTPConfigGroup.1.NTPEnable"))
	assert.Equal(t, int64(3600), sim.ManagerAttribute("WebServer.1.Timeout"), "sent as the registry's Integer")
	settings, err = c.ManagerSettings(ctx, system)
	require.NoError(t, err)
	assert.Equal(t, "3600", settings.Current["WebServer.1.Timeout"])
	assert.Equal(t, int64(1), sim.Stats().ManagerPatches)

	err = c.SetManagerSettings(ctx, system, map[string]string{"WebServer.1.Timeout": "5"})
	require.Error(t, err, "out of the registry's bounds: the BMC refuses it")
	assert.Contains(t, err.Error(), "WebServer.1.Timeout")
	assert.Equal(t, int64(3600), sim.ManagerAttribute("WebServer.1.Timeout"), "nothing changed")
	err = c.SetManagerSettings(ctx, system, map[string]string{"WebServer.1.Timeout": "soon"})
	require.Error(t, err, "not an integer: refused before anything is sent")
	assert.Equal(t, int64(2), sim.Stats().ManagerPatches)

	for name, opts := range map[string]bmcsim.Options{"generic": {}, "hpe": {Profile: bmcsim.ProfileHPE}} {
		other := connect(t, startSim(t, opts))
		systems, err := other.Systems(ctx)
		require.NoError(t, err)
		_, err = other.ManagerSettings(ctx, systems[0].URI)
		require.ErrorIs(t, err, bmc.ErrUnsupported, name)
		require.ErrorIs(t, other.SetManagerSettings(ctx, systems[0].URI, map[string]string{"A": "b"}), bmc.ErrUnsupported, name)
	}
	mockup := startMockup(t, mockupDir(t))
	_, err = mockup.ManagerSettings(ctx, "/redfish/v1/Systems/437XR1138R2")
	require.ErrorIs(t, err, bmc.ErrUnsupported, "DMTF's mockup: a Manager without vendor attributes")
}
