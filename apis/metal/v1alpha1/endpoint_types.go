package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EndpointSpec is a MAC/IP pair seen on the out-of-band management network.
type EndpointSpec struct {
	// MACAddress of the interface, six colon-separated hex octets (e.g. 3c:ec:ef:01:02:03).
	// +kubebuilder:validation:MaxLength=17
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$')",message="macAddress must be six colon-separated hex octets, e.g. 3c:ec:ef:01:02:03"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="macAddress is immutable; create a new Endpoint"
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="MAC address"
	MACAddress string `json:"macAddress"`

	// IP address the interface answers on.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="ip must be an IPv4 or IPv6 address"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="IP address"
	IP string `json:"ip,omitempty"`
}

// EndpointStatus records what the MAC-prefix database said about the endpoint.
type EndpointStatus struct {
	// MACPrefix is the longest database prefix that matched.
	// +optional
	MACPrefix string `json:"macPrefix,omitempty"`
	// Manufacturer of the BMC, from the matched prefix.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Manufacturer"
	Manufacturer string `json:"manufacturer,omitempty"`
	// Protocol the BMC speaks, from the matched prefix (e.g. Redfish).
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// Scheme (http or https) and Port to reach the BMC on, from the matched prefix.
	// +optional
	Scheme string `json:"scheme,omitempty"`
	// +optional
	Port int32 `json:"port,omitempty"`
	// BMCRef names the BMC created for this endpoint.
	// +optional
	BMCRef *LocalObjectReference `json:"bmcRef,omitempty"`
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Matched.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Endpoint is a MAC/IP seen on the out-of-band network. When its MAC matches the MAC-prefix
// database, Ironfleet creates a BMC and BMCSecret for it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mep,categories=metal
// +kubebuilder:printcolumn:name="MAC",type=string,JSONPath=`.spec.macAddress`
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.spec.ip`
// +kubebuilder:printcolumn:name="Manufacturer",type=string,JSONPath=`.status.manufacturer`
// +kubebuilder:printcolumn:name="Protocol",type=string,JSONPath=`.status.protocol`
// +kubebuilder:printcolumn:name="Matched",type=string,JSONPath=`.status.conditions[?(@.type=="Matched")].status`
// +kubebuilder:printcolumn:name="BMC",type=string,JSONPath=`.status.bmcRef.name`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Endpoint"
type Endpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EndpointSpec   `json:"spec"`
	Status EndpointStatus `json:"status,omitempty"`
}

// EndpointList is a list of Endpoints.
// +kubebuilder:object:root=true
type EndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Endpoint `json:"items"`
}
