package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BootPurpose says why a server is being network-booted.
// +kubebuilder:validation:Enum=Discovery;Provisioning;Cleanup
type BootPurpose string

const (
	BootPurposeDiscovery    BootPurpose = "Discovery"
	BootPurposeProvisioning BootPurpose = "Provisioning"
	BootPurposeCleanup      BootPurpose = "Cleanup"
)

// ServerBootConfigurationSpec asks an external boot service to serve a server an image.
// +kubebuilder:validation:XValidation:rule="self.serverRef == oldSelf.serverRef && self.purpose == oldSelf.purpose",message="serverRef and purpose are immutable; create a new ServerBootConfiguration"
type ServerBootConfigurationSpec struct {
	// ServerRef names the (cluster-scoped) Server to boot.
	ServerRef LocalObjectReference `json:"serverRef"`
	// Image to boot.
	// +kubebuilder:validation:MaxLength=2048
	// +optional
	Image string `json:"image,omitempty"`
	// IgnitionSecretRef names a Secret in this namespace with the ignition the image boots with.
	// +optional
	IgnitionSecretRef *LocalObjectReference `json:"ignitionSecretRef,omitempty"`
	// Purpose of the boot.
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Purpose"
	Purpose BootPurpose `json:"purpose"`
	// BootMethod is how the server boots what this configuration serves: PXE (the default),
	// VirtualMedia or UefiHttp, for which the boot service serves a per-boot ISO and publishes
	// its URL in the Secret status.bootMediaSecretRef names (for UefiHttp, a URL the server's
	// firmware reaches, on the boot service's public URL).
	// +optional
	BootMethod BootMethod `json:"bootMethod,omitempty"`
}

// BootConfigurationState is whether the boot service is ready to serve the boot.
// +kubebuilder:validation:Enum=Pending;Ready;Error
type BootConfigurationState string

const (
	BootConfigurationStatePending BootConfigurationState = "Pending"
	BootConfigurationStateReady   BootConfigurationState = "Ready"
	BootConfigurationStateError   BootConfigurationState = "Error"
)

// ServerBootConfigurationStatus is set by the boot service.
type ServerBootConfigurationStatus struct {
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="State"
	State BootConfigurationState `json:"state,omitempty"`
	// BootMediaSecretRef names the Secret (in this namespace, owned by this configuration) whose
	// key "url" is the URL of this boot's ISO, for a BMC to insert as virtual media. The URL is
	// a bearer secret (the ISO holds the ignition), hence a Secret. VirtualMedia and UefiHttp
	// boots only.
	// +optional
	BootMediaSecretRef *LocalObjectReference `json:"bootMediaSecretRef,omitempty"`
	// Secrets records where this boot's secrets (its ignition, which holds the probe's
	// registry token) went: the host the boot is bound to and the one serving of the ignition.
	// The boot service writes it, under an optimistic lock, before it sends a byte, so that a
	// restarted or second boot service refuses a second fetch too.
	// +optional
	Secrets *BootSecrets `json:"secrets,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BootSecrets is the record of one boot's secrets, by the boot service that serves it.
type BootSecrets struct {
	// Boot is the boot this record is about: the configuration's probe-boot annotation (or
	// "generation:<n>" without one). A record of another boot says nothing about this one.
	// +kubebuilder:validation:MaxLength=128
	Boot string `json:"boot"`
	// HostAddress is the IP address the boot is bound to: the DHCP lease of the server's NIC
	// (full DHCP mode), or else the address that fetched the boot's first artifact (its iPXE
	// script, or for virtual media its ISO). Only this address is served the rest.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	HostAddress string `json:"hostAddress,omitempty"`
	// HostAddressSource says where HostAddress came from: Lease or FirstFetch.
	// +kubebuilder:validation:Enum=Lease;FirstFetch
	// +optional
	HostAddressSource string `json:"hostAddressSource,omitempty"`
	// IgnitionServedTo is the address the ignition was served to (once; nobody gets it again).
	// +kubebuilder:validation:MaxLength=64
	// +optional
	IgnitionServedTo string `json:"ignitionServedTo,omitempty"`
	// IgnitionServedAt is when.
	// +optional
	IgnitionServedAt *metav1.Time `json:"ignitionServedAt,omitempty"`
	// Ended is set when the boot service ended this boot (a second fetch of its ignition, or
	// a request from another host than the one it is bound to): it serves it no more, and the
	// operator makes a new boot with new secrets. The IgnitionServed condition says why.
	// +optional
	Ended bool `json:"ended,omitempty"`
}

// ServerBootConfiguration is a request to an external boot service (PXE/iPXE) to prepare a
// network boot for one server.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sbc,categories=metal
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef.name`
// +kubebuilder:printcolumn:name="Purpose",type=string,JSONPath=`.spec.purpose`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Server Boot Configuration"
type ServerBootConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerBootConfigurationSpec   `json:"spec"`
	Status ServerBootConfigurationStatus `json:"status,omitempty"`
}

// ServerBootConfigurationList is a list of ServerBootConfigurations.
// +kubebuilder:object:root=true
type ServerBootConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerBootConfiguration `json:"items"`
}
