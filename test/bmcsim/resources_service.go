package bmcsim

import (
	"strings"
	"time"
)

// Canonical paths. Links are always rendered through uri, which applies the shape quirks, so
// clients that follow links (as they must) walk every variant of the tree.
const (
	rootPath           = "/redfish/v1/"
	systemsPath        = "/redfish/v1/Systems"
	managersPath       = "/redfish/v1/Managers"
	chassisPath        = "/redfish/v1/Chassis"
	sessionServicePath = "/redfish/v1/SessionService"
	sessionsPath       = "/redfish/v1/SessionService/Sessions"
	accountServicePath = "/redfish/v1/AccountService"
)

func sessionPath(id string) string { return sessionsPath + "/" + id }

func (m *model) managerPath() string            { return managersPath + "/" + m.prof.mgrID }
func (m *model) chassisPathOf(s *system) string { return chassisPath + "/" + s.chassisID }

// uri renders a canonical path as this BMC spells its links (LowercaseIDs, TrailingSlashIDs).
func (m *model) uri(p string) string {
	if m.q.LowercaseIDs {
		p = strings.ToLower(p)
	}
	if m.q.TrailingSlashIDs && !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}

func (m *model) ref(p string) obj { return obj{"@odata.id": m.uri(p)} }

func (m *model) refs(paths []string) []obj {
	out := make([]obj, len(paths))
	for i, p := range paths {
		out[i] = m.ref(p)
	}
	return out
}

// members renders a link array the way the shape quirks want it: null when empty under
// NullMembers, and a count one too high under CountMismatch.
func (m *model) members(paths []string) (list any, count int) {
	list, count = m.refs(paths), len(paths)
	if len(paths) == 0 && m.q.NullMembers {
		list = nil
	}
	if m.q.CountMismatch {
		count++
	}
	return list, count
}

// collection renders a resource collection of the given schema type.
func (m *model) collection(path, typ, name string, paths []string) obj {
	list, count := m.members(paths)
	return obj{
		"@odata.id":           m.uri(path),
		"@odata.type":         "#" + typ + "." + typ,
		"Name":                name,
		"Members":             list,
		"Members@odata.count": count,
	}
}

// resource starts a resource body with the properties every Redfish resource has.
func (m *model) resource(path, typ, id, name string) obj {
	return obj{"@odata.id": m.uri(path), "@odata.type": typ, "Id": id, "Name": name}
}

var statusOK = obj{"State": "Enabled", "Health": "OK"}

// nullable renders "" as null, as BMCs do for blank FRU fields.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (m *model) serviceRoot() obj {
	root := m.resource(rootPath, "#ServiceRoot.v1_15_0.ServiceRoot", "RootService", "Root Service")
	root["@odata.id"] = rootPath // the service root keeps its slash and case on every BMC
	root["RedfishVersion"] = "1.15.0"
	root["Systems"] = m.ref(systemsPath)
	root["Chassis"] = m.ref(chassisPath)
	root["Managers"] = m.ref(managersPath)
	root["SessionService"] = m.ref(sessionServicePath)
	root["AccountService"] = m.ref(accountServicePath)
	root["UpdateService"] = m.ref(updateServicePath)
	root["Registries"] = m.ref(registriesPath)
	root["Tasks"] = m.ref(taskServicePath)
	root["Links"] = obj{"Sessions": m.ref(sessionsPath)}
	root["ProtocolFeaturesSupported"] = obj{
		"ExpandQuery":     obj{"ExpandAll": false, "Levels": false, "Links": false, "NoLinks": false},
		"FilterQuery":     false,
		"SelectQuery":     false,
		"OnlyMemberQuery": false,
		"ExcerptQuery":    false,
	}
	if !m.q.BareServiceRoot {
		root["UUID"] = m.id.rootUUID
		root["Vendor"] = m.prof.vendor
		root["Product"] = nullable(m.prof.product)
	}
	return root
}

func (m *model) managersCollection() obj {
	return m.collection(managersPath, "ManagerCollection", "Manager Collection", []string{m.managerPath()})
}

// manager renders the BMC's Manager; the caller holds m.mu (its firmware version).
func (m *model) manager() obj {
	mgr := m.resource(m.managerPath(), "#Manager.v1_19_0.Manager", m.prof.mgrID, "Manager")
	mgr["ManagerType"] = "BMC"
	mgr["Manufacturer"] = m.id.manufacturer
	mgr["Model"] = m.id.model
	mgr["FirmwareVersion"] = m.bmcFirmware
	mgr["SerialNumber"] = nullable(m.id.serial)
	mgr["UUID"] = m.id.managerUUID
	mgr["PowerState"] = "On"
	mgr["Status"] = statusOK
	if !m.q.BareServiceRoot {
		mgr["ServiceEntryPointUUID"] = m.id.rootUUID
	}
	servers, chassis := make([]string, len(m.systems)), make([]string, len(m.systems))
	for i, s := range m.systems {
		servers[i], chassis[i] = s.path, m.chassisPathOf(s)
	}
	mgr["Links"] = obj{"ManagerForServers": m.refs(servers), "ManagerForChassis": m.refs(chassis)}
	if m.prof.managerAttributes {
		mgr["Links"].(obj)["Oem"] = obj{"Dell": obj{"DellAttributes": m.refs([]string{m.managerAttributesPath()}), "DellAttributes@odata.count": 1}}
	}
	if len(m.managerMedia()) > 0 {
		mgr["VirtualMedia"] = m.ref(m.managerPath() + "/VirtualMedia")
	}
	m.dellManagerOem(mgr)
	return mgr
}

func (m *model) chassisCollection() obj {
	paths := make([]string, len(m.systems))
	for i, s := range m.systems {
		paths[i] = m.chassisPathOf(s)
	}
	return m.collection(chassisPath, "ChassisCollection", "Chassis Collection", paths)
}

// chassis renders the enclosure of one system; the caller holds m.mu (power state).
func (m *model) chassis(s *system, now time.Time) obj {
	c := m.resource(m.chassisPathOf(s), "#Chassis.v1_23_0.Chassis", s.chassisID, "Computer System Chassis")
	c["ChassisType"] = "RackMount"
	c["Manufacturer"] = nullable(s.spec.Manufacturer)
	c["Model"] = nullable(s.spec.Model)
	c["SerialNumber"] = nullable(s.spec.SerialNumber)
	c["PowerState"] = s.visiblePower(now)
	c["Status"] = statusOK
	if m.q.PlaceholderStrings {
		c["SerialNumber"] = "..................."
		c["PartNumber"] = nil
	}
	c["Links"] = obj{"ComputerSystems": m.refs([]string{s.path}), "ManagedBy": m.refs([]string{m.managerPath()})}
	return c
}

func (m *model) sessionService() obj {
	ss := m.resource(sessionServicePath, "#SessionService.v1_1_9.SessionService", "SessionService", "Session Service")
	ss["ServiceEnabled"] = true
	ss["SessionTimeout"] = int(sessionTimeout / time.Second)
	ss["Sessions"] = m.ref(sessionsPath)
	ss["Status"] = statusOK
	return ss
}

func (m *model) sessionsCollection(ids []string) obj {
	paths := make([]string, len(ids))
	for i, id := range ids {
		paths[i] = sessionPath(id)
	}
	return m.collection(sessionsPath, "SessionCollection", "Session Collection", paths)
}

func (m *model) sessionResource(s session) obj { return sessionBody(m.uri(sessionPath(s.id)), s) }

// sessionBody is a Session resource; it never carries the token or password.
func sessionBody(uri string, s session) obj {
	return obj{
		"@odata.id":   uri,
		"@odata.type": "#Session.v1_6_0.Session",
		"Id":          s.id,
		"Name":        "User Session",
		"UserName":    s.user,
		"SessionType": "Redfish",
	}
}

// accountService is deliberately minimal: clients probe it, none of ours manages accounts.
func (m *model) accountService() obj {
	as := m.resource(accountServicePath, "#AccountService.v1_13_0.AccountService", "AccountService", "Account Service")
	as["ServiceEnabled"] = true
	as["MinPasswordLength"] = 8
	as["MaxPasswordLength"] = 40
	as["AccountLockoutThreshold"] = 0
	as["Status"] = statusOK
	return as
}
