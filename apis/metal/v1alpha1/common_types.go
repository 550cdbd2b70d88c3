package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

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

// TolerationOperator is how a toleration matches a taint's value.
// +kubebuilder:validation:Enum=Exists;Equal
type TolerationOperator string

const (
	// TolerationExists matches a taint with the key, whatever its value.
	TolerationExists TolerationOperator = "Exists"
	// TolerationEqual matches a taint with the key and the value.
	TolerationEqual TolerationOperator = "Equal"
)

// Toleration is a ServerClaim's leave to bind a server despite the taints it matches, matched
// as Kubernetes matches a pod's tolerations to a node's taints: the key (empty, with Exists:
// every key but Ironfleet's own metal.ironfleet.dev/ ones, which a toleration must name), the
// value by the operator, and the effect (empty: both).
// +kubebuilder:validation:XValidation:rule="self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",message="a toleration with operator Exists matches any value: value must be empty"
// +kubebuilder:validation:XValidation:rule="self.operator == 'Exists' || (has(self.key) && size(self.key) > 0)",message="a toleration without a key must have operator Exists (it then matches every taint)"
type Toleration struct {
	// Key is the taint's key; empty matches every key (operator Exists only).
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$`
	// +optional
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default: the taint's value must be Value) or Exists (any value).
	// +kubebuilder:default=Equal
	// +optional
	Operator TolerationOperator `json:"operator,omitempty"`
	// Value is the taint's value, for Equal.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Value string `json:"value,omitempty"`
	// Effect is the taint's effect; empty matches both.
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
}

// Tolerates says whether the toleration matches taint. A toleration without a key matches no
// taint of Ironfleet's own (metal.ironfleet.dev/ keys): those must be named. No toleration
// matches TaintFirmwareUpdate.
func (t Toleration) Tolerates(taint Taint) bool {
	switch {
	case taint.Key == TaintFirmwareUpdate:
		return false
	case t.Effect != "" && t.Effect != taint.Effect:
		return false
	case t.Key == "":
		return t.Operator == TolerationExists && !strings.HasPrefix(taint.Key, GroupVersion.Group+"/")
	case t.Key != taint.Key:
		return false
	}
	return t.Operator == TolerationExists || t.Value == taint.Value
}

// Untolerated says whether taints hold one with effect that none of tolerations matches.
func Untolerated(taints []Taint, tolerations []Toleration, effect TaintEffect) bool {
	for _, taint := range taints {
		if taint.Effect != effect {
			continue
		}
		tolerated := false
		for _, t := range tolerations {
			if tolerated = t.Tolerates(taint); tolerated {
				break
			}
		}
		if !tolerated {
			return true
		}
	}
	return false
}

// TaintUnhealthy is the taint Ironfleet sets on a server while its health is at or beyond the
// level that taints (Critical by default), and removes once it is better: no new claim binds
// a failing machine unless it tolerates this key by name.
const TaintUnhealthy = "metal.ironfleet.dev/unhealthy"

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
