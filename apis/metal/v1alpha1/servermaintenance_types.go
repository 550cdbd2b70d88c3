package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaintenancePolicy says whether maintenance may take a claimed server without its owner.
// +kubebuilder:validation:Enum=OwnerApproval;Enforced
type MaintenancePolicy string

const (
	// MaintenanceOwnerApproval waits, on a claimed server, until the claim carries the
	// approval annotation.
	MaintenanceOwnerApproval MaintenancePolicy = "OwnerApproval"
	// MaintenanceEnforced takes the server at once.
	MaintenanceEnforced MaintenancePolicy = "Enforced"
)

// ServerMaintenanceSpec asks for a server to be taken out of service.
// +kubebuilder:validation:XValidation:rule="self.serverRef == oldSelf.serverRef",message="serverRef is immutable; create a new ServerMaintenance"
type ServerMaintenanceSpec struct {
	// ServerRef names the (cluster-scoped) Server to maintain.
	ServerRef LocalObjectReference `json:"serverRef"`
	// Reason is shown to the server's owner and in its conditions.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Reason"
	Reason string `json:"reason,omitempty"`
	// Policy for claimed servers.
	// +kubebuilder:default=OwnerApproval
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Policy"
	Policy MaintenancePolicy `json:"policy,omitempty"`
	// Power the server should have while in maintenance.
	// +kubebuilder:default=Off
	// +optional
	Power Power `json:"power,omitempty"`
}

// MaintenanceState is where a maintenance request is.
// +kubebuilder:validation:Enum=Pending;InMaintenance;Failed
type MaintenanceState string

const (
	// MaintenanceStatePending waits for owner approval or for the server to be taken.
	MaintenanceStatePending MaintenanceState = "Pending"
	// MaintenanceStateInMaintenance holds the server.
	MaintenanceStateInMaintenance MaintenanceState = "InMaintenance"
	// MaintenanceStateFailed could not take the server (e.g. it does not exist).
	MaintenanceStateFailed MaintenanceState = "Failed"
)

// ServerMaintenanceStatus says whether the server is held.
type ServerMaintenanceStatus struct {
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="State"
	State MaintenanceState `json:"state,omitempty"`
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServerMaintenance takes a server out of service from any state; deleting it gives the server
// back to its claim, or to re-discovery.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=smaint,categories=metal
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef.name`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policy`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.spec.power`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Server Maintenance"
type ServerMaintenance struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerMaintenanceSpec   `json:"spec"`
	Status ServerMaintenanceStatus `json:"status,omitempty"`
}

// ServerMaintenanceList is a list of ServerMaintenances.
// +kubebuilder:object:root=true
type ServerMaintenanceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerMaintenance `json:"items"`
}
