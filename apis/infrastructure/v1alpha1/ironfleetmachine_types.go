package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ProviderIDPrefix starts every providerID this provider sets: ironfleet://<server name>.
const ProviderIDPrefix = "ironfleet://"

// IronfleetMachineSpec is what a Machine asks of its server: which servers may serve it, and
// the image installed on the one that does. The Machine's bootstrap data becomes the image's
// ignition (cloud-init or Ignition, on the config drive).
// +kubebuilder:validation:XValidation:rule="self.image.startsWith('oci://') || has(self.imageChecksum)",message="imageChecksum (sha256:<hex> or sha512:<hex>) is required for an http(s) image"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || (has(self.providerID) && self.providerID == oldSelf.providerID)",message="providerID cannot change once set"
type IronfleetMachineSpec struct {
	// ProviderID is ironfleet://<server>, the Server that serves this machine, set by the
	// provider once the server runs its image; a node's kubelet reports the same
	// (--provider-id, from its config drive's meta.server).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ProviderID string `json:"providerID,omitempty"`

	// ServerSelector selects the Servers that may serve this machine, by label. The Machine's
	// failure domain narrows it further (the cluster's failureDomainLabel).
	// +optional
	ServerSelector *metalv1alpha1.ServerSelector `json:"serverSelector,omitempty"`

	// MinCPUCores is the least number of physical CPU cores the server must have.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MinCPUCores *int32 `json:"minCPUCores,omitempty"`
	// MinMemory is the least total memory the server must have, e.g. 64Gi.
	// +optional
	MinMemory *resource.Quantity `json:"minMemory,omitempty"`
	// MinTotalDisk is the least total disk capacity the server must have, e.g. 1Ti.
	// +optional
	MinTotalDisk *resource.Quantity `json:"minTotalDisk,omitempty"`

	// Image is the node's OS, written to the server's disk: an http(s):// raw disk image
	// (plain, .gz, .zst or .xz) or an oci:// artifact of one, as a ServerClaim's image.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://') || self.startsWith('oci://')",message="image must be an http://, https:// or oci:// reference to a raw disk image"
	Image string `json:"image"`

	// ImageChecksum is the digest of the image as served, sha256:<64 hex> or sha512:<128 hex>;
	// required for http(s) images.
	// +kubebuilder:validation:Pattern=`^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$`
	// +optional
	ImageChecksum string `json:"imageChecksum,omitempty"`

	// RootDeviceHints choose the disk the image is written to (as a ServerClaim's).
	// +optional
	RootDeviceHints *metalv1alpha1.RootDeviceHints `json:"rootDeviceHints,omitempty"`
}

// IronfleetMachineStatus is what Cluster API reads of a machine's infrastructure.
type IronfleetMachineStatus struct {
	// Initialization: provisioned is true once the server runs the image with the Machine's
	// bootstrap data.
	// +optional
	Initialization IronfleetMachineInitializationStatus `json:"initialization,omitempty,omitzero"`

	// ServerRef is the Server serving this machine.
	// +optional
	ServerRef *metalv1alpha1.LocalObjectReference `json:"serverRef,omitempty"`

	// Addresses are the server's, from its hardware inventory (its NICs' addresses as the
	// probe saw them), and its hostname.
	// +optional
	Addresses clusterv1.MachineAddresses `json:"addresses,omitempty"`

	// FailureDomain is the value of the cluster's failureDomainLabel on the server.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// Conditions: Ready (why the machine waits, or Provisioned) and Paused; every reason is in
	// docs/capi.md.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// IronfleetMachineInitializationStatus is the contract's initialization field.
// +kubebuilder:validation:MinProperties=1
type IronfleetMachineInitializationStatus struct {
	// Provisioned is true when the machine's server runs its image.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// Reasons of an IronfleetMachine's Ready condition (besides the ServerClaim's own, which pass
// through while it binds and installs). Every one is in docs/capi.md.
const (
	// MachineReasonWaitingForMachine: no Machine owns the IronfleetMachine yet.
	MachineReasonWaitingForMachine = "WaitingForMachine"
	// MachineReasonWaitingForCluster: the Machine names no Cluster, or it does not exist.
	MachineReasonWaitingForCluster = "WaitingForCluster"
	// MachineReasonWaitingForClusterInfrastructure: the Cluster's infrastructure is not
	// provisioned yet.
	MachineReasonWaitingForClusterInfrastructure = "WaitingForClusterInfrastructure"
	// MachineReasonWaitingForBootstrapData: the Machine's bootstrap data Secret is not there yet.
	MachineReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	// MachineReasonBootstrapDataInvalid: the bootstrap data Secret has no "value", or it is
	// larger than a config drive takes.
	MachineReasonBootstrapDataInvalid = "BootstrapDataInvalid"
	// MachineReasonClaimNameTaken: a ServerClaim of the machine's name, or a Secret of its
	// <machine>-bootstrap-data name, exists that this machine did not make.
	MachineReasonClaimNameTaken = "ClaimNameTaken"
	// MachineReasonWaitingForServer: the claim holds no server (yet, or any more).
	MachineReasonWaitingForServer = "WaitingForServer"
	// MachineReasonServerReplaced: the claim is bound to another server than the providerID
	// names; the Machine needs replacing (a MachineHealthCheck does it).
	MachineReasonServerReplaced = "ServerReplaced"
	// MachineReasonWaitingForInstall: the claim holds a server that does not run the image yet
	// (and says nothing more).
	MachineReasonWaitingForInstall = "WaitingForInstall"
	// MachineReasonProvisioned: the server runs the image with the bootstrap data.
	MachineReasonProvisioned = "Provisioned"
	// MachineReasonDeleting: the claim is being released; its server is wiped and pooled.
	MachineReasonDeleting = "Deleting"
	// MachineReasonClaimCreated, an event: the machine's ServerClaim was made.
	MachineReasonClaimCreated = "ClaimCreated"
)

// Reasons of an IronfleetCluster's Ready condition.
const (
	// ClusterReasonControlPlaneEndpointMissing: spec.controlPlaneEndpoint is not a valid host
	// and port.
	ClusterReasonControlPlaneEndpointMissing = "ControlPlaneEndpointMissing"
	// ClusterReasonProvisioned: the cluster's infrastructure is ready.
	ClusterReasonProvisioned = "Provisioned"
)

// ConditionPaused, on both kinds, says whether the provider leaves the object alone: its
// Cluster's spec.paused, or its own cluster.x-k8s.io/paused annotation (clusterctl move).
const (
	ConditionPaused = "Paused"
	// ConditionReady is each kind's summary, mirrored by Cluster API into the Machine's
	// InfrastructureReady (the Cluster's InfrastructureReady).
	ConditionReady  = "Ready"
	ReasonPaused    = "Paused"
	ReasonNotPaused = "NotPaused"
)

// BootstrapDataKey is the key of a Machine's bootstrap data Secret (Cluster API's).
const BootstrapDataKey = "value"

const (
	// MachineFinalizer holds an IronfleetMachine until its claim is gone.
	MachineFinalizer = "infrastructure.cluster.x-k8s.io/ironfleet"
	// LabelMachine, on a ServerClaim and its bootstrap-data Secret, names the IronfleetMachine
	// (in the same namespace) they belong to. A label, not an owner reference: clusterctl move
	// deletes the source's objects, and garbage collection would then release running nodes'
	// servers (docs/capi.md).
	LabelMachine = "infrastructure.ironfleet.dev/machine"
)

// IronfleetMachine is a Cluster API Machine's infrastructure: an Ironfleet server, claimed
// with a ServerClaim of the same name and namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=ifm,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.serverRef.name`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IronfleetMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   IronfleetMachineSpec   `json:"spec,omitempty"`
	Status IronfleetMachineStatus `json:"status,omitempty"`
}

// IronfleetMachineList is a list of IronfleetMachines.
// +kubebuilder:object:root=true
type IronfleetMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IronfleetMachine `json:"items"`
}

// IronfleetMachineTemplateSpec is the template a MachineDeployment or control plane makes
// IronfleetMachines of.
type IronfleetMachineTemplateSpec struct {
	Template IronfleetMachineTemplateResource `json:"template"`
}

// IronfleetMachineTemplateResource is one IronfleetMachine to be.
type IronfleetMachineTemplateResource struct {
	// Metadata given to the IronfleetMachines made of this template.
	// +optional
	ObjectMeta clusterv1.ObjectMeta `json:"metadata,omitempty,omitzero"`
	Spec       IronfleetMachineSpec `json:"spec"`
}

// IronfleetMachineTemplate is the template of IronfleetMachines.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=ifmt,categories=cluster-api
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.image`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IronfleetMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IronfleetMachineTemplateSpec `json:"spec,omitempty"`
}

// IronfleetMachineTemplateList is a list of IronfleetMachineTemplates.
// +kubebuilder:object:root=true
type IronfleetMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IronfleetMachineTemplate `json:"items"`
}
