package v1alpha1

// LocalObjectReference names an object in the same namespace, or a cluster-scoped object.
type LocalObjectReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ObjectReference names a namespaced object and, once bound, pins its UID so that a deleted and
// re-created object of the same name is not mistaken for the original.
type ObjectReference struct {
	// Namespace of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the referenced object when the reference was made.
	// +optional
	UID string `json:"uid,omitempty"`
}

// Power is the power state a user asks for.
// +kubebuilder:validation:Enum=On;Off
type Power string

const (
	PowerOn  Power = "On"
	PowerOff Power = "Off"
)

// PowerState is the power state a BMC reports.
// +kubebuilder:validation:Enum=On;Off;PoweringOn;PoweringOff;Unknown
type PowerState string

const (
	PowerStateOn          PowerState = "On"
	PowerStateOff         PowerState = "Off"
	PowerStatePoweringOn  PowerState = "PoweringOn"
	PowerStatePoweringOff PowerState = "PoweringOff"
	PowerStateUnknown     PowerState = "Unknown"
)
