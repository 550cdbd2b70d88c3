package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BMCAccess says how to reach a BMC directly, without an Endpoint.
type BMCAccess struct {
	// Address is a BMC URL: redfish://, redfish+https://, redfish+http://, idrac-redfish://,
	// ilo5-redfish://, ipmi://host:623 and the other schemes of Metal3's hardwareutils/bmc.
	// e.g. redfish+https://10.0.0.5/redfish/v1
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9+.-]*://[^/?#]+')",message="address must be a BMC URL with a scheme and a host, e.g. redfish+https://10.0.0.5/redfish/v1 or ipmi://10.0.0.6:623"
	Address string `json:"address"`
}

// BMCSpec says how to reach and log in to a baseboard management controller.
// +kubebuilder:validation:XValidation:rule="has(self.endpointRef) != has(self.access)",message="exactly one of endpointRef or access must be set, never both"
type BMCSpec struct {
	// EndpointRef names the Endpoint this BMC was found at; its IP and the MAC-prefix database
	// give the address.
	// +optional
	EndpointRef *LocalObjectReference `json:"endpointRef,omitempty"`

	// Access gives the BMC's address directly.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Access"
	Access *BMCAccess `json:"access,omitempty"`

	// BMCSecretRef names the BMCSecret holding the credentials.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Credentials"
	BMCSecretRef LocalObjectReference `json:"bmcSecretRef"`

	// InsecureSkipVerify turns off TLS certificate verification for this BMC. Off by default:
	// set it only for BMCs that present self-signed certificates on a trusted network.
	// +kubebuilder:default=false
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Skip TLS verification",xDescriptors="urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`

	// BootMethod is how the probe boots on this BMC's servers for discovery, install and
	// wipe: PXE (the default), VirtualMedia (a per-boot ISO the BMC mounts; no DHCP or PXE
	// on the servers' network) or UefiHttp (the same ISO, which the server's firmware fetches
	// by UEFI HTTP boot from a URI the BMC sets; DHCP gives an address only). A BMC without
	// usable virtual media says so in Ready (VirtualMediaUnsupported) and none of its servers
	// is booted; one that cannot boot a URI says so in HTTPBoot, and its servers boot by PXE.
	// +kubebuilder:default=PXE
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Boot method"
	BootMethod BootMethod `json:"bootMethod,omitempty"`

	// ProbeNetwork is the probe's static network on this BMC's server, carried in its ignition
	// (virtual-media boots on networks without DHCP). It applies when the BMC manages a single
	// system; a Server's own spec.probeNetwork takes precedence. Empty: DHCP.
	// +optional
	ProbeNetwork *ProbeNetwork `json:"probeNetwork,omitempty"`
}

// BMCState summarises whether Ironfleet can manage the BMC.
// +kubebuilder:validation:Enum=Pending;Enabled;Error
type BMCState string

// BMCProtocol is the management protocol a BMC is driven with.
// +kubebuilder:validation:Enum=Redfish;IPMI
type BMCProtocol string

// The protocols Ironfleet drives BMCs with.
const (
	BMCProtocolRedfish BMCProtocol = "Redfish"
	BMCProtocolIPMI    BMCProtocol = "IPMI"
)

const (
	BMCStatePending BMCState = "Pending"
	BMCStateEnabled BMCState = "Enabled"
	BMCStateError   BMCState = "Error"
)

// Reasons of a BMC's Ready condition.
const (
	BMCReasonConnected            = "Connected"
	BMCReasonAuthenticationFailed = "AuthenticationFailed"
	BMCReasonUnreachable          = "Unreachable"
	BMCReasonProtocolError        = "ProtocolError"
	BMCReasonUnsupportedProtocol  = "UnsupportedProtocol"
	// BMCReasonVirtualMediaUnsupported: bootMethod is VirtualMedia but the BMC offers no
	// CD/DVD virtual media slot Ironfleet can insert an ISO into; the message says what it found.
	BMCReasonVirtualMediaUnsupported = "VirtualMediaUnsupported"
	// BMCReasonTooManySystems: the BMC lists more systems than a BMC may have
	// (--max-systems-per-bmc); no Server is made for any of them.
	BMCReasonTooManySystems = "TooManySystems"
)

// BMCStatus is what the BMC last told us about itself.
type BMCStatus struct {
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="State"
	State BMCState `json:"state,omitempty"`
	// Address the BMC was last reached at (resolved from the Endpoint when endpointRef is used).
	// +optional
	Address string `json:"address,omitempty"`
	// Protocol Ironfleet speaks to the BMC, from its address's scheme: Redfish (redfish://,
	// redfish+https://, idrac-redfish://, …) or IPMI (ipmi://).
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Protocol"
	Protocol BMCProtocol `json:"protocol,omitempty"`
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// MACAddress is the BMC's own network MAC, when it reports it (IPMI BMCs do).
	// +optional
	MACAddress string `json:"macAddress,omitempty"`
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Firmware"
	FirmwareVersion string `json:"firmwareVersion,omitempty"`
	// PowerState of the manager itself.
	// +optional
	PowerState PowerState `json:"powerState,omitempty"`
	// LastSeen is when the BMC last answered, to within six poll periods: a poll that changes
	// nothing else does not rewrite it.
	// +optional
	LastSeen *metav1.Time `json:"lastSeen,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: OutOfBandInventory (False, InventoryUnsupported, on IPMI BMCs); Ready
	// (reasons Connected, AuthenticationFailed, Unreachable, ProtocolError,
	// UnsupportedProtocol).
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BMC is a baseboard management controller Ironfleet manages servers through.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bmc,categories=metal
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.protocol`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.status.address`
// +kubebuilder:printcolumn:name="Manufacturer",type=string,JSONPath=`.status.manufacturer`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.model`
// +kubebuilder:printcolumn:name="Firmware",type=string,JSONPath=`.status.firmwareVersion`
// +kubebuilder:printcolumn:name="Boot",type=string,JSONPath=`.spec.bootMethod`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Serial",type=string,JSONPath=`.status.serialNumber`,priority=1
// +kubebuilder:printcolumn:name="Last Seen",type=date,JSONPath=`.status.lastSeen`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="BMC"
type BMC struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BMCSpec   `json:"spec"`
	Status BMCStatus `json:"status,omitempty"`
}

// BMCList is a list of BMCs.
// +kubebuilder:object:root=true
type BMCList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BMC `json:"items"`
}
