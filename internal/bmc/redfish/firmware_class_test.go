package redfish

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

// TestClassifyFirmware is a table of members as vendors list them: Ids and Names from iDRAC,
// Supermicro, iLO, Lenovo, OpenBMC and DMTF's mockup, with and without RelatedItem.
func TestClassifyFirmware(t *testing.T) {
	const sys = "/redfish/v1/Systems/System.Embedded.1"
	for _, tc := range []struct {
		name string
		f    firmwareFacts
		want bmc.ComponentClass
	}{
		// What the member links to decides first.
		{"links the system's Bios", firmwareFacts{id: "7", name: "Firmware", related: []string{sys + "/Bios"}}, bmc.ComponentBIOS},
		{"links a Manager", firmwareFacts{id: "3", name: "Firmware", related: []string{"/redfish/v1/Managers/1"}}, bmc.ComponentBMC},
		{"links a Manager, lower case with a slash", firmwareFacts{id: "bmc_active", related: []string{"/redfish/v1/managers/bmc/"}}, bmc.ComponentBMC},
		{"links a Manager by absolute URL", firmwareFacts{id: "1", related: []string{"https://10.0.0.5/redfish/v1/Managers/1"}}, bmc.ComponentBMC},
		{"links the System, says BIOS", firmwareFacts{id: "BIOS", name: "Contoso BIOS Firmware", related: []string{sys}}, bmc.ComponentBIOS},
		{"links the System, says UEFI", firmwareFacts{id: "UEFI", name: "UEFI", related: []string{sys}}, bmc.ComponentBIOS},
		{"links the System, iLO's System ROM", firmwareFacts{id: "2", name: "System ROM", related: []string{sys}}, bmc.ComponentBIOS},
		{"links the System, says System firmware", firmwareFacts{id: "host_fw", name: "Host System Firmware", related: []string{sys}}, bmc.ComponentBIOS},
		{"links the System, the BiosVersion", firmwareFacts{id: "4", name: "Host image", version: "2.3.5", related: []string{sys}, biosVersion: "2.3.5"}, bmc.ComponentBIOS},
		{"links the System, the BiosVersion without its date", firmwareFacts{id: "4", name: "Host image", version: "P79 v1.45", related: []string{sys}, biosVersion: "P79 v1.45 (12/06/2017)"}, bmc.ComponentBIOS},
		{"links the System, a NIC", firmwareFacts{id: "5", name: "Broadcom NetXtreme Gigabit Ethernet", version: "22.31.6", related: []string{sys}, biosVersion: "2.3.5"}, bmc.ComponentOther},
		{"links the System, a version that only starts the same", firmwareFacts{id: "6", name: "CPLD", version: "2.3", related: []string{sys}, biosVersion: "2.3.5"}, bmc.ComponentOther},
		{"links under the System", firmwareFacts{id: "SS", name: "Contoso Simple Storage Firmware", related: []string{sys + "/SimpleStorage/1"}}, bmc.ComponentOther},
		{"links a Chassis, says BIOS", firmwareFacts{id: "8", name: "BIOS", related: []string{"/redfish/v1/Chassis/1"}}, bmc.ComponentOther},
		{"BIOSes of a NIC are not the system's", firmwareFacts{id: "NIC.Slot.1", name: "NIC boot BIOS", related: []string{"/redfish/v1/Chassis/1/NetworkAdapters/1"}}, bmc.ComponentOther},

		// iDRAC: no RelatedItem, the component number in the Id.
		{"Dell BIOS", firmwareFacts{id: "Installed-159-2.3.5__BIOS.Setup.1-1", name: "BIOS"}, bmc.ComponentBIOS},
		{"Dell current BIOS", firmwareFacts{id: "Current-159-2.3.5__BIOS.Setup.1-1", name: "BIOS"}, bmc.ComponentBIOS},
		{"Dell previous BIOS", firmwareFacts{id: "Previous-159-2.2.0__BIOS.Setup.1-1", name: "BIOS"}, bmc.ComponentBIOS},
		{"Dell iDRAC", firmwareFacts{id: "Installed-25227-7.10.30.00__iDRAC.Embedded.1-1", name: "Integrated Dell Remote Access Controller"}, bmc.ComponentBMC},
		{"Dell iDRAC of old, without FQDD", firmwareFacts{id: "Installed-25227-2.84.84.84", name: "Integrated Dell Remote Access Controller"}, bmc.ComponentBMC},
		{"Dell NIC", firmwareFacts{id: "Installed-108255-22.00.6__NIC.Embedded.2-1-1", name: "Broadcom Gigabit Ethernet BCM5720 - F4:02:70:B9:5A:29"}, bmc.ComponentOther},
		{"Dell Lifecycle Controller", firmwareFacts{id: "Installed-28897-7.00.00.184__USC.Embedded.1:LC.Embedded.1", name: "Lifecycle Controller"}, bmc.ComponentOther},
		{"Dell CPLD", firmwareFacts{id: "Installed-27763-1.1.4__CPLD.Embedded.1", name: "System CPLD"}, bmc.ComponentOther},
		{"Dell BIOS linking the system", firmwareFacts{id: "Installed-159-2.3.5__BIOS.Setup.1-1", name: "BIOS", related: []string{sys}}, bmc.ComponentBIOS},

		// Supermicro, and DMTF's mockups: BIOS and BMC.
		{"Supermicro BIOS", firmwareFacts{id: "BIOS", name: "BIOS"}, bmc.ComponentBIOS},
		{"Supermicro BMC", firmwareFacts{id: "BMC", name: "BMC"}, bmc.ComponentBMC},
		{"Supermicro BMC linking a Chassis", firmwareFacts{id: "BMC", name: "BMC", related: []string{"/redfish/v1/Chassis/1"}}, bmc.ComponentBMC},
		{"Supermicro CPLD", firmwareFacts{id: "CPLD_Motherboard", name: "CPLD Motherboard"}, bmc.ComponentOther},

		// Linking nothing: the words of the Id and Name.
		{"iLO, linking nothing", firmwareFacts{id: "1", name: "iLO 5"}, bmc.ComponentBMC},
		{"System ROM, linking nothing", firmwareFacts{id: "2", name: "System ROM"}, bmc.ComponentBIOS},
		{"Lenovo UEFI", firmwareFacts{id: "UEFI", name: "UEFI"}, bmc.ComponentBIOS},
		{"Lenovo XCC", firmwareFacts{id: "BMC-Primary", name: "XClarity Controller"}, bmc.ComponentBMC},
		{"OpenBMC's BIOS", firmwareFacts{id: "bios_active", name: "Software Inventory"}, bmc.ComponentBIOS},
		{"a word inside another is no word", firmwareFacts{id: "9", name: "Biostar Adapter"}, bmc.ComponentOther},
		{"nothing known", firmwareFacts{id: "10", name: "Power Supply 1"}, bmc.ComponentOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, classifyFirmware(tc.f))
		})
	}
}

func TestInstalled(t *testing.T) {
	for id, want := range map[string]bool{
		"Installed-159-2.3.5__BIOS.Setup.1-1":            true,
		"Current-159-2.3.5__BIOS.Setup.1-1":              true,
		"Previous-25227-7.00.30.00__iDRAC.Embedded.1-1":  false,
		"Available-25227-7.20.00.00__iDRAC.Embedded.1-1": false,
		"previous-159-2.2.0":                             false,
		"BIOS":                                           true,
		"Previous":                                       true, // no component: not a Dell Id
	} {
		assert.Equal(t, want, installed(id), id)
	}
}

func TestBelongsElsewhere(t *testing.T) {
	here := []string{"/redfish/v1/Systems/1", "/redfish/v1/Systems/1"}
	for _, tc := range []struct {
		related []string
		want    bool
	}{
		{nil, false},
		{[]string{"/redfish/v1/Systems/1"}, false},
		{[]string{"/redfish/v1/systems/1/"}, false},
		{[]string{"/redfish/v1/Systems/1/EthernetInterfaces/NIC1"}, false},
		{[]string{"/redfish/v1/Managers/BMC"}, false},
		{[]string{"/redfish/v1/Chassis/1"}, false},
		{[]string{"/redfish/v1/Systems/2"}, true},
		{[]string{"/redfish/v1/Systems/2/EthernetInterfaces/NIC1"}, true},
		{[]string{"/redfish/v1/Systems/2", "/redfish/v1/Systems/1"}, false},
		{[]string{"/redfish/v1/Systems/2", "/redfish/v1/Chassis/2"}, false},
		{[]string{"/redfish/v1/Systems"}, false},
	} {
		assert.Equal(t, tc.want, belongsElsewhere(tc.related, here), "%v", tc.related)
	}
}

func TestAttributeText(t *testing.T) {
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, ""},
		{"Enabled", "Enabled"},
		{"", ""},
		{float64(0), "0"},
		{float64(-3), "-3"},
		{float64(4096), "4096"},
		{float64(1.5), "1.5"},
		{true, "true"},
		{false, "false"},
		{json.Number("12"), "12"},
		{[]any{"a", "b"}, `["a","b"]`},
	} {
		assert.Equal(t, tc.want, attributeText(tc.in), "%#v", tc.in)
	}
}

func TestBound(t *testing.T) {
	ptr := func(n int64) *int64 { return &n }
	for raw, want := range map[string]*int64{
		``:                     nil,
		`null`:                 nil,
		`0`:                    ptr(0),
		`-1`:                   ptr(-1),
		`"16"`:                 ptr(16),
		`64.0`:                 ptr(64),
		`1e3`:                  ptr(1000),
		`18446744073709551615`: ptr(math.MaxInt64),
		`-1e30`:                ptr(math.MinInt64),
		`1.5`:                  nil,
		`"many"`:               nil,
		`true`:                 nil,
	} {
		assert.Equal(t, want, bound(json.RawMessage(raw)), "%s", raw)
	}
}
