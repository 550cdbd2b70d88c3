package bmc

import "context"

// ComponentClass is what a firmware component is for, as far as a baseline cares: the
// system's BIOS (or UEFI firmware), the BMC's own firmware, or anything else (NICs, drives,
// storage controllers, CPLDs, power supplies), which baselines name by inventory id or pattern.
type ComponentClass string

const (
	ComponentBIOS  ComponentClass = "BIOS"
	ComponentBMC   ComponentClass = "BMC"
	ComponentOther ComponentClass = "Other"
)

// FirmwareComponent is one member of a BMC's firmware inventory (Redfish's
// UpdateService/FirmwareInventory, a SoftwareInventory). Ids are the vendor's own (Dell:
// Installed-<component>-<version> and Previous-…; Supermicro: BIOS, BMC; HPE: numbers): Class
// says which component it is, from what the member links to, not from its Id alone.
type FirmwareComponent struct {
	// ID is the member's Id; URI its @odata.id.
	ID  string
	URI string
	// Name is the member's Name, as the vendor words it.
	Name    string
	Version string
	// Updateable says whether the BMC can update it.
	Updateable bool
	Class      ComponentClass
	// RelatedItems are the @odata.ids of the resources it belongs to (a System, a Manager, a
	// NIC's adapter), as the BMC lists them.
	RelatedItems []string
	// Installed is false for a member that is not the running version (Dell's Previous-… and
	// Available-… members).
	Installed bool
}

// AttributeType is a settings attribute's type in its registry.
type AttributeType string

const (
	AttributeEnumeration AttributeType = "Enumeration"
	AttributeString      AttributeType = "String"
	AttributeInteger     AttributeType = "Integer"
	AttributeBoolean     AttributeType = "Boolean"
	AttributePassword    AttributeType = "Password"
)

// AttributeDefinition is what an attribute registry says of one attribute: enough to refuse a
// value before anything is sent to the BMC.
type AttributeDefinition struct {
	Name string
	Type AttributeType
	// ReadOnly: the registry says the attribute is ReadOnly or Immutable; either way a value
	// cannot be set.
	ReadOnly bool
	// AllowedValues are an enumeration's ValueNames.
	AllowedValues []string
	// LowerBound and UpperBound bound an integer; MinLength and MaxLength a string; nil when
	// the registry does not say.
	LowerBound, UpperBound *int64
	MinLength, MaxLength   *int64
	// ValueExpression is a string's regular expression, when the registry gives one.
	ValueExpression string
	// ResetRequired says the system must be reset for a change to apply.
	ResetRequired bool
}

// SettingsRegistry is an attribute registry (Redfish /redfish/v1/Registries/<name>): its
// name as the settings resource names it, and its attributes by name.
type SettingsRegistry struct {
	Name       string
	Attributes map[string]AttributeDefinition
}

// Settings are a settings resource's attributes: the system's Bios, or a Manager's attributes
// where the vendor exposes them. Values are rendered as text: an enumeration's or string's
// value as it is, an integer in decimal, a boolean as true or false; a null value is "".
type Settings struct {
	// Current are the attributes in effect.
	Current map[string]string
	// Pending are the attributes staged for the next reset (the Settings object): those whose
	// value there differs from Current, since some BMCs keep every attribute in it (DMTF's
	// mockup does) and others only what is staged. nil when the BMC links none or nothing is
	// staged.
	Pending map[string]string
	// Registry is the registry that defines the attributes; nil when the BMC publishes none (the
	// attributes are then read, but a baseline's values cannot be checked before sending).
	Registry *SettingsRegistry
}

// FirmwareReader reads what firmware a system runs and its BIOS settings. IPMI has neither:
// its client answers ErrUnsupported (wrapped). Reads are costly on real BMCs (a registry can
// run to megabytes): callers read on enrollment and when the BMC says something changed, not
// on every poll.
type FirmwareReader interface {
	// FirmwareInventory lists the firmware components of the BMC that matter to systemURI: its
	// BIOS, the BMC's own firmware, and the devices it holds. A BMC without an UpdateService or
	// FirmwareInventory answers ErrUnsupported (wrapped).
	FirmwareInventory(ctx context.Context, systemURI string) ([]FirmwareComponent, error)
	// BIOSSettings reads the system's Bios resource, its pending settings and its registry. A
	// system that links no Bios answers ErrUnsupported (wrapped).
	BIOSSettings(ctx context.Context, systemURI string) (Settings, error)
}
