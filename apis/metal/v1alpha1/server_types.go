package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WipePolicy says how thoroughly a released server's disks are wiped before it is pooled again.
// +kubebuilder:validation:Enum=erase;metadata;zero;secure
type WipePolicy string

const (
	// WipeErase, the default, leaves nothing readable: the device's own erase where it has one
	// (as secure), else zeros over the whole device (as zero); either way read back, sampled
	// across the whole device. Each disk reports the method that ran: secure or zero.
	WipeErase WipePolicy = "erase"
	// WipeMetadata clears partition tables and filesystem/RAID signatures at the start and end
	// of each device, and nothing else: the previous tenant's data stays readable on the raw
	// device. An explicit opt-in; every release wiped with it records a Warning event.
	WipeMetadata WipePolicy = "metadata"
	// WipeZero writes zeroes over each whole device.
	WipeZero WipePolicy = "zero"
	// WipeSecure uses the device's own erase (NVMe Sanitize or Format with user-data erase,
	// BLKSECDISCARD), read back; a disk that has none fails the cleanup, named. Never a zero-fill.
	WipeSecure WipePolicy = "secure"
)

// DefaultWipePolicy is the policy of a server whose spec names none.
const DefaultWipePolicy = WipeErase

// ServerSpec is what Ironfleet knows about a machine's identity and what is asked of it.
type ServerSpec struct {
	// SystemUUID is the machine's SMBIOS UUID as its BMC reports it (lower case; empty when it
	// reports none, or all zeros or all F). It may be a vendor placeholder or shared with other
	// machines: it is the Server's identity only when the Server is named by it (see
	// docs/identity.md). Probe reports are matched to their Server by token, never by UUID.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	SystemUUID string `json:"systemUUID,omitempty"`

	// SystemURI is the Redfish ComputerSystem this server is, e.g. /redfish/v1/Systems/1, or
	// ipmi:system for the one system of an IPMI BMC.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	SystemURI string `json:"systemURI,omitempty"`

	// BMCRef names the BMC that manages this server.
	// +optional
	BMCRef *LocalObjectReference `json:"bmcRef,omitempty"`

	// BootMACAddress is the MAC of the NIC the server network-boots from, as Metal3's
	// bootMACAddress: the boot service answers that NIC's DHCP before the probe's first report
	// lists the server's NICs. Servers of Redfish BMCs need none (the BMC lists their NICs);
	// servers of IPMI BMCs, which list no NICs, do, for their discovery boot.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$')",message="bootMACAddress must be six colon-separated hex octets, e.g. 3c:ec:ef:01:02:03"
	// +kubebuilder:validation:MaxLength=17
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Boot MAC address"
	BootMACAddress string `json:"bootMACAddress,omitempty"`

	// ServerClaimRef is the claim this server is bound to. Set by the claim controller with an
	// optimistic-concurrency write, so one server is never bound to two claims. It always pins
	// the claim's UID: a claim made again under the same name does not hold the server, and a
	// reference without one (made by hand) is refused.
	// +kubebuilder:validation:XValidation:rule="has(self.uid) && self.uid != ''",message="serverClaimRef must carry the claim's uid: servers are bound by the claim controller, which pins it; create a ServerClaim (with serverSelector or serverRef) instead of editing the Server"
	// +optional
	ServerClaimRef *ObjectReference `json:"serverClaimRef,omitempty"`

	// BootConfigurationRef is the ServerBootConfiguration currently serving this server.
	// +optional
	BootConfigurationRef *ObjectReference `json:"bootConfigurationRef,omitempty"`

	// MaintenanceRef is the ServerMaintenance holding this server.
	// +optional
	MaintenanceRef *ObjectReference `json:"maintenanceRef,omitempty"`

	// Taints keep claims off the server: a NoClaim taint lets no new claim bind it (a claim
	// already bound keeps it). People set them by hand (a rack to retire, a class under test);
	// Ironfleet sets its own under metal.ironfleet.dev/ keys (metal.ironfleet.dev/firmware-update
	// while a firmware update is under way and until the host itself confirms it) and removes
	// only those.
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=key
	// +listMapKey=effect
	// +optional
	Taints []Taint `json:"taints,omitempty"`

	// Power is the desired power state. Controllers set it as the lifecycle requires; it is
	// requested from the BMC and observed in status.powerState.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Power"
	Power Power `json:"power,omitempty"`

	// WipePolicy for the disks when the server is released: erase (the default: nothing
	// readable is left), zero, secure, or metadata (partition tables and signatures only: the
	// data stays readable; docs/deletion.md).
	// +kubebuilder:default=erase
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Wipe policy"
	WipePolicy WipePolicy `json:"wipePolicy,omitempty"`

	// WipeExclusions keep devices of this server out of its wipe, each with the reason a person
	// gave: a device the server needs as it is (a vendor's internal SD module holding its
	// hypervisor, say). The probe does not touch them, the wipe's verification does not ask for
	// them, and the Cleaned condition names each with its reason. Every other device, removable
	// ones included, is wiped.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	WipeExclusions []WipeExclusion `json:"wipeExclusions,omitempty"`

	// ProbeNetwork is the probe's static network on this server (virtual-media boots on
	// networks without DHCP); it takes precedence over its BMC's spec.probeNetwork. Empty: the
	// BMC's, else DHCP.
	// +optional
	ProbeNetwork *ProbeNetwork `json:"probeNetwork,omitempty"`

	// BootMode is how this server's firmware must boot: UEFI, UEFISecureBoot or Legacy. Empty:
	// as found (status.bootMode). The boot service hands a server whose mode is UEFISecureBoot
	// the signed chain (shim, GRUB, kernel; docs/boot.md, "Secure Boot"). A server found in
	// another mode says so in its BootMode condition, and a claim asking for a mode gets only
	// a server found in it.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Boot mode"
	BootMode BootMode `json:"bootMode,omitempty"`
}

// WipeExclusion names one device to leave out of a server's wipe: by its serial number, or by
// its stable path, /dev/disk/by-path/ and the busPath that status.inventory.storage lists (a
// kernel name such as /dev/sdb may name another device on the next boot, so it is refused).
// +kubebuilder:validation:XValidation:rule="has(self.serialNumber) != has(self.path)",message="a wipe exclusion names its device by serialNumber or by path: one of them, not both"
type WipeExclusion struct {
	// SerialNumber is the device's serial number, as status.inventory.storage lists it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// Path is /dev/disk/by-path/<busPath>, the device's busPath as status.inventory.storage
	// lists it.
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/dev/disk/by-path/') && size(self) > 18",message="path must be /dev/disk/by-path/<the device's busPath in status.inventory.storage>; a kernel name such as /dev/sdb may name another device on the next boot"
	// +optional
	Path string `json:"path,omitempty"`
	// Reason is why the device is not wiped: shown in the server's Cleaned condition.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason"`
}

// ByPathPrefix is how a WipeExclusion's path begins: the busPath follows.
const ByPathPrefix = "/dev/disk/by-path/"

// Matches says whether the exclusion names the device.
func (e WipeExclusion) Matches(d StorageDevice) bool {
	if e.SerialNumber != "" {
		return d.SerialNumber == e.SerialNumber
	}
	return d.BusPath != "" && e.Path == ByPathPrefix+d.BusPath
}

// ExclusionOf is the first of exclusions that names the device, or nil.
func ExclusionOf(exclusions []WipeExclusion, d StorageDevice) *WipeExclusion {
	for i := range exclusions {
		if exclusions[i].Matches(d) {
			return &exclusions[i]
		}
	}
	return nil
}

// ServerState is where a server is in its lifecycle; see docs/server-lifecycle.md.
// +kubebuilder:validation:Enum=Initial;Discovery;Available;Reserved;Cleanup;Maintenance;Error
type ServerState string

const (
	ServerStateInitial     ServerState = "Initial"
	ServerStateDiscovery   ServerState = "Discovery"
	ServerStateAvailable   ServerState = "Available"
	ServerStateReserved    ServerState = "Reserved"
	ServerStateCleanup     ServerState = "Cleanup"
	ServerStateMaintenance ServerState = "Maintenance"
	ServerStateError       ServerState = "Error"
)

// ServerStatus is the server's observed lifecycle state and hardware.
type ServerStatus struct {
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="State"
	State ServerState `json:"state,omitempty"`
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Power state"
	PowerState PowerState `json:"powerState,omitempty"`
	// PowerDelivery is Ironfleet's last power request and how far it got (Requested, Sent,
	// ShuttingDown, Confirmed, Unconfirmed); the Powered condition tells people the same.
	// +optional
	PowerDelivery *PowerDelivery `json:"powerDelivery,omitempty"`

	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	SKU string `json:"sku,omitempty"`
	// +optional
	BIOSVersion string `json:"biosVersion,omitempty"`

	// BootMode is how the server's firmware boots as last found: from its BMC before the
	// probe booted, then from the probe's report (the firmware's own variables), which wins.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Boot mode"
	BootMode BootMode `json:"bootMode,omitempty"`
	// BootModeSource says where bootMode was learned: BMC or Probe.
	// +kubebuilder:validation:Enum=BMC;Probe
	// +optional
	BootModeSource string `json:"bootModeSource,omitempty"`

	// Inventory is the hardware, typed, as last discovered.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Inventory"
	Inventory *Inventory `json:"inventory,omitempty"`
	// Hardware summarises Inventory for people: cores, memory and disk in binary units.
	// +optional
	Hardware *HardwareSummary `json:"hardware,omitempty"`

	// LastWipe is the probe's report of the last disk wipe.
	// +optional
	LastWipe *WipeReport `json:"lastWipe,omitempty"`

	// LastInstall is the probe's report of the last image install.
	// +optional
	LastInstall *InstallReport `json:"lastInstall,omitempty"`
	// ProvisionAttempts counts install boots for the claim's current image.
	// +optional
	ProvisionAttempts int32 `json:"provisionAttempts,omitempty"`

	// DiscoveryAttempts counts discovery boots since the server last became Available.
	// +optional
	DiscoveryAttempts int32 `json:"discoveryAttempts,omitempty"`
	// CleanupAttempts counts wipe boots since the server was last released.
	// +optional
	CleanupAttempts int32 `json:"cleanupAttempts,omitempty"`
	// LastProbeBootTime is when Ironfleet last network-booted the probe on this server.
	// +optional
	LastProbeBootTime *metav1.Time `json:"lastProbeBootTime,omitempty"`
	// ProbeMediaInserted says that Ironfleet inserted a probe boot's ISO into the server's
	// virtual CD (bootMethod VirtualMedia) and has not yet seen it ejected: set in the status
	// write before the insert, cleared once an eject succeeded. While it is set, every step
	// outside a probe boot ejects first, so an installed OS, a maintenance or a pooled server
	// never boots a stale probe.
	// +optional
	ProbeMediaInserted bool `json:"probeMediaInserted,omitempty"`

	// ProbeBoot names the server's current probe boot (its boot configuration carries the same
	// name in the metal.ironfleet.dev/probe-boot annotation): the registry takes reports only
	// with that boot's token, so a probe of an earlier boot that reports late cannot pass its
	// inventory or its wipe off as this one's. Empty when no probe boot is under way.
	// +optional
	ProbeBoot string `json:"probeBoot,omitempty"`

	// LastTransitionTime and LastTransitionReason record when and why State last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	// +optional
	LastTransitionReason string `json:"lastTransitionReason,omitempty"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Health is the server's hardware health as its BMC last reported it: the roll-up and the
	// parts that are not OK, never every sensor. The Healthy condition says the same in words.
	// +optional
	Health *ServerHealth `json:"health,omitempty"`
	// Conditions: Ready, Discovered, Cleaned, InMaintenance, Provisioned, Powered, Probe,
	// Healthy; every reason is in docs/conditions.md.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// HealthState is a Redfish Status.Health.
// +kubebuilder:validation:Enum=OK;Warning;Critical
type HealthState string

const (
	HealthOK       HealthState = "OK"
	HealthWarning  HealthState = "Warning"
	HealthCritical HealthState = "Critical"
)

// ServerHealth is a server's hardware health, kept small: the roll-up and the failing parts.
type ServerHealth struct {
	// State is the worst health the BMC reports of the system, its parts, and its chassis'
	// fans, temperatures and power supplies; empty when it says nothing.
	// +optional
	State HealthState `json:"state,omitempty"`
	// Parts are the parts that are not OK, the worst first (at most 8; PartsNotShown counts
	// the rest).
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Parts []HealthPart `json:"parts,omitempty"`
	// +optional
	PartsNotShown int32 `json:"partsNotShown,omitempty"`
}

// HealthPart is one part of a server that is not OK.
type HealthPart struct {
	// Kind is what it is: Processor, Memory, Drive, StorageController, Fan, Temperature,
	// PowerSupply, System or Chassis.
	// +kubebuilder:validation:MaxLength=32
	Kind string `json:"kind"`
	// Name is the BMC's name for it (a DIMM's slot, a fan's name).
	// +kubebuilder:validation:MaxLength=128
	Name   string      `json:"name"`
	Health HealthState `json:"health"`
}

// WipeReport is what the probe reports after wiping a server's disks.
type WipeReport struct {
	// ReportedAt is when the registry received the report.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// Policy the probe was asked to apply.
	// +optional
	Policy WipePolicy `json:"policy,omitempty"`
	// Disks has one entry per disk the probe found.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Disks []DiskWipe `json:"disks,omitempty"`
}

// DiskWipe is one disk's wipe result.
type DiskWipe struct {
	Name string `json:"name"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// Method is what was done: metadata, zero, secure (the device's own erase, read back), none,
	// or zero-fallback (reported by older probes only: secure erase was not
	// available, the whole device was zeroed instead). The erase policy reports secure or zero,
	// whichever ran.
	// +kubebuilder:validation:Enum=metadata;zero;secure;zero-fallback;none
	Method string `json:"method"`
	// Succeeded is true when the method completed on the whole range it covers.
	Succeeded bool `json:"succeeded"`
	// +optional
	Message string `json:"message,omitempty"`
}

// Reasons of an InstallReport: Installed, or why the install failed.
const (
	InstallReasonInstalled          = "Installed"
	InstallReasonImageUnreachable   = "ImageUnreachable"
	InstallReasonFormatUnsupported  = "ImageFormatUnsupported"
	InstallReasonChecksumMismatch   = "ChecksumMismatch"
	InstallReasonNoMatchingDisk     = "NoMatchingDisk"
	InstallReasonSeveralDisksMatch  = "SeveralDisksMatch"
	InstallReasonImageTooLarge      = "ImageTooLarge"
	InstallReasonWriteFailed        = "WriteFailed"
	InstallReasonVerifyFailed       = "VerifyFailed"
	InstallReasonConfigDriveFailed  = "ConfigDriveFailed"
	InstallReasonInstallInterrupted = "InstallInterrupted"
)

// InstallReport is what the probe reports after writing an image to a disk (or failing to).
type InstallReport struct {
	// ReportedAt is when the registry received the report.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// Image is the image reference installed (as the claim gave it).
	// +kubebuilder:validation:MaxLength=2048
	Image string `json:"image"`
	// ImageChecksum is the claim's checksum the image was verified against, if any.
	// +optional
	ImageChecksum string `json:"imageChecksum,omitempty"`
	// Succeeded is true when the image was written, read back and verified, and the config
	// drive written.
	Succeeded bool `json:"succeeded"`
	// Reason is Installed, or why not (ImageUnreachable, ImageFormatUnsupported,
	// ChecksumMismatch, NoMatchingDisk, SeveralDisksMatch, ImageTooLarge, WriteFailed,
	// VerifyFailed, ConfigDriveFailed, InstallInterrupted).
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Message string `json:"message,omitempty"`
	// Disk is the kernel name of the disk written, and DiskSerial its serial number.
	// +optional
	Disk string `json:"disk,omitempty"`
	// +optional
	DiskSerial string `json:"diskSerial,omitempty"`
	// Bytes is the size of the raw image written.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
	// ServedDigest is the digest of the image as served (sha256:<hex> or sha512:<hex>, the
	// algorithm of the checksum; sha256 without one).
	// +optional
	ServedDigest string `json:"servedDigest,omitempty"`
	// WrittenDigest is the sha256 of the raw bytes written, as read back from the disk.
	// +optional
	WrittenDigest string `json:"writtenDigest,omitempty"`
	// ConfigDrive is the partition holding the config drive, e.g. vda2.
	// +optional
	ConfigDrive string `json:"configDrive,omitempty"`
	// WipedAfterFailure says the disk was wiped again after a failed install.
	// +optional
	WipedAfterFailure bool `json:"wipedAfterFailure,omitempty"`
}

// Server is one physical machine, created by Ironfleet for each ComputerSystem a BMC exposes.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=srv,categories=metal
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerState`
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health.state`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.serverClaimRef.name`
// +kubebuilder:printcolumn:name="Wipe",type=string,JSONPath=`.spec.wipePolicy`
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.status.hardware.cpus`
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=`.status.hardware.memory`
// +kubebuilder:printcolumn:name="Disk",type=string,JSONPath=`.status.hardware.storage`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.model`
// +kubebuilder:printcolumn:name="Boot",type=string,JSONPath=`.status.bootMode`,priority=1
// +kubebuilder:printcolumn:name="UUID",type=string,JSONPath=`.spec.systemUUID`,priority=1
// +kubebuilder:printcolumn:name="BMC",type=string,JSONPath=`.spec.bmcRef.name`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.lastTransitionReason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Server"
type Server struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerSpec   `json:"spec,omitempty"`
	Status ServerStatus `json:"status,omitempty"`
}

// ServerList is a list of Servers.
// +kubebuilder:object:root=true
type ServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Server `json:"items"`
}
