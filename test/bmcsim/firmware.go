package bmcsim

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The UpdateService's FirmwareInventory: the BMC's own firmware, and each system's BIOS and
// first NIC. The versions live in the model (model.bmcFirmware, system.biosVersion,
// system.nicFirmware, guarded by m.mu), so that whatever changes them changes every resource
// that shows them; members, and their Ids where a vendor puts the version in them, are
// rendered from them per request. Updates change them (update.go): SimpleUpdate, unless the
// profile has none, and a multipart push to the profile's MultipartHttpPushUri.

const (
	updateServicePath     = "/redfish/v1/UpdateService"
	firmwareInventoryPath = "/redfish/v1/UpdateService/FirmwareInventory"
)

// nicFirmwareVersion is the firmware every simulated NIC starts with.
const nicFirmwareVersion = "22.31.6"

// firmwareStyle is how a vendor names its FirmwareInventory members.
type firmwareStyle int

const (
	// firmwareNumbered: opaque numbers, as HPE's iLO and many others ("1", "2", …); only
	// RelatedItem (or the version) tells what a member is.
	firmwareNumbered firmwareStyle = iota
	// firmwareHPE: numbered, with iLO's names ("System ROM" for the BIOS).
	firmwareHPE
	// firmwareDell: iDRAC's Installed-<component>-<version>__<FQDD>, plus a Previous- member for
	// the firmware the iDRAC ran before; the component numbers are Dell's catalogue's (159 the
	// BIOS, 25227 the iDRAC).
	firmwareDell
	// firmwareSupermicro: "BMC" and "BIOS".
	firmwareSupermicro
)

// Dell's catalogue numbers of the components the simulator lists (SoftwareId, and the number
// in the member's Id).
const (
	dellComponentBIOS  = "159"
	dellComponentIDRAC = "25227"
	dellComponentNIC   = "105008"
)

// firmwareMember is one FirmwareInventory member as the model has it now.
type firmwareMember struct {
	id, name, version string
	related           string // canonical path of the resource the firmware belongs to
	componentID       string // Dell's SoftwareId; "" elsewhere
	// kind is what an update of it changes (componentBMC, componentBIOS or componentNIC),
	// sys the system whose firmware it is (nil for the BMC's).
	kind string
	sys  *system
}

// idUnsafe are the characters a version may hold that an Id (a path segment) must not.
var idUnsafe = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// firmwareMembers lists the inventory in the profile's style: the BMC's firmware (and a Dell's
// previous one), then each system's BIOS (none for a system without a BIOS version, as on
// OpenBMC) and first NIC. The caller holds m.mu.
func (m *model) firmwareMembers() []firmwareMember {
	style := m.prof.firmware
	var out []firmwareMember
	add := func(f firmwareMember) {
		if style == firmwareNumbered || style == firmwareHPE {
			f.id = strconv.Itoa(len(out) + 1)
		}
		out = append(out, f)
	}
	bmcName := map[firmwareStyle]string{firmwareDell: "Integrated Dell Remote Access Controller", firmwareHPE: m.id.model}[style]
	bmcFW := firmwareMember{id: "BMC", name: or(bmcName, "BMC Firmware"), version: m.bmcFirmware, related: m.managerPath(), kind: componentBMC}
	if style == firmwareDell {
		bmcFW.id, bmcFW.componentID = dellID("Installed", dellComponentIDRAC, m.bmcFirmware, m.prof.mgrID+"-1"), dellComponentIDRAC
	}
	add(bmcFW)
	if style == firmwareDell && m.bmcPreviousFirmware != "" {
		prev := bmcFW
		prev.id, prev.version = dellID("Previous", dellComponentIDRAC, m.bmcPreviousFirmware, m.prof.mgrID+"-1"), m.bmcPreviousFirmware
		add(prev)
	}
	for i, s := range m.systems {
		// Supermicro's Ids name no system (its BMCs manage one): a simulated one with more
		// suffixes the others' Ids.
		suffix := ""
		if i > 0 {
			suffix = "_" + s.spec.ID
		}
		if s.biosVersion != "" {
			bios := firmwareMember{id: "BIOS" + suffix, name: "BIOS", version: s.biosVersion, related: s.path, kind: componentBIOS, sys: s}
			switch style {
			case firmwareDell:
				bios.id = dellID("Installed", dellComponentBIOS, s.biosVersion, "BIOS.Setup.1-"+strconv.Itoa(i+1))
				bios.componentID = dellComponentBIOS
			case firmwareHPE:
				bios.name = "System ROM"
			case firmwareSupermicro:
				bios.name = "BIOS Firmware"
			}
			add(bios)
		}
		if len(s.spec.NICs) > 0 {
			n := s.spec.NICs[0]
			nic := firmwareMember{id: "NIC" + suffix, name: "Simulated Ethernet Adapter", version: s.nicFirmware,
				related: s.path + "/EthernetInterfaces/" + n.ID, kind: componentNIC, sys: s}
			if n.MACAddress != "" {
				nic.name += " - " + strings.ToUpper(n.MACAddress)
			}
			if style == firmwareDell {
				nic.id = dellID("Installed", dellComponentNIC, s.nicFirmware, "NIC.Integrated."+strconv.Itoa(i+1)+"-1-1")
				nic.componentID = dellComponentNIC
			}
			add(nic)
		}
	}
	return out
}

// dellID is an iDRAC member Id: Installed-159-2.3.5__BIOS.Setup.1-1.
func dellID(state, component, version, fqdd string) string {
	return state + "-" + component + "-" + idUnsafe.ReplaceAllString(version, "_") + "__" + fqdd
}

func (m *model) updateService() obj {
	us := m.resource(updateServicePath, "#UpdateService.v1_11_0.UpdateService", "UpdateService", "Update Service")
	us["ServiceEnabled"] = true
	us["Status"] = statusOK
	us["FirmwareInventory"] = m.ref(firmwareInventoryPath)
	us["MultipartHttpPushUri"] = m.uri(m.pushPath())
	us["MaxImageSizeBytes"] = maxPushBytes
	if !m.prof.noSimpleUpdate {
		us["Actions"] = obj{"#" + simpleUpdateAction: obj{
			"target": m.uri(simpleUpdatePath),
			"TransferProtocol@Redfish.AllowableValues": transferProtocols,
		}}
	}
	return us
}

// pushPath is the profile's MultipartHttpPushUri.
func (m *model) pushPath() string { return updateServicePath + "/" + or(m.prof.pushPath, "upload") }

// isPushPath says whether a request path is the MultipartHttpPushUri, as the router matches it.
func (m *model) isPushPath(p string) bool { return slices.Equal(splitPath(p), splitPath(m.pushPath())) }

// firmwareInventory renders the collection; the caller holds m.mu.
func (m *model) firmwareInventory() obj {
	members := m.firmwareMembers()
	paths := make([]string, len(members))
	for i, f := range members {
		paths[i] = firmwareInventoryPath + "/" + f.id
	}
	return m.collection(firmwareInventoryPath, "SoftwareInventoryCollection", "Firmware Inventory Collection", paths)
}

func (m *model) softwareInventory(f firmwareMember) obj {
	r := m.resource(firmwareInventoryPath+"/"+f.id, "#SoftwareInventory.v1_10_0.SoftwareInventory", f.id, f.name)
	r["Version"] = f.version
	r["Updateable"] = true
	r["Status"] = statusOK
	r["RelatedItem"] = m.refs([]string{f.related})
	r["RelatedItem@odata.count"] = 1
	if f.componentID != "" {
		r["SoftwareId"] = f.componentID
	}
	return r
}

// firmwareMember finds a member by Id, as the router compares Ids; the caller holds m.mu.
func (m *model) firmwareMember(id string) (firmwareMember, bool) {
	for _, f := range m.firmwareMembers() {
		if strings.EqualFold(f.id, id) {
			return f, true
		}
	}
	return firmwareMember{}, false
}

// routeUpdateService serves the UpdateService and its FirmwareInventory. A member is looked up
// again when it is rendered: an Id that holds a version is gone once the version changes.
func (b *BMC) routeUpdateService(rest []string) (endpoint, bool) {
	m := b.model
	switch {
	case len(rest) == 0:
		return get(func() any { return m.updateService() }), true
	case len(rest) == 2 && rest[0] == "actions" && rest[1] == strings.ToLower(simpleUpdateAction) && !m.prof.noSimpleUpdate:
		return endpoint{post: b.simpleUpdate}, true
	case len(rest) == 1 && m.isPushPath(updateServicePath+"/"+rest[0]):
		return endpoint{post: b.multipartPush}, true
	case rest[0] != "firmwareinventory":
	case len(rest) == 1:
		return endpoint{get: m.locked(func(time.Time) obj { return m.firmwareInventory() })}, true
	case len(rest) == 2:
		m.mu.Lock()
		_, found := m.firmwareMember(rest[1])
		m.mu.Unlock()
		if !found {
			return endpoint{}, false
		}
		return endpoint{get: func(w http.ResponseWriter, r *http.Request) {
			m.mu.Lock()
			f, ok := m.firmwareMember(rest[1])
			var body obj
			if ok {
				body = m.softwareInventory(f)
			}
			m.mu.Unlock()
			if !ok {
				writeNotFound(w, r)
				return
			}
			writeJSON(w, r, http.StatusOK, body)
		}}, true
	}
	return endpoint{}, false
}
