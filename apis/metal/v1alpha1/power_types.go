package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PowerDeliveryState is how far a power request of Ironfleet's got; internal/fsm's power table
// (docs/power-lifecycle.md) is the only way it changes.
// +kubebuilder:validation:Enum=Requested;Sent;ShuttingDown;Confirmed;Unconfirmed
type PowerDeliveryState string

// The power delivery states.
const (
	// PowerRequested: recorded, not sent yet (or its BMC call failed): it is sent (again).
	PowerRequested PowerDeliveryState = "Requested"
	// PowerSent: the BMC took the request; the server's power is watched until it shows it.
	PowerSent PowerDeliveryState = "Sent"
	// PowerShuttingDown: the BMC took a GracefulShutdown; the OS has the grace period to stop
	// before Ironfleet forces the power off.
	PowerShuttingDown PowerDeliveryState = "ShuttingDown"
	// PowerConfirmed: the BMC reports the power asked for.
	PowerConfirmed PowerDeliveryState = "Confirmed"
	// PowerUnconfirmed: sent twice, and the BMC still reports another power after the
	// confirmation timeout; it is not sent again (the condition says so) but still watched.
	PowerUnconfirmed PowerDeliveryState = "Unconfirmed"
)

// PowerDelivery is Ironfleet's last power request of a server, and how far it got. It is
// written before the request is sent, so a manager that dies half way sends it again.
type PowerDelivery struct {
	// Want is the power asked for.
	Want Power `json:"want"`
	// Graceful requests ask the OS to shut down (GracefulShutdown) before forcing it.
	// +optional
	Graceful bool `json:"graceful,omitempty"`
	// State is how far the request got.
	State PowerDeliveryState `json:"state"`
	// Attempts counts the times the request was sent.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Since is when it entered State.
	Since metav1.Time `json:"since"`
	// Generation is the Server's generation the request was made for: a spec change asks anew.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// Reason says, for people, why this power was asked for.
	// +optional
	Reason string `json:"reason,omitempty"`
}
