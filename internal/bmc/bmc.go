// Package bmc is the seam between controllers and baseboard management controllers: small
// interfaces for what the controllers need (power, one-time boot, inventory, manager info), the
// errors they classify into condition reasons, BMC address parsing, and a per-BMC client cache.
// The Redfish implementation lives in bmc/redfish.
package bmc

import (
	"context"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// PowerAction is a power request.
type PowerAction string

const (
	PowerOn               PowerAction = "On"
	PowerOff              PowerAction = "ForceOff"
	PowerGracefulShutdown PowerAction = "GracefulShutdown"
	PowerForceRestart     PowerAction = "ForceRestart"
)

// BootTarget is where a one-time boot override points.
type BootTarget string

const (
	BootPXE  BootTarget = "Pxe"
	BootDisk BootTarget = "Hdd"
	// BootCd boots the virtual CD/DVD a VirtualMediaControl inserted.
	BootCd BootTarget = "Cd"
	// BootUefiHttp boots by UEFI HTTP boot; HTTPBootControl gives it the URI.
	BootUefiHttp BootTarget = "UefiHttp"
)

// SystemInfo is what a BMC says about one computer system.
type SystemInfo struct {
	// URI is the system's Redfish @odata.id, as the BMC gave it (never rebuilt from its Id);
	// for IPMI, whose BMCs have one system, ipmi.SystemURI.
	URI          string
	ID           string
	UUID         string
	Manufacturer string
	Model        string
	SerialNumber string
	SKU          string
	BIOSVersion  string
	PowerState   metalv1alpha1.PowerState
}

// ManagerInfo is what a BMC says about itself.
type ManagerInfo struct {
	Manufacturer    string
	Model           string
	SerialNumber    string
	FirmwareVersion string
	PowerState      metalv1alpha1.PowerState
	// MACAddress is the BMC's own network MAC, when it says (IPMI's LAN configuration); "".
	MACAddress string
}

// PowerControl switches a system's power.
type PowerControl interface {
	SetPower(ctx context.Context, systemURI string, action PowerAction) error
}

// BootControl sets the boot override: once (consumed at the next power-on) or persistent (every
// power-on from now on, until another override replaces it). mode is the firmware mode the
// server is booted for (Server.EffectiveBootMode): Redfish's BootSourceOverrideMode and IPMI's
// EFI bit follow it (UEFI for UEFISecureBoot: the override has no Secure Boot setting). An
// empty mode leaves the firmware mode as the BMC has it.
type BootControl interface {
	SetBootOnce(ctx context.Context, systemURI string, target BootTarget, mode metalv1alpha1.BootMode) error
	SetBootPersistent(ctx context.Context, systemURI string, target BootTarget, mode metalv1alpha1.BootMode) error
}

// InventoryReader reads systems and their hardware.
type InventoryReader interface {
	// Systems lists the BMC's systems: identity and power only, cheap enough to poll.
	Systems(ctx context.Context) ([]SystemInfo, error)
	// PowerState reads one system's power state now.
	PowerState(ctx context.Context, systemURI string) (metalv1alpha1.PowerState, error)
	// Inventory reads a system's hardware; sub-resources that fail are skipped, not fatal. A
	// Redfish inventory carries the boot mode too (Inventory.BootMode), as BootMode reads it.
	Inventory(ctx context.Context, systemURI string) (metalv1alpha1.Inventory, error)
	// BootMode reads how the system's firmware boots, as the BMC says: Redfish's
	// BootSourceOverrideMode and SecureBoot resource, IPMI's boot flags while they are valid.
	// "" when the BMC does not say (no Boot object, no valid flags): unknown, not an error.
	BootMode(ctx context.Context, systemURI string) (metalv1alpha1.BootMode, error)
}

// ManagerReader reads the BMC's own identity.
type ManagerReader interface {
	Manager(ctx context.Context) (ManagerInfo, error)
}

// MediaSlot is the virtual CD/DVD drive a system boots ISOs from, as the BMC reports it now.
type MediaSlot struct {
	// URI is the VirtualMedia resource's @odata.id (under the System or a Manager).
	URI string
	// Image is the URL of the inserted media ("" when none), Inserted whether media is in.
	Image    string
	Inserted bool
}

// VirtualMediaControl boots a system from an ISO the BMC fetches over HTTP(S): Redfish
// VirtualMedia. A BMC without a usable CD/DVD slot answers ErrUnsupported (wrapped, saying what
// it found).
type VirtualMediaControl interface {
	// VirtualMedia finds the CD/DVD slot the system boots ISOs from.
	VirtualMedia(ctx context.Context, systemURI string) (MediaSlot, error)
	// InsertMedia makes imageURL the slot's inserted media, ejecting other media first. It is
	// idempotent: media already inserted with this URL is left as it is.
	InsertMedia(ctx context.Context, systemURI, imageURL string) error
	// EjectMedia ejects whatever is inserted; an empty slot is not an error.
	EjectMedia(ctx context.Context, systemURI string) error
}

// SecureBootControl turns a system's UEFI Secure Boot on or off for its next boot: Redfish's
// SecureBoot resource (SecureBootEnable), which takes effect at the system's next power-on or
// reset. A system that links no SecureBoot resource answers ErrUnsupported (wrapped); IPMI has
// no such control. changed says whether the setting was changed (false: it already was so).
type SecureBootControl interface {
	SetSecureBoot(ctx context.Context, systemURI string, enable bool) (changed bool, err error)
}

// HTTPBootControl boots a system once by UEFI HTTP boot from a URI the BMC gives its firmware:
// Redfish's BootSourceOverrideTarget UefiHttp with HttpBootUri. The URI is a bearer secret (the
// boot's ISO holds its ignition): no error or log carries it. A system that cannot (no UefiHttp
// target, no HttpBootUri) answers ErrUnsupported (wrapped, saying what it lacks); IPMI has no
// such control.
type HTTPBootControl interface {
	// HTTPBootSupported is nil when the system can boot a URI.
	HTTPBootSupported(ctx context.Context, systemURI string) error
	// SetHTTPBootOnce points the system's next boot at url, in UEFI mode.
	SetHTTPBootOnce(ctx context.Context, systemURI, url string) error
}

// Client is everything controllers do with a BMC.
type Client interface {
	PowerControl
	BootControl
	InventoryReader
	ManagerReader
	VirtualMediaControl
	// Close logs out and releases connections.
	Close()
}
