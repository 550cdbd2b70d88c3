package bmcsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
)

// BIOS settings: each system's Bios resource (Attributes as in effect now), its Settings object
// (what is staged for the next power-on; PATCHable), and the attribute registry that defines
// them, published under /redfish/v1/Registries the way real BMCs do it: a MessageRegistryFile
// whose Location names the registry's own URI. Attribute names are Dell's (BootMode,
// ProcVirtualization, …) on every profile: one small set, so clients are tested against a
// registry, not a vendor's list. Staged values apply at the system's next power-on or reset
// (system.boot), as firmware applies them during POST.

const (
	registriesPath = "/redfish/v1/Registries"
	// The BIOS registry's file and the registry itself, which bmcweb also serves one level
	// below its file; the file's Id is not the registry's name, so a client must match the
	// file's Registry property, not its Id, to the Bios's AttributeRegistry.
	biosRegistryFileID   = "BiosAttributeRegistry"
	biosRegistryName     = "BiosAttributeRegistry.1.0.0"
	biosRegistryFilePath = registriesPath + "/" + biosRegistryFileID
	biosRegistryPath     = biosRegistryFilePath + "/" + biosRegistryFileID
	// The Base message registry the simulator's errors cite is listed too, as real BMCs list
	// many registries, with DMTF's publication URI only (no local copy is served).
	baseRegistryID = "Base.1.8.1"
)

func (s *system) biosPath() string { return s.path + "/Bios" }

// registryAttribute is one attribute of an attribute registry: the BIOS's (here) or a
// Manager's (manager_attributes.go).
type registryAttribute struct {
	name, display, menu string
	typ                 string // "Enumeration", "Integer" or "String"
	values              []string
	lower, upper        int64          // Integer
	maxLength           int            // String
	pattern             *regexp.Regexp // String: its ValueExpression
	readOnly            bool
	def                 any // the default; nil for those the system decides (systemValue)
	// immediate: a change applies at once, without a reset (a Manager's); ResetRequired false.
	immediate bool
}

// biosAttributes is the registry, the same for every system and profile.
var biosAttributes = []registryAttribute{
	{name: "BootMode", display: "Boot Mode", menu: "./BootSettings", typ: "Enumeration", values: []string{"Uefi", "Bios"}},
	{name: "ProcVirtualization", display: "Virtualization Technology", menu: "./ProcSettings", typ: "Enumeration",
		values: []string{"Enabled", "Disabled"}, def: "Enabled"},
	{name: "SriovGlobalEnable", display: "SR-IOV Global Enable", menu: "./IntegratedDevices", typ: "Enumeration",
		values: []string{"Enabled", "Disabled"}, def: "Disabled"},
	{name: "ProcCoreDisable", display: "Number of Cores to Disable", menu: "./ProcSettings", typ: "Integer",
		lower: 0, upper: 63, def: int64(0)},
	{name: "AssetTag", display: "Asset Tag", menu: "./MiscSettings", typ: "String", maxLength: 32,
		pattern: regexp.MustCompile(`^[ -~]*$`), def: ""}, // printable ASCII
	{name: "SystemBiosVersion", display: "System BIOS Version", menu: "./SysInformation", typ: "String", readOnly: true},
}

func findBIOSAttribute(name string) (registryAttribute, bool) {
	return findAttribute(biosAttributes, name)
}

func findAttribute(registry []registryAttribute, name string) (registryAttribute, bool) {
	for _, a := range registry {
		if a.name == name {
			return a, true
		}
	}
	return registryAttribute{}, false
}

// biosValue is an attribute's value in effect; the caller holds m.mu. BootMode is the mode the
// firmware boots in (what BootSourceOverrideMode shows), SystemBiosVersion the BIOS firmware's
// version: one state, shown in two places.
func (s *system) biosValue(a registryAttribute) any {
	switch a.name {
	case "BootMode":
		if s.bootMode == BootModeLegacy {
			return "Bios"
		}
		return "Uefi"
	case "SystemBiosVersion":
		return s.biosVersion
	}
	if v, ok := s.biosValues[a.name]; ok {
		return v
	}
	return a.def
}

// applyBIOSSettings is what firmware does at power-on, before it picks what to boot: the staged
// attributes take effect and the Settings object empties. The caller holds m.mu.
func (s *system) applyBIOSSettings() {
	for _, name := range slices.Sorted(maps.Keys(s.biosPending)) {
		v := s.biosPending[name]
		if name == "BootMode" {
			mode := BootModeUEFI
			if v == "Bios" {
				mode = BootModeLegacy
			}
			if s.bootMode != mode {
				s.bootMode = mode
				s.bootGen++ // the Boot object shows it
			}
			continue
		}
		if s.biosValues == nil {
			s.biosValues = map[string]any{}
		}
		s.biosValues[name] = v
	}
	s.biosPending = nil
}

// bios renders the Bios resource; the caller holds m.mu.
func (m *model) bios(s *system) obj {
	r := m.resource(s.biosPath(), "#Bios.v1_2_0.Bios", "Bios", "BIOS Configuration Current Settings")
	attrs := obj{}
	for _, a := range biosAttributes {
		attrs[a.name] = s.biosValue(a)
	}
	r["Attributes"] = attrs
	r["AttributeRegistry"] = biosRegistryName
	r["@Redfish.Settings"] = obj{
		"@odata.type":         "#Settings.v1_3_5.Settings",
		"SettingsObject":      m.ref(s.biosPath() + "/Settings"),
		"SupportedApplyTimes": []string{"OnReset"},
	}
	for _, f := range m.firmwareMembers() {
		if f.related == s.path { // the system's BIOS
			r["Links"] = obj{"ActiveSoftwareImage": m.ref(firmwareInventoryPath + "/" + f.id)}
			break
		}
	}
	return r
}

// biosSettings renders the Settings object: what is staged, nothing once it applied. The
// caller holds m.mu.
func (m *model) biosSettings(s *system) obj {
	r := m.resource(s.biosPath()+"/Settings", "#Bios.v1_2_0.Bios", "Settings", "BIOS Configuration Pending Settings")
	attrs := obj{}
	maps.Copy(attrs, s.biosPending)
	r["Attributes"] = attrs
	r["AttributeRegistry"] = biosRegistryName
	return r
}

// patchBIOSSettings serves PATCH {"Attributes": {…}} on the Settings object: every attribute is
// checked against the registry first (an unknown or read-only one, or a value of the wrong type,
// not in the list, out of bounds or too long, is refused 400 naming it, and nothing is staged),
// then the values are staged over what was staged before, for the next power-on.
// @Redfish.SettingsApplyTime may only ask for OnReset, the one time the simulator applies them.
func (b *BMC) patchBIOSSettings(s *system) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		b.stats.biosPatches.Add(1)
		staged, ok := attributesPatch(w, r, "OnReset", findBIOSAttribute)
		if !ok {
			return
		}
		m.mu.Lock()
		if s.biosPending == nil {
			s.biosPending = map[string]any{}
		}
		maps.Copy(s.biosPending, staged)
		m.mu.Unlock()
		writeNoContent(w)
	}
}

// attributesPatch decodes a PATCH of an attributes resource: {"Attributes": {…}}, each checked
// against the registry (find), and optionally @Redfish.SettingsApplyTime, which may only ask
// for applyTime. On a refusal it writes the error (400, naming what it refused) and returns
// false.
func attributesPatch(w http.ResponseWriter, r *http.Request, applyTime string, find func(string) (registryAttribute, bool)) (map[string]any, bool) {
	body, ok := decodeObject(w, r)
	if !ok {
		return nil, false
	}
	var values map[string]any
	for _, k := range slices.Sorted(maps.Keys(body)) {
		raw := body[k]
		switch {
		case k == "@Redfish.SettingsApplyTime":
			var at struct{ ApplyTime string }
			if json.Unmarshal(raw, &at) != nil || (at.ApplyTime != "" && at.ApplyTime != applyTime) {
				writeError(w, r, http.StatusBadRequest, msgPropertyValue,
					fmt.Sprintf("The value %s for the property @Redfish.SettingsApplyTime is not in the list of acceptable values [%s].", raw, applyTime),
					string(raw), k)
				return nil, false
			}
		case strings.HasPrefix(k, "@"):
		case k == "Attributes":
			var e *biosError
			if values, e = checkAttributes(raw, find); e != nil {
				writeError(w, r, http.StatusBadRequest, e.messageID, e.message, e.args...)
				return nil, false
			}
		default:
			writeError(w, r, http.StatusBadRequest, msgPropertyNotWritten,
				fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), k)
			return nil, false
		}
	}
	if values == nil {
		writeError(w, r, http.StatusBadRequest, msgPropertyMissing,
			"The property Attributes is a required property and must be included in the request.", "Attributes")
		return nil, false
	}
	return values, true
}

// biosError is why an attribute was refused, as a Redfish message.
type biosError struct {
	messageID, message string
	args               []string
}

// checkAttributes checks every attribute of a PATCH's Attributes against a registry (find), in
// name order, and returns their values as the attributes resource shows them.
func checkAttributes(raw json.RawMessage, find func(string) (registryAttribute, bool)) (map[string]any, *biosError) {
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(raw, &attrs); err != nil || attrs == nil {
		return nil, &biosError{msgPropertyValueType,
			fmt.Sprintf("The value %s for the property Attributes is of a different type than the property can accept.", truncateArg(raw)),
			[]string{truncateArg(raw), "Attributes"}}
	}
	out := make(map[string]any, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a, known := find(name)
		switch {
		case !known:
			return nil, &biosError{msgPropertyUnknown,
				fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", name), []string{name}}
		case a.readOnly:
			return nil, &biosError{msgPropertyNotWritten,
				fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", name), []string{name}}
		}
		v, e := a.check(attrs[name])
		if e != nil {
			return nil, e
		}
		out[name] = v
	}
	return out, nil
}

// check parses a value for the attribute, as its registry entry bounds it.
func (a registryAttribute) check(raw json.RawMessage) (any, *biosError) {
	value := truncateArg(raw)
	typeErr := &biosError{msgPropertyValueType,
		fmt.Sprintf("The value %s for the property %s is of a different type than the property can accept.", value, a.name),
		[]string{value, a.name}}
	formatErr := func(why string) *biosError {
		return &biosError{msgPropertyValueFormat,
			fmt.Sprintf("The value %s for the property %s is of a different format than the property can accept: %s.", value, a.name, why),
			[]string{value, a.name}}
	}
	if a.typ == "Integer" {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil {
			return nil, typeErr
		}
		n, isNumber := v.(json.Number)
		if !isNumber {
			return nil, typeErr
		}
		i, err := n.Int64()
		if err != nil {
			return nil, typeErr
		}
		if i < a.lower || i > a.upper {
			return nil, formatErr(fmt.Sprintf("it must be from %d to %d", a.lower, a.upper))
		}
		return i, nil
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return nil, typeErr
	}
	switch {
	case a.typ == "Enumeration" && !slices.Contains(a.values, v):
		return nil, &biosError{msgPropertyValue,
			fmt.Sprintf("The value %s for the property %s is not in the list of acceptable values %v.", value, a.name, a.values),
			[]string{value, a.name}}
	case a.typ == "String" && len(v) > a.maxLength:
		return nil, formatErr(fmt.Sprintf("it is longer than %d characters", a.maxLength))
	case a.typ == "String" && a.pattern != nil && !a.pattern.MatchString(v):
		return nil, formatErr("it must match " + a.pattern.String())
	}
	return v, nil
}

// truncateArg is a client's value as an error message may quote it: bounded, so a huge value
// is not echoed back whole.
func truncateArg(raw json.RawMessage) string {
	const maxArg = 80
	if len(raw) > maxArg {
		return string(raw[:maxArg]) + "…"
	}
	return string(raw)
}

// registryEntry is the attribute's entry in the registry's RegistryEntries.Attributes.
func (a registryAttribute) registryEntry() obj {
	e := obj{
		"AttributeName": a.name,
		"DisplayName":   a.display,
		"MenuPath":      a.menu,
		"Type":          a.typ,
		"ReadOnly":      a.readOnly,
		"ResetRequired": !a.immediate,
	}
	if a.def != nil {
		e["DefaultValue"] = a.def
	}
	switch a.typ {
	case "Enumeration":
		values := make([]obj, len(a.values))
		for i, v := range a.values {
			values[i] = obj{"ValueName": v, "ValueDisplayName": v}
		}
		e["Value"] = values
	case "Integer":
		e["LowerBound"], e["UpperBound"], e["ScalarIncrement"] = a.lower, a.upper, 1
	case "String":
		e["MinLength"] = 0
		if a.maxLength > 0 {
			e["MaxLength"] = a.maxLength
		}
		if a.pattern != nil {
			e["ValueExpression"] = a.pattern.String()
		}
	}
	return e
}

func (m *model) registriesCollection() obj {
	files := []string{registriesPath + "/" + baseRegistryID, biosRegistryFilePath}
	if m.prof.managerAttributes {
		files = append(files, managerRegistryFilePath)
	}
	return m.collection(registriesPath, "MessageRegistryFileCollection", "Registry File Collection", files)
}

// registryFile is a MessageRegistryFile: where a registry is, by language.
func (m *model) registryFile(id, registry string, location obj) obj {
	f := m.resource(registriesPath+"/"+id, "#MessageRegistryFile.v1_1_3.MessageRegistryFile", id, registry+" Registry File")
	f["Registry"] = registry
	f["Languages"] = []string{"en"}
	f["Location"] = []obj{location}
	return f
}

func (m *model) biosRegistry() obj {
	return m.attributeRegistry(biosRegistryPath, biosRegistryName, "BIOS Attribute Registry", biosAttributes)
}

// attributeRegistry renders an AttributeRegistry of attrs at path.
func (m *model) attributeRegistry(path, name, title string, attrs []registryAttribute) obj {
	r := m.resource(path, "#AttributeRegistry.v1_3_6.AttributeRegistry", name, title)
	r["Language"] = "en"
	r["OwningEntity"] = m.prof.vendor
	r["RegistryVersion"] = "1.0.0"
	entries := make([]obj, len(attrs))
	for i, a := range attrs {
		entries[i] = a.registryEntry()
	}
	r["RegistryEntries"] = obj{"Attributes": entries}
	return r
}

// routeRegistries serves the registry collection, its files, and the BIOS registry.
func (b *BMC) routeRegistries(rest []string) (endpoint, bool) {
	m := b.model
	switch {
	case len(rest) == 0:
		return get(func() any { return m.registriesCollection() }), true
	case len(rest) == 1 && strings.EqualFold(rest[0], baseRegistryID):
		return get(func() any {
			return m.registryFile(baseRegistryID, baseRegistryID,
				obj{"Language": "en", "PublicationUri": "https://redfish.dmtf.org/registries/" + baseRegistryID + ".json"})
		}), true
	case len(rest) == 1 && strings.EqualFold(rest[0], biosRegistryFileID):
		return get(func() any {
			return m.registryFile(biosRegistryFileID, biosRegistryName, obj{"Language": "en", "Uri": m.uri(biosRegistryPath)})
		}), true
	case len(rest) == 2 && strings.EqualFold(rest[0], biosRegistryFileID) && strings.EqualFold(rest[1], biosRegistryFileID):
		return get(func() any { return m.biosRegistry() }), true
	case m.prof.managerAttributes && len(rest) == 1 && strings.EqualFold(rest[0], managerRegistryFileID):
		return get(func() any {
			return m.registryFile(managerRegistryFileID, managerRegistryName, obj{"Language": "en", "Uri": m.uri(managerRegistryPath)})
		}), true
	case m.prof.managerAttributes && len(rest) == 2 && strings.EqualFold(rest[0], managerRegistryFileID) && strings.EqualFold(rest[1], managerRegistryName):
		return get(func() any {
			return m.attributeRegistry(managerRegistryPath, managerRegistryName, "Manager Attribute Registry", managerAttributes)
		}), true
	}
	return endpoint{}, false
}
