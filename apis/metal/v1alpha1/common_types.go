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

// Condition types used across kinds. Reasons are machine-readable CamelCase; messages are for people.
const (
	// ConditionReady says whether an object is doing its job (a BMC answers, a boot config is served).
	ConditionReady = "Ready"
	// ConditionMatched says whether an Endpoint's MAC address matched the MAC-prefix database.
	ConditionMatched = "Matched"
	// ConditionBound says whether a ServerClaim holds a Server.
	ConditionBound = "Bound"
	// ConditionDiscovered says whether a Server's inventory came from an in-band probe report.
	ConditionDiscovered = "Discovered"
	// ConditionCleaned says whether a released Server's disks were verified wiped.
	ConditionCleaned = "Cleaned"
	// ConditionInMaintenance says whether a Server is held by a ServerMaintenance.
	ConditionInMaintenance = "InMaintenance"
	// ConditionPowered says whether a Server's power matches what was asked for.
	ConditionPowered = "Powered"
	// ConditionHardwareRecord says whether the last probe report compared with a Server's
	// record of its hardware (the disks and NICs of its discovery's report) lists the same:
	// True (HardwareRecorded, HardwareMatches), False (HardwareChanged: the message names each
	// difference; the record stands, and the server is not pooled until a person retries), or
	// Unknown (HardwareChangeAccepted: the retry lets the next discovery record what it finds).
	ConditionHardwareRecord = "HardwareRecord"
	// Reasons of the HardwareRecord condition.
	ReasonHardwareRecorded       = "HardwareRecorded"
	ReasonHardwareMatches        = "HardwareMatches"
	ReasonHardwareChanged        = "HardwareChanged"
	ReasonHardwareChangeAccepted = "HardwareChangeAccepted"
	// ConditionProvisioned says whether a claimed Server was booted into its claim's image.
	ConditionProvisioned = "Provisioned"
	// ConditionBootProgress, on a ServerBootConfiguration, is how far the boot it serves has
	// got, as the booted host reports it to the boot service: the reason is the stage
	// (InitStarted, NetworkUp, IgnitionFetched, ProbeRunning, Reported, or RegistryUnreachable
	// and Failed, which are False), the message what the host said.
	ConditionBootProgress = "BootProgress"
	// ConditionIgnitionServed, on a ServerBootConfiguration, says whether the boot's ignition
	// (its secrets) was served, once, to the host the boot is bound to (True), or a request
	// was refused and the boot ended (False, with who asked).
	ConditionIgnitionServed = "IgnitionServed"
	// ConditionOutOfBandInventory, on a BMC, is False when its protocol cannot read the
	// servers' hardware (IPMI: FRU only), reason InventoryUnsupported: each Server's hardware
	// then comes from the probe's in-band report alone. Absent for Redfish BMCs.
	ConditionOutOfBandInventory = "OutOfBandInventory"
	// ReasonInventoryUnsupported: the BMC's protocol reads no hardware inventory.
	ReasonInventoryUnsupported = "InventoryUnsupported"
)

// The boot operator a ServerBootConfiguration is for, as an IngressClass names an ingress
// controller: the manager labels every boot configuration it makes with its --boot-operator,
// and a boot service serves only those labelled with its own name (a configuration without
// the label is Ironfleet's).
const (
	LabelBootOperator     = "metal.ironfleet.dev/boot-operator"
	BootOperatorIronfleet = "ironfleet"
)

// BootOperatorOf is the boot operator a boot configuration is for.
func BootOperatorOf(sbc *ServerBootConfiguration) string {
	if op := sbc.Labels[LabelBootOperator]; op != "" {
		return op
	}
	return BootOperatorIronfleet
}

// Annotations people set.
const (
	// AnnotationApproveMaintenance on a ServerClaim, set to "true" by its owner, lets a
	// ServerMaintenance with policy OwnerApproval take the claimed server.
	AnnotationApproveMaintenance = "metal.ironfleet.dev/approve-maintenance"
	// AnnotationDeleteWithoutWipe on a Server, set to "true" by an admin, lets a deleted Server
	// go without the wipe it would otherwise wait for (docs/deletion.md); an event
	// records it.
	AnnotationDeleteWithoutWipe = "metal.ironfleet.dev/delete-without-wipe"
)

// Annotations Ironfleet sets.
const (
	// AnnotationProbeBoot on a probe boot's ServerBootConfiguration names that boot; the
	// Server names its current one in status.probeBoot. (Servers of earlier versions carried
	// this annotation themselves; the operator moves it to status.)
	AnnotationProbeBoot = "metal.ironfleet.dev/probe-boot"
)
