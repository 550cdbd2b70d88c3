package bmcsim

import (
	"crypto/sha256"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// system is one ComputerSystem: its immutable spec plus the power and boot state that
// clients change. Mutable fields are guarded by BMC.mu.
type system struct {
	spec      SystemSpec // normalised at Start, never written afterwards
	path      string     // canonical "/redfish/v1/Systems/<Id>"
	chassisID string

	power      string    // actual state, "On" or "Off"
	shownPower string    // what GET shows until lagUntil (PowerStateLag quirk)
	lagUntil   time.Time // zero when nothing lags
	bootTarget BootTarget
	bootOnce   string // BootSourceOverrideEnabled: "Disabled", "Once" or "Continuous"
	bootMode   string // BootSourceOverrideMode: "UEFI" or "Legacy"
	// httpBootURI is Boot.HttpBootUri: what a UefiHttp boot boots; "" until a client sets it
	// (DHCP's URI then). A bearer secret: never logged.
	httpBootURI string
	bootGen     uint64 // bumped on every Boot change; the ETag of the system
	// virtualCd: the Cd override was set by the Dell OEM import (VCD-DVD), so it boots the
	// virtual CD under CdOverrideBootsPhysicalDrive; a Boot PATCH clears it.
	virtualCd bool
	bootLog   []PowerOnEvent

	// Secure Boot: the setting (SecureBootEnable, PATCHable) takes effect at the next power-on,
	// when secureBootCurrent (SecureBootCurrentBoot) becomes it, in UEFI mode only.
	secureBootEnable, secureBootCurrent bool

	hostShutsDown bool // GracefulShutdown is left to the host, which reports Off (SetHostShutsDown)

	// Firmware (firmware.go): the BIOS version the system runs (SystemSpec.BIOSVersion at
	// first) and its first NIC's, which the FirmwareInventory and the System show; and the
	// firmware updates staged for the next power-on or reset, by component (update.go).
	biosVersion, nicFirmware string
	staged                   map[string]stagedFirmware
	// BIOS attributes (bios.go): values set since Start (nil: every attribute at its default),
	// and those staged on Bios/Settings for the next power-on (nil: none).
	biosValues, biosPending map[string]any

	media             []*mediaSlot // VirtualMedia slots (media.go); none under NoVirtualMedia
	mediaUnderManager bool         // the slots are listed under the Manager, not the System
}

// maxBootLog bounds the per-system boot log so a long-running lab does not grow without end.
const maxBootLog = 1024

// identity is the manager side of a BMC: what Options or the profile say it is.
type identity struct {
	manufacturer, model, serial string
	rootUUID, managerUUID       string
}

// model is the state behind one BMC, shared by the live and the embedded (Handler) use.
type model struct {
	prof    profileDef
	q       Quirks
	id      identity
	systems []*system

	mu          sync.Mutex // guards the mutable fields of systems and hooks
	hooks       []func(PowerOnEvent)
	actionHooks []func(PowerAction)
	mediaHooks  []func(MediaEvent)
	// ignoreResets starts as the IgnoresResets quirk; SetIgnoresResets turns it on and off,
	// as a BMC whose firmware hangs and recovers.
	ignoreResets bool
	// jobs numbers a Dell's jobs (JID_…): the OEM import jobs (dell_oem.go), whose numbers
	// importJobs lists, and, on a profile with Dell jobs, the update tasks.
	jobs       int
	importJobs []int
	// Firmware updates (update.go, tasks.go): every update's task, in the order made; the
	// number of the last one (unless they are Dell jobs); the failure FailNextUpdate set for
	// the next (nil: none); how long one runs (Options.UpdateDuration); and how many ended
	// successfully or will, without their effect being in the model yet (settleUpdates), read
	// without the lock so that requests skip settling when there is nothing to settle.
	updates        []*updateTask
	taskSeq        int
	failNext       *string
	updateDuration time.Duration
	unsettled      atomic.Int32
	// bmcFirmware is the firmware the BMC runs (Options.FirmwareVersion or the profile's), and
	// bmcPreviousFirmware the one it ran before, which a Dell lists as a Previous- member; kept
	// here, not in identity, so that an update can change them (firmware.go).
	bmcFirmware, bmcPreviousFirmware string
	// managerValues are the Manager's attributes set since start (manager_attributes.go); the
	// others have their registry's default.
	managerValues map[string]any
	// health is the parts' health set by SetHealth (health.go).
	health healthState
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]+$`)

// newModel validates opts and fills what the caller left to the profile.
func newModel(opts Options) (*model, error) {
	prof, err := lookupProfile(opts.Profile)
	if err != nil {
		return nil, err
	}
	m := &model{prof: prof, q: prof.quirks}
	if opts.Quirks != nil {
		m.q = *opts.Quirks
	}
	m.ignoreResets = m.q.IgnoresResets
	if m.q.PowerStateLag < 0 || m.q.VirtualMediaInsertedLag < 0 {
		return nil, fmt.Errorf("PowerStateLag and VirtualMediaInsertedLag must not be negative")
	}
	if opts.UpdateDuration < 0 {
		return nil, fmt.Errorf("UpdateDuration must not be negative")
	}
	m.updateDuration = opts.UpdateDuration
	if m.updateDuration == 0 {
		m.updateDuration = DefaultUpdateDuration
	}
	specs := opts.Systems
	if len(specs) == 0 {
		specs = []SystemSpec{DefaultSystem(0)}
	}
	seenSystem := map[string]bool{}
	for i, spec := range specs {
		s, err := m.newSystem(i, spec)
		if err != nil {
			return nil, fmt.Errorf("system %d: %w", i, err)
		}
		// Routing is case-insensitive (see router.go), so Ids must differ in more than case.
		key := strings.ToLower(s.spec.ID)
		if seenSystem[key] {
			return nil, fmt.Errorf("system %d: duplicate Id %q", i, s.spec.ID)
		}
		seenSystem[key] = true
		m.newMediaSlots(s, i == 0)
		m.systems = append(m.systems, s)
	}
	m.id = identity{
		manufacturer: or(opts.Manufacturer, prof.mgrManufacturer),
		model:        or(opts.Model, prof.mgrModel),
		serial:       opts.SerialNumber,
	}
	m.bmcFirmware, m.bmcPreviousFirmware = or(opts.FirmwareVersion, prof.mgrFirmware), prof.mgrPreviousFirmware
	// The service and manager UUIDs are derived from what identifies this BMC, so a fleet of
	// distinct systems gets distinct, reproducible BMC UUIDs.
	first := m.systems[0].spec
	seed := strings.Join([]string{m.id.manufacturer, m.id.model, m.id.serial, first.UUID, first.SerialNumber, first.ID}, "|")
	m.id.rootUUID = hashUUID("service-root|" + seed)
	m.id.managerUUID = hashUUID("manager|" + seed)
	if m.q.SameUUIDEverywhere && first.UUID != "" {
		m.id.rootUUID, m.id.managerUUID = first.UUID, first.UUID
	}
	if prof.managerUUIDUpper {
		m.id.managerUUID = strings.ToUpper(m.id.managerUUID)
	}
	return m, nil
}

func (m *model) newSystem(i int, spec SystemSpec) (*system, error) {
	spec.ID = or(spec.ID, m.prof.systemID(i))
	spec.Manufacturer = or(spec.Manufacturer, m.prof.sysManufacturer)
	spec.Model = or(spec.Model, m.prof.sysModel)
	spec.BIOSVersion = or(spec.BIOSVersion, m.prof.biosVersion)
	spec.PowerState = or(spec.PowerState, "Off")
	if !idPattern.MatchString(spec.ID) {
		return nil, fmt.Errorf("Id %q must match %s", spec.ID, idPattern)
	}
	if spec.PowerState != "On" && spec.PowerState != "Off" {
		return nil, fmt.Errorf("PowerState %q must be On or Off", spec.PowerState)
	}
	bootMode, secureBoot := m.prof.bootMode, false
	switch spec.BootMode {
	case "":
	case BootModeUEFI, BootModeLegacy:
		bootMode = spec.BootMode
	case BootModeUEFISecureBoot:
		bootMode, secureBoot = BootModeUEFI, true
	default:
		return nil, fmt.Errorf("BootMode %q must be %s, %s or %s", spec.BootMode, BootModeUEFI, BootModeUEFISecureBoot, BootModeLegacy)
	}
	// Copy the slices so the caller cannot change a running BMC behind its lock.
	spec.Processors = append([]Processor(nil), spec.Processors...)
	spec.Memory = append([]DIMM(nil), spec.Memory...)
	spec.Drives = append([]Drive(nil), spec.Drives...)
	spec.NICs = append([]NIC(nil), spec.NICs...)
	ids := map[string]bool{}
	check := func(kind, id string) error {
		if !idPattern.MatchString(id) {
			return fmt.Errorf("%s Id %q must match %s", kind, id, idPattern)
		}
		if ids[kind+strings.ToLower(id)] {
			return fmt.Errorf("duplicate %s Id %q", kind, id)
		}
		ids[kind+strings.ToLower(id)] = true
		return nil
	}
	for j := range spec.Processors {
		p := &spec.Processors[j]
		p.ProcessorType = or(p.ProcessorType, "CPU")
		if p.ProcessorType != "CPU" && p.ProcessorType != "GPU" {
			return nil, fmt.Errorf("processor %d: ProcessorType %q must be CPU or GPU", j, p.ProcessorType)
		}
		p.ID = or(p.ID, fmt.Sprintf("%s%d", p.ProcessorType, j+1))
		if err := check("processor", p.ID); err != nil {
			return nil, err
		}
	}
	for j := range spec.Memory {
		spec.Memory[j].ID = or(spec.Memory[j].ID, fmt.Sprintf("DIMM%d", j+1))
		if err := check("memory", spec.Memory[j].ID); err != nil {
			return nil, err
		}
	}
	for j := range spec.Drives {
		spec.Drives[j].ID = or(spec.Drives[j].ID, fmt.Sprintf("Disk%d", j+1))
		if err := check("drive", spec.Drives[j].ID); err != nil {
			return nil, err
		}
	}
	for j := range spec.NICs {
		spec.NICs[j].ID = or(spec.NICs[j].ID, fmt.Sprintf("NIC%d", j+1))
		if err := check("nic", spec.NICs[j].ID); err != nil {
			return nil, err
		}
	}
	return &system{
		spec:       spec,
		path:       "/redfish/v1/Systems/" + spec.ID,
		chassisID:  m.prof.chassisID(i),
		power:      spec.PowerState,
		bootTarget: BootNone,
		bootOnce:   "Disabled",
		bootMode:   bootMode,

		secureBootEnable: secureBoot, secureBootCurrent: secureBoot,
		biosVersion: spec.BIOSVersion, nicFirmware: nicFirmwareVersion,
	}, nil
}

// findSystem matches an Id the way the router does: exact first, then case-insensitively.
func (m *model) findSystem(id string) *system {
	for _, s := range m.systems {
		if s.spec.ID == id {
			return s
		}
	}
	for _, s := range m.systems {
		if strings.EqualFold(s.spec.ID, id) {
			return s
		}
	}
	return nil
}

func (m *model) findChassis(id string) *system {
	for _, s := range m.systems {
		if strings.EqualFold(s.chassisID, id) {
			return s
		}
	}
	return nil
}

func or(v, fallback string) string {
	if v != "" {
		return v
	}
	return fallback
}

// hashUUID derives a stable RFC 4122 version-5-shaped UUID from a name.
func hashUUID(name string) string {
	h := sha256.Sum256([]byte(name))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}
