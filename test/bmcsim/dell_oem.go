package bmcsim

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"
)

// BootPhysicalCd is what a host boots from when a BMC under CdOverrideBootsPhysicalDrive was
// told BootSourceOverrideTarget Cd: the server's own optical drive, not the virtual CD. A host
// with no disc in it boots on (a VM: its disk), whatever is in the virtual CD.
const BootPhysicalCd BootTarget = "PhysicalCd"

// The Dell OEM action that sets iDRAC attributes from a Server Configuration Profile, as
// sushy-oem-idrac's set_virtual_boot_device calls it: a POST with ShareParameters.Target and
// an XML ImportBuffer, answered 202 with a Location of the job that applies it.
const (
	dellImportAction   = "#OemManager.v1_0_0#OemManager.ImportSystemConfiguration"
	dellImportPathTail = "/Actions/Oem/EID_674_Manager.ImportSystemConfiguration"
	tasksPath          = "/redfish/v1/TaskService/Tasks"
)

// dellCd says whether CdOverrideBootsPhysicalDrive applies: an iDRAC manages one server, so
// a BMC simulated with more systems stands for no iDRAC, and keeps the standard Cd.
func (m *model) dellCd() bool { return m.q.CdOverrideBootsPhysicalDrive && len(m.systems) == 1 }

// dellManagerOem adds the OEM action to the Manager under CdOverrideBootsPhysicalDrive (the
// quirk is iDRAC's, and so is its way out).
func (m *model) dellManagerOem(mgr obj) {
	if !m.dellCd() {
		return
	}
	mgr["Actions"] = obj{"Oem": obj{dellImportAction: obj{
		"target":                               m.uri(m.managerPath() + dellImportPathTail),
		"ShareParameters":                      obj{"Target@Redfish.AllowableValues": []string{"ALL", "IDRAC", "BIOS", "NIC", "RAID"}},
		"ShutdownType@Redfish.AllowableValues": []string{"Graceful", "Forced", "NoReboot"},
	}}}
}

// scp is the part of a Server Configuration Profile the simulator reads.
type scp struct {
	XMLName    xml.Name `xml:"SystemConfiguration"`
	Components []struct {
		FQDD       string `xml:"FQDD,attr"`
		Attributes []struct {
			Name  string `xml:"Name,attr"`
			Value string `xml:",chardata"`
		} `xml:"Attribute"`
	} `xml:"Component"`
}

// importSystemConfiguration serves the OEM action for the two attributes that make the next
// boot (ServerBoot.1#BootOnce Enabled) or every boot (Disabled) use the virtual CD
// (ServerBoot.1#FirstBootDevice VCD-DVD) of the BMC's first system. It is applied at once;
// the job it answers with (a Task, tasks.go) is complete. Any other attribute is refused: not simulated.
func (b *BMC) importSystemConfiguration(w http.ResponseWriter, r *http.Request) {
	m := b.model
	body, ok := decodeObject(w, r)
	if !ok {
		return
	}
	var buffer string
	if raw, present := body["ImportBuffer"]; !present || json.Unmarshal(raw, &buffer) != nil || buffer == "" {
		writeError(w, r, http.StatusBadRequest, msgActionParamMissing,
			"The action ImportSystemConfiguration requires the parameter ImportBuffer to be present in the request body.",
			"ImportSystemConfiguration", "ImportBuffer")
		return
	}
	var profile scp
	if err := xml.Unmarshal([]byte(buffer), &profile); err != nil {
		writeError(w, r, http.StatusBadRequest, msgActionParamValue, "The ImportBuffer is not a Server Configuration Profile: "+err.Error(),
			"ImportBuffer", "ImportSystemConfiguration")
		return
	}
	var once, device string
	for _, c := range profile.Components {
		if !strings.EqualFold(c.FQDD, m.prof.mgrID) {
			writeError(w, r, http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("Component %s is not simulated.", c.FQDD), c.FQDD, "ImportBuffer")
			return
		}
		for _, a := range c.Attributes {
			switch a.Name {
			case "ServerBoot.1#BootOnce":
				once = strings.TrimSpace(a.Value)
			case "ServerBoot.1#FirstBootDevice":
				device = strings.TrimSpace(a.Value)
			default:
				writeError(w, r, http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("Attribute %s is not simulated.", a.Name), a.Name, "ImportBuffer")
				return
			}
		}
	}
	if device != "VCD-DVD" || (once != "Enabled" && once != "Disabled") {
		writeError(w, r, http.StatusBadRequest, msgActionParamValue,
			fmt.Sprintf("Only ServerBoot.1#FirstBootDevice VCD-DVD with ServerBoot.1#BootOnce Enabled or Disabled is simulated (got %q, %q).", device, once),
			device, "ImportBuffer")
		return
	}
	m.mu.Lock()
	s := m.systems[0]
	s.bootTarget, s.virtualCd, s.bootOnce = BootCd, true, "Continuous"
	if once == "Enabled" {
		s.bootOnce = "Once"
	}
	s.bootGen++
	m.jobs++
	m.importJobs = append(m.importJobs, m.jobs)
	job := fmt.Sprintf("JID_%012d", m.jobs)
	m.mu.Unlock()
	b.stats.bootPatches.Add(1)
	w.Header().Set("Location", m.uri(tasksPath+"/"+job))
	writeJSON(w, r, http.StatusAccepted, obj{})
}
