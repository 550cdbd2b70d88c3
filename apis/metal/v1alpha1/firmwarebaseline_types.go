package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BaselineComponent is one firmware component a baseline wants at a version.
type BaselineComponent struct {
	// Component says which: BIOS, BMC, or a firmware inventory id of the server's BMC, or a
	// pattern of ids with * and ? (Dell's Installed-*__NIC.Integrated.1-1-1, say), for NICs,
	// drives and controllers.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Component string `json:"component"`
	// Version is the version wanted, as the BMC's inventory spells it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version"`
	// Image is the update that brings the component to Version.
	Image FirmwareImage `json:"image"`
}

// FirmwareImage is where an update's image is, and how to check it.
type FirmwareImage struct {
	// URL of the image, http or https.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="image url must be http:// or https://"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^https?://[^/?#]*@')",message="image url must not carry credentials: name a Secret in credentialsSecretRef"
	URL string `json:"url"`
	// Checksum of the image: sha256:<64 hex digits>.
	// +kubebuilder:validation:XValidation:rule="self.matches('^sha256:[0-9a-f]{64}$')",message="checksum must be sha256: followed by 64 lower-case hex digits"
	// +kubebuilder:validation:MaxLength=71
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// CredentialsSecretRef names a Secret (username, password) in the operator's namespace for
	// an image server that asks for them.
	// +optional
	CredentialsSecretRef *LocalObjectReference `json:"credentialsSecretRef,omitempty"`
	// ServedBy says where the BMC fetches the image: from its URL (Origin), or from Ironfleet's
	// boot service (BootService), which fetches it, checks its checksum and serves it at a URL
	// made for one update that dies with it, for BMCs whose network cannot reach the origin.
	// +kubebuilder:default=Origin
	// +optional
	ServedBy ImageServer `json:"servedBy,omitempty"`
}

// ImageServer is where a BMC fetches a firmware image.
// +kubebuilder:validation:Enum=Origin;BootService
type ImageServer string

const (
	ImageServedByOrigin      ImageServer = "Origin"
	ImageServedByBootService ImageServer = "BootService"
)

// BaselineSettings are attribute → value, as the BMC's attribute registry names them; values
// as text (an integer in decimal, a boolean true or false).
type BaselineSettings struct {
	// BIOS settings of the System's Bios resource.
	// +kubebuilder:validation:MaxProperties=512
	// +optional
	BIOS map[string]string `json:"bios,omitempty"`
	// BMC settings of the Manager, where the vendor exposes them.
	// +kubebuilder:validation:MaxProperties=512
	// +optional
	BMC map[string]string `json:"bmc,omitempty"`
}

// BaselineRollout says how a baseline is brought to the servers it selects.
type BaselineRollout struct {
	// MaxUnavailable is how many servers (a number, or a percentage of those matched) may be
	// out of service for the baseline at once.
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^[1-9][0-9]?%$|^100%$')",message="maxUnavailable must be a number of at least 1 or a percentage from 1% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// Policy for claimed servers, as ServerMaintenance has: OwnerApproval waits for the claim's
	// owner, Enforced does not.
	// +kubebuilder:default=OwnerApproval
	// +optional
	Policy MaintenancePolicy `json:"policy,omitempty"`
	// Paused judges the servers without updating any: the differences show on each
	// ServerFirmware, and no server is taken out of service for them. Updates under way go on.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// MaxFailures stops the rollout once this many servers failed.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxFailures int32 `json:"maxFailures,omitempty"`
}

// FirmwareBaselineSpec is the firmware and settings wanted on the servers it selects.
// +kubebuilder:validation:XValidation:rule="has(self.components) || has(self.settings)",message="a baseline wants components, settings, or both"
type FirmwareBaselineSpec struct {
	// ServerSelector selects the Servers by label; an empty selector selects every Server.
	ServerSelector metav1.LabelSelector `json:"serverSelector"`
	// Components are the firmware versions wanted.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=component
	// +optional
	Components []BaselineComponent `json:"components,omitempty"`
	// +optional
	Settings *BaselineSettings `json:"settings,omitempty"`
	// +optional
	Rollout BaselineRollout `json:"rollout,omitempty"`
}

// RolloutState is where a baseline's rollout stands.
// +kubebuilder:validation:Enum=Complete;Progressing;Stopped;Paused
type RolloutState string

const (
	// RolloutComplete: every server it selects and may touch runs what it wants.
	RolloutComplete RolloutState = "Complete"
	// RolloutProgressing: servers are being updated, or wait their turn.
	RolloutProgressing RolloutState = "Progressing"
	// RolloutStopped: rollout.maxFailures of its servers have a failed update; no other server
	// is started until a person retries them (or gives them back), or the baseline wants
	// something else of them.
	RolloutStopped RolloutState = "Stopped"
	// RolloutPaused: rollout.paused is set; servers are judged, none is started.
	RolloutPaused RolloutState = "Paused"
)

// FirmwareBaselineStatus counts the servers the baseline selects, by where they stand.
type FirmwareBaselineStatus struct {
	// Matched servers are selected (and not deleted).
	// +optional
	Matched int32 `json:"matched"`
	// Compliant servers run what the baseline wants, as their BMCs last said.
	// +optional
	Compliant int32 `json:"compliant"`
	// Updating servers are being brought to it.
	// +optional
	Updating int32 `json:"updating"`
	// Failed servers could not be.
	// +optional
	Failed int32 `json:"failed"`
	// Unsupported servers' BMCs have no firmware management (IPMI): never touched.
	// +optional
	Unsupported int32 `json:"unsupported"`
	// Conflicting servers are selected by another baseline that wants something else of them:
	// neither touches them.
	// +optional
	Conflicting int32 `json:"conflicting"`
	// Rollout is where the rollout stands.
	// +optional
	Rollout RolloutState `json:"rollout,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Valid (reasons SettingsValid, InvalidSetting), Conflict (NoConflict,
	// ConflictingBaselines).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FirmwareBaseline is the firmware versions and BIOS/BMC settings a fleet's servers should
// have: one declarative want per class of machines.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=fwb,categories=metal
// +kubebuilder:printcolumn:name="Matched",type=integer,JSONPath=`.status.matched`
// +kubebuilder:printcolumn:name="Compliant",type=integer,JSONPath=`.status.compliant`
// +kubebuilder:printcolumn:name="Updating",type=integer,JSONPath=`.status.updating`
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.rollout`
// +kubebuilder:printcolumn:name="Valid",type=string,JSONPath=`.status.conditions[?(@.type=="Valid")].status`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +operator-sdk:csv:customresourcedefinitions:displayName="Firmware Baseline"
type FirmwareBaseline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FirmwareBaselineSpec   `json:"spec"`
	Status FirmwareBaselineStatus `json:"status,omitempty"`
}

// FirmwareBaselineList is a list of FirmwareBaselines.
// +kubebuilder:object:root=true
type FirmwareBaselineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FirmwareBaseline `json:"items"`
}
