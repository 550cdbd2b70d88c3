package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServerClaimSpec is a user's request for a server: which one (by name, labels or hardware),
// what to boot on it, and whether it should be on.
type ServerClaimSpec struct {
	// ServerRef names the Server wanted. With serverSelector, both must match.
	// +optional
	ServerRef *LocalObjectReference `json:"serverRef,omitempty"`

	// ServerSelector selects Servers by label, like a Kubernetes label selector.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Server selector"
	ServerSelector *ServerSelector `json:"serverSelector,omitempty"`

	// MinCPUCores is the least number of physical CPU cores the server must have.
	// +kubebuilder:validation:Minimum=1
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Minimum CPU cores",xDescriptors="urn:alm:descriptor:com.tectonic.ui:number"
	MinCPUCores *int32 `json:"minCPUCores,omitempty"`

	// MinMemory is the least total memory the server must have, e.g. 64Gi.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Minimum memory"
	MinMemory *resource.Quantity `json:"minMemory,omitempty"`

	// MinTotalDisk is the least total disk capacity the server must have, e.g. 1Ti.
	// +optional
	MinTotalDisk *resource.Quantity `json:"minTotalDisk,omitempty"`

	// Power is whether the claimed server should be on.
	// +kubebuilder:default=On
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Power"
	Power Power `json:"power,omitempty"`

	// Image is the OS written to the server's disk before it boots from it: the http:// or
	// https:// URL of a raw disk image, plain or compressed (.gz, .zst, .xz), or
	// oci://registry/repository:tag (or @sha256:…) of an OCI artifact whose single layer is such
	// an image. qcow2, VMDK, VHD(X), VDI and ISO images are refused: convert them to raw
	// (qemu-img convert -O raw). Changing it re-provisions the server (wipe, install).
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://') || self.startsWith('oci://')",message="image must be an http://, https:// or oci:// reference to a raw disk image"
	// +kubebuilder:validation:XValidation:rule="!self.split('?')[0].lowerAscii().matches('[.](qcow2?|vmdk|vhdx?|vdi|iso)([.](gz|zst|xz))?$')",message="image is not a raw disk image: qcow2, VMDK, VHD(X), VDI and ISO are not supported; convert it with qemu-img convert -O raw"
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Image"
	Image string `json:"image,omitempty"`

	// ImageChecksum is the digest of the image as served (the compressed file for a compressed
	// image), sha256:<64 hex> or sha512:<128 hex>. Required for http(s) images; for oci:// ones
	// the registry's digests are verified, and a checksum given here must be the layer's.
	// +kubebuilder:validation:Pattern=`^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$`
	// +optional
	ImageChecksum string `json:"imageChecksum,omitempty"`

	// RootDeviceHints choose the disk the image is written to, as Metal3's do: the one disk that
	// matches every hint given. Without hints: the smallest non-removable disk that holds the
	// image.
	// +optional
	RootDeviceHints *RootDeviceHints `json:"rootDeviceHints,omitempty"`

	// IgnitionSecretRef names a Secret in the claim's namespace whose "ignition" key is the
	// ignition/cloud-config the installed OS boots with: it is written, byte for byte, as
	// openstack/latest/user_data on a config drive (a partition labelled config-2) on the same
	// disk, which cloud-init and Ignition's OpenStack platform read.
	// +optional
	IgnitionSecretRef *LocalObjectReference `json:"ignitionSecretRef,omitempty"`

	// BootMode asks for a server whose firmware was found booting in this mode
	// (status.bootMode) and whose spec.bootMode, when set, asks for it too: UEFISecureBoot
	// gets only a server with Secure Boot enforced.
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=spec,displayName="Boot mode"
	BootMode BootMode `json:"bootMode,omitempty"`

	// Tolerations let the claim bind a server despite taints they match, as a pod's tolerations
	// let it onto a tainted node (a rack marked for retirement, a class under test). Ironfleet's
	// own firmware-update taint is tolerated by no claim: a server is not handed out between
	// its update and the host's own confirmation of it.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Tolerations []Toleration `json:"tolerations,omitempty"`
}

// IgnitionSecretKey is the key of a claim's ignition Secret.
const IgnitionSecretKey = "ignition"

// MaxUserDataBytes bounds a claim's ignition: the registry hands at most this much to the
// probe, which writes it to the config drive.
const MaxUserDataBytes = 256 << 10

// RootDeviceHints select one disk of the server's inventory; every hint given must match.
type RootDeviceHints struct {
	// DeviceName is the kernel's name of the disk, e.g. sda, nvme0n1, or /dev/sda.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	DeviceName string `json:"deviceName,omitempty"`
	// SerialNumber is the disk's serial number, exactly.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// WWN is the disk's World Wide Name, exactly.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	WWN string `json:"wwn,omitempty"`
	// Model is a substring of the disk's model.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Model string `json:"model,omitempty"`
	// Vendor is a substring of the disk's vendor.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// MinSizeGigabytes is the least size of the disk, in GB (10^9 bytes).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MinSizeGigabytes int64 `json:"minSizeGigabytes,omitempty"`
	// Rotational: true for spinning disks only, false for solid-state ones only.
	// +optional
	Rotational *bool `json:"rotational,omitempty"`
}

// ServerSelector is a metav1.LabelSelector with bounded sizes, so that the apiserver can check
// cheaply (in CEL) that a bound claim's selector does not change.
type ServerSelector struct {
	// MatchLabels selects Servers that carry every one of these labels.
	// +kubebuilder:validation:MaxProperties=32
	// +optional
	MatchLabels map[string]LabelValue `json:"matchLabels,omitempty"`
	// MatchExpressions selects Servers whose labels satisfy every expression.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []ServerSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelValue is a Kubernetes label value.
// +kubebuilder:validation:MaxLength=63
type LabelValue string

// ServerSelectorRequirement is one label expression.
// +kubebuilder:validation:XValidation:rule="self.operator in ['In', 'NotIn'] ? has(self.values) && size(self.values) > 0 : !has(self.values) || size(self.values) == 0",message="In and NotIn need at least one value; Exists and DoesNotExist take none"
type ServerSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`
	// Values for In and NotIn.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// LabelSelector returns the selector in its Kubernetes form.
func (s *ServerSelector) LabelSelector() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	out := &metav1.LabelSelector{}
	if len(s.MatchLabels) > 0 {
		out.MatchLabels = make(map[string]string, len(s.MatchLabels))
		for k, v := range s.MatchLabels {
			out.MatchLabels[k] = string(v)
		}
	}
	for _, r := range s.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...),
		})
	}
	return out
}

// ClaimPhase is where a claim is: waiting for a server, holding one, or giving it back.
// +kubebuilder:validation:Enum=Pending;Bound;Releasing
type ClaimPhase string

const (
	ClaimPhasePending   ClaimPhase = "Pending"
	ClaimPhaseBound     ClaimPhase = "Bound"
	ClaimPhaseReleasing ClaimPhase = "Releasing"
)

// Reasons of a claim's Bound condition.
const (
	ClaimReasonNoMatchingServer = "NoMatchingServer"
	// ClaimReasonInvalidServerSelector: spec.serverSelector is not a valid label selector (a
	// label key or value of the wrong form, which the schema does not catch).
	ClaimReasonInvalidServerSelector = "InvalidServerSelector"
	ClaimReasonBound                 = "Bound"
	ClaimReasonReleasing             = "Releasing"
)

// ServerClaimStatus is whether and to what the claim is bound.
type ServerClaimStatus struct {
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Phase"
	Phase ClaimPhase `json:"phase,omitempty"`
	// ServerRef is the Server the claim is bound to.
	// +optional
	ServerRef *LocalObjectReference `json:"serverRef,omitempty"`
	// BoundAt is when the claim was bound.
	// +optional
	BoundAt *metav1.Time `json:"boundAt,omitempty"`
	// InstallProgress is how far the image's install is, e.g. "31 MiB of 64 MiB written".
	// +optional
	InstallProgress string `json:"installProgress,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Bound (e.g. NoMatchingServer, Bound, Releasing), Ready, and Provisioned
	// (e.g. Installing, Installed, InstallFailed) when the claim has an image; every reason is in
	// docs/conditions.md.
	// +listType=map
	// +listMapKey=type
	// +optional
	// +operator-sdk:csv:customresourcedefinitions:type=status,displayName="Conditions",xDescriptors="urn:alm:descriptor:io.kubernetes.conditions"
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServerClaim is a user's request for a server with an image to boot.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sclaim,categories=metal
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Pending' || (has(self.spec.serverRef) == has(oldSelf.spec.serverRef) && (!has(self.spec.serverRef) || self.spec.serverRef.name == oldSelf.spec.serverRef.name))",message="serverRef cannot change once the claim is bound"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || !has(oldSelf.status.phase) || oldSelf.status.phase == 'Pending' || (has(self.spec.serverSelector) == has(oldSelf.spec.serverSelector) && (!has(self.spec.serverSelector) || self.spec.serverSelector == oldSelf.spec.serverSelector))",message="serverSelector cannot change once the claim is bound"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.image) || self.spec.image.startsWith('oci://') || has(self.spec.imageChecksum)",message="spec.imageChecksum (sha256:<hex> or sha512:<hex>) is required for an http(s) image"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.serverRef.name`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.spec.power`
// +kubebuilder:printcolumn:name="Provisioned",type=string,JSONPath=`.status.conditions[?(@.type=="Provisioned")].reason`
// +kubebuilder:printcolumn:name="Progress",type=string,JSONPath=`.status.installProgress`
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Bound")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Server Claim"
type ServerClaim struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ServerClaimSpec   `json:"spec,omitempty"`
	Status ServerClaimStatus `json:"status,omitempty"`
}

// ServerClaimList is a list of ServerClaims.
// +kubebuilder:object:root=true
type ServerClaimList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServerClaim `json:"items"`
}
