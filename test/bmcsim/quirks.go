package bmcsim

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Quirks switches on behaviours of real BMCs that the Redfish schema does not promise; each
// field reproduces one item of the shared design note REDFISH-QUIRKS.md. The zero value is a
// well-behaved, DMTF-shaped BMC.
type Quirks struct {
	NoSystemUUID               bool          // ComputerSystem has no UUID even when the spec gives one
	ZeroSystemUUID             bool          // every ComputerSystem's UUID is all zeros: the firmware's SMBIOS was never given one
	AllFSystemUUID             bool          // every ComputerSystem's UUID is all F (SMBIOS: "not present, but settable")
	PlaceholderSystemUUID      bool          // every ComputerSystem's UUID is the AMI BIOS default, PlaceholderUUID
	SameUUIDEverywhere         bool          // ServiceRoot, Manager and every System report the first system's UUID
	PlaceholderStrings         bool          // "To be filled by O.E.M.", dotted serials, space-padded models
	TrailingSlashIDs           bool          // every @odata.id and link ends in "/"
	LowercaseIDs               bool          // every @odata.id and link is lower case (Id keeps its case)
	NullMembers                bool          // empty collections say "Members": null
	CountMismatch              bool          // Members@odata.count is one more than len(Members)
	GPUsFirst                  bool          // GPUs listed before CPUs, with a null Model
	AbsentDIMMs                bool          // empty DIMM slots are listed with Status.State "Absent"
	NICsWithoutMAC             bool          // no PermanentMACAddress; null SpeedMbps/LinkStatus/Status; no MAC on down ports
	FloatMemoryGiB             bool          // TotalSystemMemoryGiB is a decimal-GB figure read as GiB (476.837158...)
	ResetTypesOnlyInActionInfo bool          // reset types only behind @Redfish.ActionInfo, not inline
	NoBootObject               bool          // ComputerSystem has no Boot object; PATCHing Boot is refused
	NoResetAction              bool          // ComputerSystem has no #ComputerSystem.Reset action
	BootOnceOnly               bool          // BootSourceOverrideEnabled allows only Once/Disabled
	RejectBootModePatch        bool          // a PATCH containing BootSourceOverrideMode is refused
	BareServiceRoot            bool          // ServiceRoot lacks UUID, Vendor and Product
	PowerStateLag              time.Duration // PowerState keeps the old value this long after a reset
	ResetConflictInState       bool          // a Reset to the state the system is in (On when on, ForceOff when off) is refused: 409
	IgnoresResets              bool          // every Reset is accepted (204) and nothing happens: the power never changes
	NoPowerState               bool          // ComputerSystem has no PowerState
	MalformedResetType         bool          // the allowable ResetType values carry one malformed entry ("Force Off ") besides the real ones
	NoSecureBoot               bool          // ComputerSystem links no SecureBoot resource: the BMC cannot tell whether Secure Boot is on
	// CdOverrideBootsPhysicalDrive: BootSourceOverrideTarget Cd boots the server's physical
	// optical drive (BootPhysicalCd), not the virtual CD (iDRAC); the Manager's Dell OEM
	// ImportSystemConfiguration with ServerBoot.1#FirstBootDevice VCD-DVD boots the virtual CD.
	// Only on a BMC of one system, as an iDRAC is.
	CdOverrideBootsPhysicalDrive bool
	// NoHTTPBootURI: the BMC cannot have its host boot a URI by UEFI HTTP boot through the
	// Boot object: Boot has no HttpBootUri (ComputerSystem v1.9.0's property) and "UefiHttp"
	// is not among BootSourceOverrideTarget@Redfish.AllowableValues. A PATCH naming
	// HttpBootUri is refused 400 PropertyUnknown, one with target UefiHttp 400
	// PropertyValueNotInList, so a client must boot such a server another way.
	NoHTTPBootURI bool

	// VirtualMedia (docs/bmc-virtual-media.md).
	NoVirtualMedia                    bool          // no VirtualMedia under any System or Manager
	VirtualMediaPatchOnly             bool          // slots have no InsertMedia/EjectMedia actions; media is inserted and ejected by PATCH (older iDRAC and iLO, XCC)
	VirtualMediaRejectsInsertParams   bool          // InsertMedia with Inserted or WriteProtected is refused: 400 (Supermicro X11)
	VirtualMediaInsertedLag           time.Duration // Inserted reads false this long after an insert (and true this long after an eject)
	VirtualMediaConflictWhenInserted  bool          // InsertMedia into a slot with media in it is refused: 409, eject first (iDRAC)
	VirtualMediaEjectNeedsBody        bool          // EjectMedia without a JSON body is refused: 415, it needs {} (iLO)
	VirtualMediaNeedsTransferProtocol bool          // InsertMedia without TransferProtocolType is refused: 400 ActionParameterMissing
	VirtualMediaEjectWhenEmptyFails   bool          // EjectMedia of an empty slot is refused: 400 (iLO)
}

// ParseQuirks reads a comma-separated list of Quirks field names, e.g.
// "NoSystemUUID,GPUsFirst,PowerStateLag=2s", so binaries and tests can name quirks as text.
func ParseQuirks(list string) (Quirks, error) {
	var q Quirks
	v := reflect.ValueOf(&q).Elem()
	for item := range strings.SplitSeq(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, hasValue := strings.Cut(item, "=")
		f := v.FieldByNameFunc(func(n string) bool { return strings.EqualFold(n, name) })
		if !f.IsValid() {
			return Quirks{}, fmt.Errorf("unknown quirk %q (known: %s)", name, strings.Join(QuirkNames(), ", "))
		}
		switch f.Kind() {
		case reflect.Bool:
			if hasValue {
				return Quirks{}, fmt.Errorf("quirk %q takes no value", name)
			}
			f.SetBool(true)
		case reflect.Int64: // time.Duration
			d, err := time.ParseDuration(value)
			if err != nil || d < 0 {
				return Quirks{}, fmt.Errorf("quirk %q needs a duration, like %s=2s", name, name)
			}
			f.SetInt(int64(d))
		}
	}
	return q, nil
}

// QuirkNames lists every Quirks field, so tests can prove each one is exercised.
func QuirkNames() []string {
	t := reflect.TypeFor[Quirks]()
	names := make([]string, t.NumField())
	for i := range names {
		names[i] = t.Field(i).Name
	}
	return names
}

// Profile names a vendor personality: a realistic quirk set plus the identity strings,
// resource Id style and reset types of that vendor's BMC.
type Profile string

// The vendor profiles the simulator knows.
const (
	ProfileGeneric    Profile = "generic"
	ProfileDell       Profile = "dell"
	ProfileHPE        Profile = "hpe"
	ProfileLenovo     Profile = "lenovo"
	ProfileSupermicro Profile = "supermicro"
	ProfileOpenBMC    Profile = "openbmc"
)

// Profiles lists the known profiles in a stable order.
func Profiles() []Profile {
	return []Profile{ProfileGeneric, ProfileDell, ProfileHPE, ProfileLenovo, ProfileSupermicro, ProfileOpenBMC}
}

// profileDef is everything a profile decides besides what Options override.
type profileDef struct {
	quirks                    Quirks
	vendor, product           string // ServiceRoot
	mgrManufacturer, mgrModel string
	mgrFirmware, mgrID        string
	sysManufacturer, sysModel string
	biosVersion               string
	systemID, chassisID       func(i int) string // Id style of the i-th system and its chassis
	resetTypes                []string
	resetActionInfoLink       bool   // link the ActionInfo even when the values are inline
	bootMode                  string // BootSourceOverrideMode reported until patched
	uefiTargetNone            bool   // UefiTargetBootSourceOverride is the string "None"
	media                     mediaLayout
	managerUUIDUpper          bool // manager UUID in upper case, system UUID in lower
	// firmware is how the FirmwareInventory names its members (firmware.go);
	// mgrPreviousFirmware the BMC firmware a Dell lists as Previous- ("": none listed).
	firmware            firmwareStyle
	mgrPreviousFirmware string
	// Updates (update.go, tasks.go): noSimpleUpdate offers only the multipart push;
	// pushPath is the MultipartHttpPushUri's last segment under UpdateService ("": upload);
	// dellJobs makes each update's task a Dell job (JID_… Ids, Managers/<iDRAC>/Jobs, a
	// host's firmware Pending until the reset that activates it).
	noSimpleUpdate, dellJobs bool
	pushPath                 string
	// managerAttributes serves the Manager's attributes as iDRAC does (Links.Oem.Dell.DellAttributes,
	// manager_attributes.go).
	managerAttributes bool
}

func numbered(prefix string) func(int) string {
	return func(i int) string { return fmt.Sprintf("%s%d", prefix, i+1) }
}

// firstBare gives "system", "system2", ...: OpenBMC's single-host naming extended to many.
func firstBare(name string) func(int) string {
	return func(i int) string {
		if i == 0 {
			return name
		}
		return fmt.Sprintf("%s%d", name, i+1)
	}
}

var profiles = map[Profile]profileDef{
	ProfileGeneric: {
		vendor: "Ironfleet", product: "bmcsim",
		mgrManufacturer: "Ironfleet", mgrModel: "bmcsim", mgrFirmware: "1.0.0", mgrID: "BMC",
		sysManufacturer: "Contoso", sysModel: "Simulated Server", biosVersion: "1.0.0",
		systemID: numbered(""), chassisID: numbered(""),
		resetTypes:          []string{"On", "ForceOn", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi"},
		resetActionInfoLink: true, bootMode: "UEFI",
	},
	ProfileDell: {
		// NoHTTPBootURI: iDRAC9 and iDRAC10 serve no Boot.HttpBootUri at all (the property is
		// absent, not empty): reported by bmc-toolbox/bmclib#463 (iDRAC firmware 1.5.3),
		// NVIDIA/libredfish#75 (iDRAC9 on R760, R760xd2, XE9680; iDRAC10 on R670) and
		// stmcginnis/gofish#271 (R350). Dell keeps the URI in the BIOS attributes
		// HttpDev1Uri..HttpDev4Uri (with HttpDevNEnDis), set through a BIOS configuration job,
		// which the simulator does not model. Not established: iDRAC9 does accept
		// BootSourceOverrideTarget UefiHttp (dell/iDRAC-Redfish-Scripting#319), booting the
		// URI of its BIOS attributes or DHCP's; the quirk refuses that target too, so that a
		// client cannot take a UefiHttp boot for a boot of the URI it meant.
		quirks: Quirks{GPUsFirst: true, RejectBootModePatch: true, ResetConflictInState: true,
			VirtualMediaConflictWhenInserted: true, VirtualMediaInsertedLag: 500 * time.Millisecond, CdOverrideBootsPhysicalDrive: true,
			NoHTTPBootURI: true},
		vendor: "Dell", product: "Integrated Dell Remote Access Controller",
		mgrManufacturer: "Dell Inc.", mgrModel: "16G Monolithic", mgrFirmware: "7.10.30.00", mgrID: "iDRAC.Embedded.1",
		sysManufacturer: "Dell Inc.", sysModel: "PowerEdge R760", biosVersion: "2.3.5",
		systemID: numbered("System.Embedded."), chassisID: numbered("System.Embedded."),
		resetTypes: []string{"On", "ForceOff", "ForceRestart", "GracefulRestart", "GracefulShutdown", "PushPowerButton", "Nmi", "PowerCycle"},
		bootMode:   "UEFI",
		firmware:   firmwareDell, mgrPreviousFirmware: "7.00.30.00",
		dellJobs: true, pushPath: "MultipartUpload", managerAttributes: true,
	},
	ProfileHPE: {
		quirks: Quirks{TrailingSlashIDs: true, NICsWithoutMAC: true, AbsentDIMMs: true, PowerStateLag: time.Second,
			VirtualMediaEjectNeedsBody: true, VirtualMediaEjectWhenEmptyFails: true},
		vendor: "HPE", product: "ProLiant DL380 Gen10",
		mgrManufacturer: "HPE", mgrModel: "iLO 5", mgrFirmware: "iLO 5 v2.72", mgrID: "1",
		sysManufacturer: "HPE", sysModel: "ProLiant DL380 Gen10", biosVersion: "U30 v2.80 (01/20/2024)",
		systemID: numbered(""), chassisID: numbered(""),
		resetTypes: []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "Nmi", "PushPowerButton", "GracefulRestart"},
		bootMode:   "UEFI", uefiTargetNone: true, firmware: firmwareHPE,
		// Only the multipart push, as the design has it of iLO 6 (internal/bmc's UpdateRequest).
		noSimpleUpdate: true,
	},
	ProfileLenovo: {
		quirks: Quirks{GPUsFirst: true, AbsentDIMMs: true, FloatMemoryGiB: true, VirtualMediaPatchOnly: true},
		vendor: "Lenovo", product: "Lenovo XClarity Controller",
		mgrManufacturer: "Lenovo", mgrModel: "Lenovo XClarity Controller 2", mgrFirmware: "ESX322V 3.10", mgrID: "1",
		sysManufacturer: "Lenovo", sysModel: "ThinkSystem SR650 V3", biosVersion: "ESE122T-3.10",
		systemID: numbered(""), chassisID: numbered(""),
		resetTypes:          []string{"On", "Nmi", "GracefulShutdown", "GracefulRestart", "ForceOn", "ForceOff", "ForceRestart"},
		resetActionInfoLink: true, bootMode: "UEFI", managerUUIDUpper: true,
		pushPath: "update", // XCC3's
	},
	ProfileSupermicro: {
		quirks: Quirks{SameUUIDEverywhere: true, PlaceholderStrings: true, BootOnceOnly: true, VirtualMediaRejectsInsertParams: true},
		vendor: "Supermicro", product: "",
		mgrManufacturer: "Supermicro", mgrModel: "ASPEED", mgrFirmware: "01.03.18", mgrID: "1",
		sysManufacturer: "Supermicro", sysModel: "SYS-221H-TNR", biosVersion: "2.1",
		systemID: numbered(""), chassisID: numbered(""),
		resetTypes:          []string{"On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "Nmi", "ForceOn"},
		resetActionInfoLink: true, bootMode: "Legacy", firmware: firmwareSupermicro,
	},
	ProfileOpenBMC: {
		// NoSecureBoot: many bmcweb builds serve no SecureBoot resource (the host firmware's
		// Secure Boot state is not on the BMC's D-Bus on most OpenBMC platforms).
		quirks: Quirks{NoSystemUUID: true, ResetTypesOnlyInActionInfo: true, BareServiceRoot: true, NoSecureBoot: true},
		vendor: "OpenBMC", product: "",
		mgrManufacturer: "OpenBMC", mgrModel: "OpenBmc", mgrFirmware: "2.15.0-dev-1234-g5a1b2c3", mgrID: "bmc",
		sysManufacturer: "OpenBMC", sysModel: "Simulated Host", biosVersion: "",
		systemID: firstBare("system"), chassisID: firstBare("chassis"),
		resetTypes: []string{"On", "ForceOff", "ForceOn", "ForceRestart", "GracefulRestart", "GracefulShutdown", "PowerCycle", "Nmi"},
		bootMode:   "UEFI",
	},
}

// ProfileQuirks is a profile's quirk set, for a caller that adds to it (Options.Quirks
// replaces it).
func ProfileQuirks(p Profile) (Quirks, error) {
	def, err := lookupProfile(p)
	return def.quirks, err
}

// lookupProfile resolves a profile name; empty means generic.
func lookupProfile(p Profile) (profileDef, error) {
	if p == "" {
		p = ProfileGeneric
	}
	def, ok := profiles[Profile(strings.ToLower(string(p)))]
	if !ok {
		return profileDef{}, fmt.Errorf("unknown profile %q (known: %v)", p, Profiles())
	}
	def.media = mediaLayouts[Profile(strings.ToLower(string(p)))]
	return def, nil
}

// supportsReset says whether a profile offers a reset type; the simulator implements every
// standard type (see model.reset) but accepts only what the vendor lists, as real BMCs do.
func (p *profileDef) supportsReset(t string) bool { return slices.Contains(p.resetTypes, t) }
