package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FirmwareComponentClass is what a firmware component is for: the system's BIOS (UEFI
// firmware), the BMC's own firmware, or another device's (a NIC, a drive, a storage
// controller, a CPLD, a power supply).
// +kubebuilder:validation:Enum=BIOS;BMC;Other
type FirmwareComponentClass string

const (
	FirmwareComponentBIOS  FirmwareComponentClass = "BIOS"
	FirmwareComponentBMC   FirmwareComponentClass = "BMC"
	FirmwareComponentOther FirmwareComponentClass = "Other"
)

// FirmwareComponent is one installed firmware component as the server's BMC lists it (Redfish
// UpdateService/FirmwareInventory).
type FirmwareComponent struct {
	// ID is the BMC's own id of the component (vendor-specific: Dell's Installed-159-2.19.1,
	// Supermicro's BIOS).
	// +kubebuilder:validation:MaxLength=256
	ID string `json:"id"`
	// Name is the BMC's name for it.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Name  string                 `json:"name,omitempty"`
	Class FirmwareComponentClass `json:"class"`
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Version string `json:"version,omitempty"`
	// Updateable says whether the BMC can update it.
	// +optional
	Updateable bool `json:"updateable,omitempty"`
}

// FirmwareSettings are a settings resource's attributes as the BMC reports them, values as text
// (an integer in decimal, a boolean true or false).
type FirmwareSettings struct {
	// Registry names the attribute registry the BMC defines the attributes in; empty when it
	// publishes none (values cannot then be checked before they are sent).
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Registry string `json:"registry,omitempty"`
	// Attributes are the values in effect.
	// +kubebuilder:validation:MaxProperties=4096
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
	// Pending are values staged for the next reset, not yet in effect.
	// +kubebuilder:validation:MaxProperties=4096
	// +optional
	Pending map[string]string `json:"pending,omitempty"`
}

// ObservedBaseline is a FirmwareBaseline at a generation.
type ObservedBaseline struct {
	// +kubebuilder:validation:MaxLength=253
	Name       string `json:"name"`
	Generation int64  `json:"generation"`
}

// FirmwareDifferenceKind is what differs: a component's version or a setting.
// +kubebuilder:validation:Enum=Component;BIOSSetting;BMCSetting
type FirmwareDifferenceKind string

const (
	FirmwareDifferenceComponent   FirmwareDifferenceKind = "Component"
	FirmwareDifferenceBIOSSetting FirmwareDifferenceKind = "BIOSSetting"
	FirmwareDifferenceBMCSetting  FirmwareDifferenceKind = "BMCSetting"
)

// FirmwareDifference is one thing a server runs otherwise than its baseline wants.
type FirmwareDifference struct {
	Kind FirmwareDifferenceKind `json:"kind"`
	// Name is the component (BIOS, BMC, or an inventory id) or the attribute.
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Want is what the baseline wants; Have what the BMC reports ("" when it reports none).
	// +kubebuilder:validation:MaxLength=1024
	Want string `json:"want"`
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Have string `json:"have,omitempty"`
	// Baseline is the FirmwareBaseline that wants it.
	// +kubebuilder:validation:MaxLength=253
	Baseline string `json:"baseline"`
	// Invalid says why the want cannot be sent to this server's BMC (an attribute its registry
	// does not define, a value it does not allow); empty when it can.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Invalid string `json:"invalid,omitempty"`
}

// FirmwareUpdateState is where a server's update to its baseline stands
// (docs/firmware-update-lifecycle.md).
// +kubebuilder:validation:Enum=Waiting;EnteringMaintenance;Staging;Installing;Rebooting;Verifying;Succeeded;Failed;Withdrawn
type FirmwareUpdateState string

const (
	// FirmwareUpdateWaiting: the server differs from its baseline and waits for its turn (the
	// baseline's maxUnavailable) or for the rollout to go on (stopped by maxFailures).
	FirmwareUpdateWaiting FirmwareUpdateState = "Waiting"
	// FirmwareUpdateEnteringMaintenance: a ServerMaintenance was made and waits to hold the
	// server (a claimed server's owner's approval under OwnerApproval).
	FirmwareUpdateEnteringMaintenance FirmwareUpdateState = "EnteringMaintenance"
	// FirmwareUpdateStaging: settings and updates are being sent to the BMC.
	FirmwareUpdateStaging FirmwareUpdateState = "Staging"
	// FirmwareUpdateInstalling: the BMC's tasks are followed to their end.
	FirmwareUpdateInstalling FirmwareUpdateState = "Installing"
	// FirmwareUpdateRebooting: the maintenance was ended so the host boots (its probe, for a
	// pool server) with what was installed.
	FirmwareUpdateRebooting FirmwareUpdateState = "Rebooting"
	// FirmwareUpdateVerifying: the BMC is read again, and the host's own word (its probe's
	// SMBIOS) is awaited.
	FirmwareUpdateVerifying FirmwareUpdateState = "Verifying"
	// FirmwareUpdateSucceeded: the BMC and the host agree the server runs what was wanted.
	FirmwareUpdateSucceeded FirmwareUpdateState = "Succeeded"
	// FirmwareUpdateFailed: the server stays in maintenance, with the reason.
	FirmwareUpdateFailed FirmwareUpdateState = "Failed"
	// FirmwareUpdateWithdrawn: before anything was sent, the baseline stopped wanting it (it
	// was deleted or changed, or the server left its selector).
	FirmwareUpdateWithdrawn FirmwareUpdateState = "Withdrawn"
)

// FirmwareUpdateStep is one thing an update sends to the BMC: a component's image, or the BIOS
// settings (all in one step).
type FirmwareUpdateStep struct {
	Kind FirmwareDifferenceKind `json:"kind"`
	// Name is the component (BIOS, BMC, an inventory id) or, for settings, "BIOS settings".
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// From and To are the versions (for settings: the attributes, as name=value).
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	From string `json:"from,omitempty"`
	// +kubebuilder:validation:MaxLength=1024
	To string `json:"to"`
	// Task is the BMC's task that installs it; empty until it started, and for settings.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Task string `json:"task,omitempty"`
	// TaskState is the task's TaskState as the BMC last said (Staged for settings).
	// +kubebuilder:validation:MaxLength=32
	// +optional
	TaskState string `json:"taskState,omitempty"`
	// Percent is the task's PercentComplete.
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// Read is what the BMC reported of it at its last read after the reset (a version, or an
	// attribute's value): the update is verified against To by it.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Read *string `json:"read,omitempty"`
}

// FirmwareUpdate is the server's update to its baseline, the last one or the one under way.
type FirmwareUpdate struct {
	// Baseline is the FirmwareBaseline, at BaselineGeneration, whose wants are installed.
	// +kubebuilder:validation:MaxLength=253
	Baseline           string              `json:"baseline"`
	BaselineGeneration int64               `json:"baselineGeneration"`
	State              FirmwareUpdateState `json:"state"`
	// HostReset says the host must leave service and be reset: a BIOS, a device's firmware or
	// BIOS settings. A BMC's own firmware alone needs no host downtime: the host stays in
	// service, claimed and powered.
	HostReset bool `json:"hostReset,omitempty"`
	// Maintenance is the ServerMaintenance that holds the server for it.
	// +optional
	Maintenance *ObjectReference `json:"maintenance,omitempty"`
	// Steps are what is sent, in order.
	// +kubebuilder:validation:MaxItems=65
	// +listType=atomic
	// +optional
	Steps []FirmwareUpdateStep `json:"steps,omitempty"`
	// StartTime is when it was admitted, StateTime when it entered its state.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// +optional
	StateTime *metav1.Time `json:"stateTime,omitempty"`
	// ResetTime is when the maintenance was ended for the host's reset: a pool server's probe
	// report from then on is the host's own word on what it runs.
	// +optional
	ResetTime *metav1.Time `json:"resetTime,omitempty"`
	// Reason and Message say why it is where it is; for a failure, what to do.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Message string `json:"message,omitempty"`
}

// ServerFirmwareSpec names the Server whose firmware this is.
// +kubebuilder:validation:XValidation:rule="self.serverRef == oldSelf.serverRef",message="serverRef is immutable"
type ServerFirmwareSpec struct {
	// ServerRef is the Server, which has the same name and owns this object.
	ServerRef LocalObjectReference `json:"serverRef"`
}

// ServerFirmwareStatus is the server's firmware as its BMC last reported it.
type ServerFirmwareStatus struct {
	// BIOSVersion and BMCVersion are the versions of the BIOS and BMC components.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	BIOSVersion string `json:"biosVersion,omitempty"`
	// +kubebuilder:validation:MaxLength=256
	// +optional
	BMCVersion string `json:"bmcVersion,omitempty"`
	// Components is the firmware inventory: the installed version of each component.
	// +kubebuilder:validation:MaxItems=512
	// +listType=map
	// +listMapKey=id
	// +optional
	Components []FirmwareComponent `json:"components,omitempty"`
	// BIOS is the system's BIOS settings (Redfish Bios); nil when the BMC exposes none.
	// +optional
	BIOS *FirmwareSettings `json:"bios,omitempty"`
	// BMC is the BMC's own settings (its Manager's attributes), where the vendor exposes them
	// (Dell's iDRAC); nil when it exposes none.
	// +optional
	BMC *FirmwareSettings `json:"bmc,omitempty"`
	// LastReadTime is when the BMC was last read. Reads happen when the server is enrolled, when
	// its BMC reports another BIOS or BMC version, and when a person asks (the
	// metal.ironfleet.dev/read-firmware annotation), not on every poll: a BMC's registry can run
	// to megabytes.
	// +optional
	LastReadTime *metav1.Time `json:"lastReadTime,omitempty"`
	// ReadBIOSVersion and ReadBMCVersion are the versions the server's and BMC's polls showed
	// when the firmware was last read: when either changes, it is read again.
	// +optional
	ReadBIOSVersion string `json:"readBIOSVersion,omitempty"`
	// +optional
	ReadBMCVersion string `json:"readBMCVersion,omitempty"`
	// Baseline names the FirmwareBaselines that select the server (comma-separated, sorted);
	// empty when none does.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Baseline string `json:"baseline,omitempty"`
	// ObservedBaselines are the baselines, at their generations, that Differences and the
	// Compliant condition were worked out against: when they change, the BMC is read again.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	ObservedBaselines []ObservedBaseline `json:"observedBaselines,omitempty"`
	// Differences are what the server runs that its baselines want otherwise.
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Differences []FirmwareDifference `json:"differences,omitempty"`
	// Update is the server's update to its baseline: the one under way, or the last one.
	// +optional
	Update *FirmwareUpdate `json:"update,omitempty"`
	// Conditions: Read (reasons FirmwareRead, FirmwareManagementUnsupported, FirmwareReadFailed)
	// and Compliant (Compliant, Drifted, NoBaseline, InvalidSetting, ConflictingBaselines,
	// FirmwareManagementUnsupported).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServerFirmware is one Server's firmware inventory and BIOS settings, read from its BMC. It
// has the Server's name and is owned by it: the Server itself carries only the BIOS version,
// so that hundreds of BIOS attributes do not travel with every Server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=sfw,categories=metal
// +kubebuilder:printcolumn:name="BIOS",type=string,JSONPath=`.status.biosVersion`
// +kubebuilder:printcolumn:name="BMC",type=string,JSONPath=`.status.bmcVersion`
// +kubebuilder:printcolumn:name="Baseline",type=string,JSONPath=`.status.baseline`
// +kubebuilder:printcolumn:name="Compliant",type=string,JSONPath=`.status.conditions[?(@.type=="Compliant")].status`
// +kubebuilder:printcolumn:name="Update",type=string,JSONPath=`.status.update.state`
// +kubebuilder:printcolumn:name="Read",type=string,JSONPath=`.status.conditions[?(@.type=="Read")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Server Firmware"
type ServerFirmware struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerFirmwareSpec   `json:"spec"`
	Status ServerFirmwareStatus `json:"status,omitempty"`
}

// ServerFirmwareList is a list of ServerFirmwares.
// +kubebuilder:object:root=true
type ServerFirmwareList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerFirmware `json:"items"`
}
