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
	// BootMethod is how the server boots what this configuration serves: PXE (the default)
	// or VirtualMedia, for which the boot service also serves a per-boot ISO and publishes its
	// URL in the Secret status.bootMediaSecretRef names.
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
	// a bearer secret (the ISO holds the ignition), hence a Secret. VirtualMedia boots only.
	// +optional
	BootMediaSecretRef *LocalObjectReference `json:"bootMediaSecretRef,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
