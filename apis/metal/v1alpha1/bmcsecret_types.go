package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BMCSecretSpec holds a BMC's login. It is immutable: to rotate credentials, create a new
// BMCSecret and point the BMC at it, so that no reconcile ever sees half a change.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="BMCSecret credentials are immutable; create a new BMCSecret and point the BMC's bmcSecretRef at it"
type BMCSecretSpec struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Username"
	Username string `json:"username"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Password",xDescriptors="urn:alm:descriptor:com.tectonic.ui:password"
	Password string `json:"password"`
}

// BMCSecretStatus says which BMCs use the secret. It never echoes the credentials.
type BMCSecretStatus struct {
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BMCSecret is the username and password of a BMC. Its printer columns never show them.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bmcsec,categories=metal
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="BMC Secret"
type BMCSecret struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BMCSecretSpec   `json:"spec"`
	Status BMCSecretStatus `json:"status,omitempty"`
}

// BMCSecretList is a list of BMCSecrets.
// +kubebuilder:object:root=true
type BMCSecretList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BMCSecret `json:"items"`
}
