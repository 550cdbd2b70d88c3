package bmcsim

import "time"

// Processor is one socket or accelerator of a simulated system.
type Processor struct {
	ID, ProcessorType, Manufacturer, Model string // ProcessorType "CPU" or "GPU"
	TotalCores, TotalThreads, MaxSpeedMHz  int
}

// DIMM is one memory slot. Absent slots are only listed when the AbsentDIMMs quirk is on,
// because a well-behaved BMC lists modules, not empty sockets.
type DIMM struct {
	ID                                     string
	CapacityMiB                            int
	MemoryDeviceType                       string
	OperatingSpeedMhz                      int
	Manufacturer, SerialNumber, PartNumber string
	Absent                                 bool
}

// Drive is one physical disk. Empty strings are omitted on the wire, which is how real BMCs
// present drives they know little about (no Manufacturer, MediaType or Protocol).
type Drive struct {
	ID, Name, Model, Manufacturer, SerialNumber string
	CapacityBytes                               int64
	MediaType, Protocol                         string // "SSD"/"HDD"; "NVMe"/"SATA"/"SAS"
}

// NIC is one host Ethernet interface. An empty MACAddress is rendered as null.
type NIC struct {
	ID, MACAddress string
	SpeedMbps      int
	LinkUp         bool
}

// SystemSpec describes one ComputerSystem behind a BMC. Empty ID, Manufacturer, Model and
// BIOSVersion are filled from the BMC's profile at Start; UUID is used exactly as given
// (empty means the system has none, as on OpenBMC).
type SystemSpec struct {
	ID                                                  string
	UUID                                                string
	Manufacturer, Model, SerialNumber, SKU, BIOSVersion string
	PowerState                                          string // initial: "On" or "Off" (default "Off")
	Processors                                          []Processor
	Memory                                              []DIMM
	Drives                                              []Drive
	NICs                                                []NIC

	// BootMode is how the firmware boots at first: BootModeUEFI, BootModeUEFISecureBoot (its
	// SecureBoot resource enabled, and current from the start) or BootModeLegacy; empty, the
	// profile's BootSourceOverrideMode with Secure Boot off. UEFISecureBoot on a BMC without a
	// SecureBoot resource (NoSecureBoot) boots Secure Boot the BMC cannot tell of: it shows UEFI.
	BootMode string
}

// Options configures one simulated BMC.
type Options struct {
	Addr                                               string // listen address, default "127.0.0.1:0"
	TLS                                                bool   // HTTPS with a fresh self-signed ECDSA P-256 certificate
	Username, Password                                 string
	Manufacturer, Model, FirmwareVersion, SerialNumber string // of the Manager; empty: the profile's
	Profile                                            Profile
	Quirks                                             *Quirks      // overrides the profile's quirk set when non-nil
	Systems                                            []SystemSpec // empty: one DefaultSystem(0)

	// MediaDir is where VirtualMedia.InsertMedia stores the images it fetches (one file per
	// inserted slot, removed on eject and by Close). Empty: a temporary directory made on
	// the first insert and removed by Close.
	MediaDir string
	// MediaMaxBytes caps one fetched image (default DefaultMediaMaxBytes); MediaFetchTimeout
	// bounds one fetch (default DefaultMediaFetchTimeout). A fetch over either fails the
	// insert with a Redfish error.
	MediaMaxBytes     int64
	MediaFetchTimeout time.Duration

	// UpdateDuration is how long a firmware update's task runs, from the request to its end
	// (default DefaultUpdateDuration): tests set it to a few hundred milliseconds. The image
	// itself is fetched before the request is answered, bounded by MediaFetchTimeout.
	UpdateDuration time.Duration
}

// BootTarget is what a system boots from at power-on.
type BootTarget string

// Boot targets the simulator records in its boot log.
const (
	BootPxe  BootTarget = "Pxe"
	BootHdd  BootTarget = "Hdd"
	BootNone BootTarget = "None"
	// BootUefiHttp is UEFI HTTP boot: the firmware boots the system's Boot.HttpBootUri when
	// one is set (PowerOnEvent.HTTPBootURI), else the URI DHCP hands it.
	BootUefiHttp BootTarget = "UefiHttp"
)

// The firmware modes a simulated system boots in (SystemSpec.BootMode, PowerOnEvent.BootMode).
const (
	BootModeUEFI           = "UEFI"
	BootModeUEFISecureBoot = "UEFISecureBoot"
	BootModeLegacy         = "Legacy"
)

// PowerOnEvent records one transition of a system to On, with the boot target it used and the
// firmware mode it booted in (a host behind the system boots its firmware so).
type PowerOnEvent struct {
	SystemID, UUID string
	Boot           BootTarget
	BootMode       string
	// HTTPBootURI is the Boot.HttpBootUri the firmware boots when Boot is BootUefiHttp (as
	// real firmware does once its BMC has written it a URI boot option); "" for any other
	// target, and for UefiHttp without a URI (the firmware takes the one DHCP gives). It is a
	// bearer secret for whoever serves it: do not log it.
	HTTPBootURI string
	// BIOSVersion is the BIOS version the host boots with (an update staged for this reset
	// in effect): the host's firmware publishes it (SMBIOS type 0), and its probe reads it.
	BIOSVersion string
	Time        time.Time
}

// PowerAction is one reset a client asked for, or one power transition SetPowerState made,
// as the host behind the system must carry it out: a VM starts, stops, resets or is asked to
// shut down accordingly.
type PowerAction struct {
	SystemID, UUID string
	ResetType      string     // the Redfish ResetType; "" for a SetPowerState transition
	From, To       string     // actual power before and after the action: "On" or "Off"
	Boot           BootTarget // when the action (re)booted the host, what it boots from; else ""
	HTTPBootURI    string     // the URI it boots when Boot is BootUefiHttp (PowerOnEvent.HTTPBootURI); else ""
	// BIOSVersion is the BIOS version the host runs from this (re)boot on, when the action
	// booted it: a firmware update staged for the next reset takes effect here, and a VM's
	// firmware must then publish it (SMBIOS type 0) so the host itself reads the change.
	BIOSVersion string
	Time        time.Time
}

// Stats counts what clients did to a BMC. ActiveSessions is a gauge (sessions ended by
// SetCredentials or expiry leave it without counting as deleted); the rest are counters that
// ResetStats zeroes. Requests includes faulted ones; AuthFailures counts requests refused for
// missing or wrong credentials and failed logins, not injected 401s; Resets and BootPatches
// count accepted actions and PATCHes. MediaInserts counts accepted VirtualMedia inserts (each
// one an image fetched), MediaEjects accepted ejects (of an empty slot too), on any slot,
// through the actions or PATCH.
type Stats struct {
	Requests, SessionsCreated, SessionsDeleted, ActiveSessions, AuthFailures, Resets, BootPatches int64
	MediaInserts, MediaEjects                                                                     int64
	// Updates counts firmware update requests (SimpleUpdate and multipart pushes), BIOSPatches
	// PATCHes of Bios/Settings, ManagerPatches PATCHes of the Manager's attributes: what a
	// client sent, taken or refused.
	Updates, BIOSPatches, ManagerPatches int64
}
