package bmcsim

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Boot override values the simulator accepts; every profile advertises the same list, less
// UefiHttp under NoHTTPBootURI (bootTargetValues).
var bootTargets = []string{"None", "Pxe", "Cd", "Usb", "Hdd", "BiosSetup", "Utilities", "Diags", "UefiHttp"}

// bootTargetValues are the BootSourceOverrideTarget values this BMC allows.
func (m *model) bootTargetValues() []string {
	if m.q.NoHTTPBootURI {
		return slices.DeleteFunc(slices.Clone(bootTargets), func(t string) bool { return t == string(BootUefiHttp) })
	}
	return bootTargets
}

func (m *model) bootEnabledValues() []string {
	if m.q.BootOnceOnly {
		return []string{"Disabled", "Once"}
	}
	return []string{"Disabled", "Once", "Continuous"}
}

// etag changes whenever the Boot object does, which is what a PATCH with If-Match guards.
func (s *system) etag() string { return fmt.Sprintf(`W/"%d"`, s.bootGen) }

// systemUUID is the UUID the system reports, or "" when it has none on the wire.
func (m *model) systemUUID(s *system) string {
	switch {
	case m.q.NoSystemUUID:
		return ""
	case m.q.ZeroSystemUUID, m.q.AllFSystemUUID, m.q.PlaceholderSystemUUID:
		return m.q.HostUUID(s.spec.UUID)
	case m.q.SameUUIDEverywhere && m.systems[0].spec.UUID != "":
		return m.systems[0].spec.UUID
	}
	return s.spec.UUID
}

// computerSystem renders one system; the caller holds m.mu (power and boot state).
func (m *model) computerSystem(s *system, now time.Time) obj {
	sp := s.spec
	cs := m.resource(s.path, "#ComputerSystem.v1_20_0.ComputerSystem", sp.ID, "System")
	cs["SystemType"] = "Physical"
	cs["UUID"] = nullable(m.systemUUID(s))
	if m.q.NoSystemUUID {
		delete(cs, "UUID")
	}
	cs["Manufacturer"] = sp.Manufacturer
	cs["Model"] = sp.Model
	cs["SerialNumber"] = nullable(sp.SerialNumber)
	cs["SKU"] = nullable(sp.SKU)
	cs["BiosVersion"] = nullable(s.biosVersion)
	if m.q.PlaceholderStrings {
		cs["Manufacturer"] = sp.Manufacturer + "  "
		cs["Model"] = sp.Model + " "
		cs["SerialNumber"] = or(sp.SerialNumber, "To be filled by O.E.M.")
		cs["SKU"] = "To be filled by O.E.M."
		cs["PartNumber"] = "01234567890123456789AB"
	}
	if !m.q.NoPowerState {
		cs["PowerState"] = s.visiblePower(now)
	}
	cs["Status"] = m.rolledUp(s.path)
	cs["ProcessorSummary"] = processorSummary(sp.Processors)
	cs["MemorySummary"] = obj{"TotalSystemMemoryGiB": m.totalMemoryGiB(sp.Memory), "Status": statusOK}
	cs["Processors"] = m.ref(s.path + "/Processors")
	cs["Memory"] = m.ref(s.path + "/Memory")
	cs["Storage"] = m.ref(s.path + "/Storage")
	cs["EthernetInterfaces"] = m.ref(s.path + "/EthernetInterfaces")
	if len(s.systemMedia()) > 0 {
		cs["VirtualMedia"] = m.ref(s.path + "/VirtualMedia")
	}
	if !m.q.NoSecureBoot {
		cs["SecureBoot"] = m.ref(s.secureBootPath())
	}
	cs["Bios"] = m.ref(s.biosPath())
	cs["Links"] = obj{
		"Chassis":   m.refs([]string{m.chassisPathOf(s)}),
		"ManagedBy": m.refs([]string{m.managerPath()}),
	}
	if !m.q.NoBootObject {
		boot := obj{
			"BootSourceOverrideTarget":                          string(s.bootTarget),
			"BootSourceOverrideEnabled":                         s.bootOnce,
			"BootSourceOverrideMode":                            s.bootMode,
			"BootSourceOverrideTarget@Redfish.AllowableValues":  m.bootTargetValues(),
			"BootSourceOverrideEnabled@Redfish.AllowableValues": m.bootEnabledValues(),
			"BootSourceOverrideMode@Redfish.AllowableValues":    []string{"Legacy", "UEFI"},
		}
		if m.prof.uefiTargetNone {
			boot["UefiTargetBootSourceOverride"] = "None"
		}
		if !m.q.NoHTTPBootURI {
			boot["HttpBootUri"] = s.httpBootURI
		}
		cs["Boot"] = boot
	}
	if !m.q.NoResetAction {
		reset := obj{"target": m.uri(s.path + "/Actions/ComputerSystem.Reset")}
		if !m.q.ResetTypesOnlyInActionInfo {
			reset["ResetType@Redfish.AllowableValues"] = m.allowableResetTypes()
		}
		if m.q.ResetTypesOnlyInActionInfo || m.prof.resetActionInfoLink {
			reset["@Redfish.ActionInfo"] = m.uri(s.path + "/ResetActionInfo")
		}
		cs["Actions"] = obj{"#ComputerSystem.Reset": reset}
	}
	return cs
}

// processorSummary counts CPU sockets only, as BMCs do, whatever accelerators are listed.
func processorSummary(procs []Processor) obj {
	count, cores, threads, model := 0, 0, 0, ""
	for _, p := range procs {
		if p.ProcessorType != "CPU" {
			continue
		}
		count++
		cores += p.TotalCores
		threads += p.TotalThreads
		if model == "" {
			model = p.Model
		}
	}
	return obj{"Count": count, "Model": nullable(model), "CoreCount": cores, "LogicalProcessorCount": threads, "Status": statusOK}
}

// totalMemoryGiB sums present DIMMs. Under FloatMemoryGiB it reproduces the firmware bug of
// reading decimal gigabytes as GiB: 512 GiB of DIMMs is reported as 476.837158.
func (m *model) totalMemoryGiB(dimms []DIMM) float64 {
	mib := 0
	for _, d := range dimms {
		if !d.Absent {
			mib += d.CapacityMiB
		}
	}
	gib := float64(mib) / 1024
	if m.q.FloatMemoryGiB {
		return math.Round(gib*1e9/(1<<30)*1e6) / 1e6
	}
	return gib
}

func (m *model) resetActionInfo(s *system) obj {
	ai := m.resource(s.path+"/ResetActionInfo", "#ActionInfo.v1_3_0.ActionInfo", "ResetActionInfo", "Reset Action Info")
	ai["Parameters"] = []obj{{"Name": "ResetType", "Required": true, "DataType": "String", "AllowableValues": m.allowableResetTypes()}}
	return ai
}

// allowableResetTypes is the list a client is shown: the profile's, with a malformed entry
// first under MalformedResetType (a Supermicro firmware lists "Force Off " so).
func (m *model) allowableResetTypes() []string {
	if m.q.MalformedResetType {
		return append([]string{"Force Off "}, m.prof.resetTypes...)
	}
	return m.prof.resetTypes
}

// processors lists CPUs before accelerators, unless GPUsFirst puts them the other way round.
func (m *model) processors(s *system) []Processor {
	var cpus, gpus []Processor
	for _, p := range s.spec.Processors {
		if p.ProcessorType == "GPU" {
			gpus = append(gpus, p)
		} else {
			cpus = append(cpus, p)
		}
	}
	if m.q.GPUsFirst {
		return append(gpus, cpus...)
	}
	return append(cpus, gpus...)
}

func (m *model) processorCollection(s *system) obj {
	procs := m.processors(s)
	paths := make([]string, len(procs))
	for i, p := range procs {
		paths[i] = s.path + "/Processors/" + p.ID
	}
	return m.collection(s.path+"/Processors", "ProcessorCollection", "Processors Collection", paths)
}

func (m *model) processor(s *system, p Processor) obj {
	r := m.resource(s.path+"/Processors/"+p.ID, "#Processor.v1_18_0.Processor", p.ID, "Processor")
	r["Socket"] = p.ID
	r["ProcessorType"] = p.ProcessorType
	r["Manufacturer"] = nullable(p.Manufacturer)
	r["Model"] = nullable(p.Model)
	r["TotalCores"] = p.TotalCores
	r["TotalThreads"] = p.TotalThreads
	r["MaxSpeedMHz"] = p.MaxSpeedMHz
	r["Status"] = m.status(s.path + "/Processors/" + p.ID)
	if p.ProcessorType == "CPU" {
		r["ProcessorArchitecture"] = "x86"
		r["InstructionSet"] = "x86-64"
	} else if m.q.GPUsFirst {
		r["Model"] = nil
	}
	return r
}

// dimms lists present modules, plus empty slots under AbsentDIMMs: the spec's own absent
// DIMMs, or, when it has none, one empty slot per module (a half-populated board).
func (m *model) dimms(s *system) []DIMM {
	var out, present []DIMM
	absent := 0
	for _, d := range s.spec.Memory {
		if d.Absent {
			absent++
			if m.q.AbsentDIMMs {
				out = append(out, d)
			}
			continue
		}
		out = append(out, d)
		present = append(present, d)
	}
	if m.q.AbsentDIMMs && absent == 0 {
		for i := range present {
			out = append(out, DIMM{ID: fmt.Sprintf("EmptySlot%d", i+1), Absent: true})
		}
	}
	return out
}

func (m *model) memoryCollection(s *system) obj {
	dimms := m.dimms(s)
	paths := make([]string, len(dimms))
	for i, d := range dimms {
		paths[i] = s.path + "/Memory/" + d.ID
	}
	return m.collection(s.path+"/Memory", "MemoryCollection", "Memory Module Collection", paths)
}

func (m *model) memory(s *system, d DIMM) obj {
	r := m.resource(s.path+"/Memory/"+d.ID, "#Memory.v1_17_0.Memory", d.ID, "DIMM "+d.ID)
	r["DeviceLocator"] = d.ID
	if d.Absent {
		r["CapacityMiB"] = nil
		r["Status"] = obj{"State": "Absent"}
		return r
	}
	r["CapacityMiB"] = d.CapacityMiB
	r["MemoryType"] = "DRAM"
	r["MemoryDeviceType"] = nullable(d.MemoryDeviceType)
	r["OperatingSpeedMhz"] = d.OperatingSpeedMhz
	r["Manufacturer"] = nullable(d.Manufacturer)
	r["SerialNumber"] = nullable(d.SerialNumber)
	r["PartNumber"] = nullable(d.PartNumber)
	if m.q.PlaceholderStrings && d.PartNumber != "" {
		r["PartNumber"] = fmt.Sprintf("%-20s", d.PartNumber)
	}
	r["Status"] = m.status(s.path + "/Memory/" + d.ID)
	return r
}

func (m *model) storagePath(s *system) string { return s.path + "/Storage/1" }

func (m *model) storageCollection(s *system) obj {
	return m.collection(s.path+"/Storage", "StorageCollection", "Storage Collection", []string{m.storagePath(s)})
}

func (m *model) storage(s *system) obj {
	st := m.resource(m.storagePath(s), "#Storage.v1_15_0.Storage", "1", "Storage Controller 1")
	paths := make([]string, len(s.spec.Drives))
	for i, d := range s.spec.Drives {
		paths[i] = m.storagePath(s) + "/Drives/" + d.ID
	}
	st["Drives"], st["Drives@odata.count"] = m.members(paths)
	st["StorageControllers"] = []obj{{
		"@odata.id": m.uri(m.storagePath(s)) + "#/StorageControllers/0",
		"MemberId":  "0",
		"Name":      "Simulated Storage Controller",
		"Status":    m.status(m.storagePath(s) + "/StorageControllers/0"),
	}}
	st["Status"] = m.rolledUp(m.storagePath(s))
	return st
}

// drive omits what the spec leaves empty, as BMCs do for drives they know little about.
func (m *model) drive(s *system, d Drive) obj {
	r := m.resource(m.storagePath(s)+"/Drives/"+d.ID, "#Drive.v1_17_0.Drive", d.ID, or(d.Name, "Drive "+d.ID))
	model := d.Model
	if m.q.PlaceholderStrings && model != "" {
		model = fmt.Sprintf("%-40s", model) // ATA IDENTIFY pads model strings with spaces
	}
	for k, v := range map[string]string{"Model": model, "Manufacturer": d.Manufacturer, "SerialNumber": d.SerialNumber,
		"MediaType": d.MediaType, "Protocol": d.Protocol} {
		if v != "" {
			r[k] = v
		}
	}
	r["CapacityBytes"] = d.CapacityBytes
	r["Status"] = m.status(m.storagePath(s) + "/Drives/" + d.ID)
	r["Links"] = obj{"Chassis": m.ref(m.chassisPathOf(s))}
	return r
}

func (m *model) nicCollection(s *system) obj {
	paths := make([]string, len(s.spec.NICs))
	for i, n := range s.spec.NICs {
		paths[i] = s.path + "/EthernetInterfaces/" + n.ID
	}
	return m.collection(s.path+"/EthernetInterfaces", "EthernetInterfaceCollection", "Ethernet Interface Collection", paths)
}

// nic renders a down port the Dell way (SpeedMbps 0, LinkDown); under NICsWithoutMAC the
// HPE way: no PermanentMACAddress, nulls for speed, link and status, no MAC on down ports.
func (m *model) nic(s *system, n NIC) obj {
	r := m.resource(s.path+"/EthernetInterfaces/"+n.ID, "#EthernetInterface.v1_10_0.EthernetInterface", n.ID, "Ethernet Interface "+n.ID)
	mac := n.MACAddress
	r["InterfaceEnabled"] = true
	if m.q.NICsWithoutMAC {
		r["MACAddress"] = nil
		if n.LinkUp {
			r["MACAddress"] = nullable(mac)
		}
		r["SpeedMbps"], r["LinkStatus"], r["Status"] = nil, nil, nil
		return r
	}
	r["MACAddress"] = nullable(mac)
	r["PermanentMACAddress"] = nullable(mac)
	r["SpeedMbps"], r["LinkStatus"] = 0, "LinkDown"
	if n.LinkUp {
		r["SpeedMbps"], r["LinkStatus"] = n.SpeedMbps, "LinkUp"
	}
	r["Status"] = statusOK
	return r
}
