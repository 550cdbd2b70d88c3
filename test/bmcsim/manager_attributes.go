package bmcsim

import (
	"maps"
	"net/http"
	"regexp"
)

// The Manager's attributes, as iDRAC exposes them (the profiles with managerAttributes: Dell's).
// Redfish defines no settings of a Manager; Dell publishes its iDRAC's as an attributes
// resource listed in the Manager's Links.Oem.Dell.DellAttributes
// (Managers/<id>/Oem/Dell/DellAttributes/<id>), defined by ManagerAttributeRegistry in
// /redfish/v1/Registries. A PATCH of its Attributes is checked against the registry as the
// BIOS's is, and applies at once: the BMC needs no reset of the host for it. Attribute names are
// iDRAC's (Group.Index.Name); the set is small, as the BIOS's is.

const (
	dellAttributesTail      = "/Oem/Dell/DellAttributes/"
	managerRegistryFileID   = "ManagerAttributeRegistry"
	managerRegistryName     = "ManagerAttributeRegistry.v1_0_0"
	managerRegistryFilePath = registriesPath + "/" + managerRegistryFileID
	managerRegistryPath     = managerRegistryFilePath + "/" + managerRegistryName
)

// managerAttributes is the Manager's registry, the same for every profile that has one.
var managerAttributes = []registryAttribute{
	{name: "IPMILan.1.Enable", display: "Enable IPMI Over LAN", menu: "./IPMILan", typ: "Enumeration",
		values: []string{"Enabled", "Disabled"}, def: "Enabled", immediate: true},
	{name: "SerialRedirection.1.Enable", display: "Serial Over LAN Redirection", menu: "./SerialRedirection", typ: "Enumeration",
		values: []string{"Enabled", "Disabled"}, def: "Enabled", immediate: true},
	{name: "NTPConfigGroup.1.NTPEnable", display: "NTP Enable", menu: "./NTPConfigGroup", typ: "Enumeration",
		values: []string{"Enabled", "Disabled"}, def: "Disabled", immediate: true},
	{name: "NTPConfigGroup.1.NTP1", display: "NTP Server 1", menu: "./NTPConfigGroup", typ: "String", maxLength: 254,
		pattern: regexp.MustCompile(`^[ -~]*$`), def: "", immediate: true},
	{name: "WebServer.1.Timeout", display: "Web Server Session Timeout", menu: "./WebServer", typ: "Integer",
		lower: 60, upper: 10800, def: int64(1800), immediate: true},
	{name: "Info.1.Version", display: "Firmware Version", menu: "./Info", typ: "String", readOnly: true, immediate: true},
}

func findManagerAttribute(name string) (registryAttribute, bool) {
	return findAttribute(managerAttributes, name)
}

func (m *model) managerAttributesPath() string {
	return m.managerPath() + dellAttributesTail + m.prof.mgrID
}

// managerValue is an attribute's value in effect; the caller holds m.mu. Info.1.Version is the
// firmware the BMC runs: one state, shown where the Manager's FirmwareVersion shows it.
func (m *model) managerValue(a registryAttribute) any {
	if a.name == "Info.1.Version" {
		return m.bmcFirmware
	}
	if v, ok := m.managerValues[a.name]; ok {
		return v
	}
	return a.def
}

// managerAttributesResource renders the iDRAC's attributes; the caller holds m.mu.
func (m *model) managerAttributesResource() obj {
	r := m.resource(m.managerAttributesPath(), "#DellAttributes.v1_0_0.DellAttributes", m.prof.mgrID, "Manager Attributes")
	attrs := obj{}
	for _, a := range managerAttributes {
		attrs[a.name] = m.managerValue(a)
	}
	r["Attributes"] = attrs
	r["AttributeRegistry"] = managerRegistryName
	r["@Redfish.Settings"] = obj{
		"@odata.type":         "#Settings.v1_3_5.Settings",
		"SettingsObject":      m.ref(m.managerAttributesPath()),
		"SupportedApplyTimes": []string{"Immediate"},
	}
	return r
}

// patchManagerAttributes serves PATCH {"Attributes": {…}} on the Manager's attributes: every
// attribute is checked against the registry first (an unknown or read-only one, or a value of
// the wrong type, not in the list, out of bounds or too long, is refused 400 naming it, and
// nothing changes), then they apply at once. @Redfish.SettingsApplyTime may only ask for
// Immediate.
func (b *BMC) patchManagerAttributes(w http.ResponseWriter, r *http.Request) {
	m := b.model
	b.stats.managerPatches.Add(1)
	set, ok := attributesPatch(w, r, "Immediate", findManagerAttribute)
	if !ok {
		return
	}
	m.mu.Lock()
	if m.managerValues == nil {
		m.managerValues = map[string]any{}
	}
	maps.Copy(m.managerValues, set)
	m.mu.Unlock()
	writeNoContent(w)
}

// ManagerAttribute is the value of one of the Manager's attributes as its attributes resource
// shows it (a string, or an int64 for an Integer); nil for one the registry does not define, or
// on a profile without Manager attributes.
func (b *BMC) ManagerAttribute(name string) any {
	m := b.model
	a, ok := findManagerAttribute(name)
	if !ok || !m.prof.managerAttributes {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.managerValue(a)
}
