package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TaintEffect is what a taint does to claims.
// +kubebuilder:validation:Enum=NoClaim;PreferNoClaim
type TaintEffect string

const (
	// TaintNoClaim: no new claim binds the server.
	TaintNoClaim TaintEffect = "NoClaim"
	// TaintPreferNoClaim: a claim binds the server only when no untainted server meets it.
	TaintPreferNoClaim TaintEffect = "PreferNoClaim"
)

// Taint is a mark on a Server that keeps claims off it, as a node's taint keeps pods off.
type Taint struct {
	// Key names the taint, a label key: metal.ironfleet.dev/ keys are Ironfleet's own.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`
	Key string `json:"key"`
	// Value says why, in a word.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect"`
	// TimeAdded is when it was set (by Ironfleet for its own taints).
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// TaintFirmwareUpdate is the taint Ironfleet sets on a server whose firmware is being brought
// to a baseline, from the moment the update is admitted until the host itself confirms it: a
// server between its update's reboot and that confirmation is Available, and must not be
// claimed half-updated.
const TaintFirmwareUpdate = "metal.ironfleet.dev/firmware-update"

// HasTaint says whether taints hold one with key and effect.
func HasTaint(taints []Taint, key string, effect TaintEffect) bool {
	for _, t := range taints {
		if t.Key == key && t.Effect == effect {
			return true
		}
	}
	return false
}
