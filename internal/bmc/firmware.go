package bmc

import (
	"context"
	"io"
)

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
	// ManagerSettings reads the attributes of the system's Manager, with their registry, where
	// the vendor exposes them (Redfish defines none: Dell's iDRAC lists its own). A Manager
	// that exposes none answers ErrUnsupported (wrapped).
	ManagerSettings(ctx context.Context, systemURI string) (Settings, error)
}

// UpdateRequest asks a BMC to install one firmware image.
type UpdateRequest struct {
	// SystemURI is the system the update is for (its BMC's UpdateService does it).
	SystemURI string
	// ImageURL is where the BMC fetches the image (SimpleUpdate's ImageURI). It is a bearer
	// secret when Ironfleet serves the image itself: never log it.
	ImageURL string
	// Targets are the @odata.ids of the firmware inventory members to update; empty lets the
	// BMC pick from the image.
	Targets []string
	// Username and Password are for an image server that asks for them (SimpleUpdate's
	// Username and Password); never logged.
	Username, Password string
	// Image opens the image's bytes, for a BMC that offers only the multipart push URI (HPE's
	// iLO 6): the client pushes them itself. nil when the caller cannot (the update then
	// fails with ErrUnsupported, wrapped, on such a BMC).
	Image func(ctx context.Context) (io.ReadCloser, error)
}

// TaskState is a Redfish Task's TaskState.
type TaskState string

const (
	TaskNew         TaskState = "New"
	TaskStarting    TaskState = "Starting"
	TaskRunning     TaskState = "Running"
	TaskPending     TaskState = "Pending"
	TaskCompleted   TaskState = "Completed"
	TaskException   TaskState = "Exception"
	TaskKilled      TaskState = "Killed"
	TaskCancelled   TaskState = "Cancelled"
	TaskInterrupted TaskState = "Interrupted"
)

// TaskStatus is where a BMC's task (or a vendor's job, Dell's JID_…) stands.
type TaskStatus struct {
	State TaskState
	// Percent is the task's PercentComplete, -1 when the BMC gives none.
	Percent int
	// Message is the BMC's own word on it: its last message, for a failure the reason.
	Message string
}

// Done says whether the task ended, successfully or not.
func (t TaskStatus) Done() bool {
	switch t.State {
	case TaskCompleted, TaskException, TaskKilled, TaskCancelled:
		return true
	}
	return false
}

// Succeeded says whether it ended and installed what it was asked to.
func (t TaskStatus) Succeeded() bool { return t.State == TaskCompleted }

// FirmwareUpdater changes a system's firmware and BIOS settings. IPMI has neither (its client
// does not implement it).
type FirmwareUpdater interface {
	// StageBIOSSettings writes attributes (values as text, as Settings has them: the client
	// converts them to the types the registry gives) to the system's Bios settings object,
	// applied at the next reset of the host (@Redfish.SettingsApplyTime OnReset where the BMC
	// takes it). The BMC's refusal is returned with its message.
	StageBIOSSettings(ctx context.Context, systemURI string, attributes map[string]string) error
	// SetManagerSettings writes attributes (as StageBIOSSettings does) to the system's
	// Manager's attributes, applied at once (Immediate): no reset of the host. A Manager that
	// exposes none answers ErrUnsupported (wrapped).
	SetManagerSettings(ctx context.Context, systemURI string, attributes map[string]string) error
	// StartUpdate asks the BMC to install an image: UpdateService.SimpleUpdate with the image's
	// URL where the BMC offers it, else a multipart push of req.Image to its
	// MultipartHttpPushUri. It returns the task's URI to follow (TaskStatus); "" when the BMC
	// answered without a task, having done the update at once.
	StartUpdate(ctx context.Context, req UpdateRequest) (taskURI string, err error)
	// TaskStatus reads a task StartUpdate returned.
	TaskStatus(ctx context.Context, taskURI string) (TaskStatus, error)
}
