package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// DefaultFailureDomainLabel is the Server label whose values are a cluster's failure domains
// when spec.failureDomainLabel is not set.
const DefaultFailureDomainLabel = "topology.kubernetes.io/zone"

// IronfleetClusterSpec is the infrastructure of a workload cluster on Ironfleet servers: where
// its control plane is reached, and which Server label divides the pool into failure domains.
type IronfleetClusterSpec struct {
	// ControlPlaneEndpoint is the address of the cluster's API server: a VIP or DNS name that
	// the user provides (kube-vip, a load balancer, DNS round robin), since bare metal has no
	// cloud load balancer to make one. The cluster is Ready once it is a valid host and port.
	// +optional
	ControlPlaneEndpoint clusterv1.APIEndpoint `json:"controlPlaneEndpoint,omitempty,omitzero"`

	// FailureDomainLabel is the Server label whose values are the cluster's failure domains
	// (default topology.kubernetes.io/zone). A Machine placed in failure domain "a" is served by
	// a Server labelled <failureDomainLabel>=a.
	// +kubebuilder:default="topology.kubernetes.io/zone"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +optional
	FailureDomainLabel string `json:"failureDomainLabel,omitempty"`
}

// IronfleetClusterStatus is what Cluster API reads of the cluster's infrastructure.
type IronfleetClusterStatus struct {
	// Initialization: provisioned is true once the control plane endpoint is valid.
	// +optional
	Initialization IronfleetClusterInitializationStatus `json:"initialization,omitempty,omitzero"`

	// FailureDomains are the values of spec.failureDomainLabel among Servers, each usable by
	// control plane machines.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=100
	// +optional
	FailureDomains []clusterv1.FailureDomain `json:"failureDomains,omitempty"`

	// Conditions: Ready (reasons ControlPlaneEndpointMissing, Provisioned) and Paused; every
	// reason is in docs/capi.md.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// IronfleetClusterInitializationStatus is the contract's initialization field.
// +kubebuilder:validation:MinProperties=1
type IronfleetClusterInitializationStatus struct {
	// Provisioned is true when the cluster's infrastructure is ready for its machines.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// IronfleetCluster is a Cluster API cluster's infrastructure on an Ironfleet server pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ifc,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IronfleetCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IronfleetClusterSpec   `json:"spec,omitempty"`
	Status IronfleetClusterStatus `json:"status,omitempty"`
}

// IronfleetClusterList is a list of IronfleetClusters.
// +kubebuilder:object:root=true
type IronfleetClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IronfleetCluster `json:"items"`
}
