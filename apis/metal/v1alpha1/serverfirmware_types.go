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
	// Conditions: Read (reasons FirmwareRead, FirmwareManagementUnsupported, FirmwareReadFailed).
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
// +kubebuilder:printcolumn:name="Read",type=string,JSONPath=`.status.conditions[?(@.type=="Read")].reason`
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
