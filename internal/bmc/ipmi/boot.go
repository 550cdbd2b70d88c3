package ipmi

import (
	"context"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// System Boot Options parameters (IPMI v2.0 table 28-14).
const (
	// bootParamValidBitClearing is parameter 3; data 0x08 stops the BMC from clearing the boot
	// flags' valid bit 60 s after they were set when no Chassis Control came.
	bootParamValidBitClearing = 0x03
	bootNoTimeoutClear        = 0x08
	bootParamFlags            = 0x05
)

// Boot device selectors (byte 2, bits 5:2, of the boot flags).
const (
	selectorPXE  = 0x1
	selectorDisk = 0x2
	selectorCD   = 0x5
	// selectorSupermicroUEFIDisk (byte 2 0x24) is "primary remote media" in IPMI v2.0, and
	// what Supermicro's BMCs take as "UEFI hard disk" (Supermicro FAQ 25559; Ironic's
	// _vendor_aware_boot_device_map sends it for a UEFI disk boot on Supermicro).
	selectorSupermicroUEFIDisk = 0x9
)

// IANASupermicro is Supermicro's IANA enterprise number, the manufacturer ID its BMCs answer
// in Get Device ID.
const IANASupermicro = 10876

// BootFlags builds the 5 data bytes of boot option parameter 5 as Ironic sends them: byte 1 is
// valid (0x80) | persistent (0x40) | UEFI (0x20), byte 2 the device selector shifted left by 2
// (PXE 0x04, disk 0x08, CD 0x14), bytes 3–5 zero (no console redirection, lockouts or
// instance). So UEFI PXE once is a0 04 00 00 00. manufacturer is the BMC's IANA number (Get
// Device ID; 0 when unknown): a Supermicro BMC in UEFI mode does not boot the disk for the
// standard disk selector, and gets its own, 0x24, instead (a0 24 00 00 00 once).
func BootFlags(target bmc.BootTarget, persistent, uefi bool, manufacturer uint32) ([5]byte, error) {
	var flags [5]byte
	var selector byte
	switch target {
	case bmc.BootPXE:
		selector = selectorPXE
	case bmc.BootDisk:
		selector = selectorDisk
		if uefi && manufacturer == IANASupermicro {
			selector = selectorSupermicroUEFIDisk
		}
	case bmc.BootCd:
		selector = selectorCD
	default:
		return flags, fmt.Errorf("boot target %q: IPMI boots from Pxe, Hdd or Cd: %w", target, bmc.ErrUnsupported)
	}
	flags[0] = 0x80
	if persistent {
		flags[0] |= 0x40
	}
	if uefi {
		flags[0] |= 0x20
	}
	flags[1] = selector << 2
	return flags, nil
}

// bootMemory is Ironic's ipmi_force_boot_device: many BMCs forget a persistent override (or
// clear it at the next power action), so the last persistent target is re-sent, in the mode it
// was set for, before every power-on or restart this client issues, unless a one-time override
// was set since the last power action (re-sending would overwrite it).
type bootMemory struct {
	persistent     bmc.BootTarget // "" when none was set
	persistentMode metalv1alpha1.BootMode
	oncePending    bool
	// uefi is the firmware mode of the last boot flags this client sent, or read with the
	// valid bit set: what it sends when no mode is asked for and the BMC's flags are not
	// valid. uefiKnown is false until then: uefi is the guess, legacy.
	uefi, uefiKnown bool
	// guessed is the flags last sent when their EFI bit was that guess: read back, they are
	// this client's guess, not the BMC's word (BootMode says "").
	guessed *[5]byte
}

func (m *bootMemory) set(target bmc.BootTarget, persistent bool, mode metalv1alpha1.BootMode) {
	if persistent {
		m.persistent, m.persistentMode, m.oncePending = target, mode, false
		return
	}
	m.oncePending = true
}

func (m *bootMemory) powerActionDone() { m.oncePending = false }

// efiBit decides the EFI bit of boot flags about to be sent: the mode asked for (Legacy clear,
// UEFI and UEFISecureBoot set); without one, the BMC's own EFI bit when its flags (current, a
// Get System Boot Options answer for parameter 5, nil when the BMC gave none) carry the valid
// bit; otherwise the mode remembered. fromGuess says the bit is the remembered guess.
func (m *bootMemory) efiBit(mode metalv1alpha1.BootMode, current []byte) (uefi, fromGuess bool) {
	if mode != "" {
		m.uefi, m.uefiKnown = mode.UEFI(), true
		return m.uefi, false
	}
	if flags, err := DecodeBootFlags(current); err == nil && flags[0]&0x80 != 0 {
		m.uefi, m.uefiKnown = flags[0]&0x20 != 0, true
	}
	return m.uefi, !m.uefiKnown
}

// SetBootOnce sets the boot device for the next boot only, in mode's firmware mode (the EFI
// bit; efiBit).
func (c *Client) SetBootOnce(ctx context.Context, systemURI string, target bmc.BootTarget, mode metalv1alpha1.BootMode) error {
	return c.setBoot(ctx, systemURI, target, false, mode)
}

// SetBootPersistent sets the boot device for every boot from now on, in mode's firmware mode.
func (c *Client) SetBootPersistent(ctx context.Context, systemURI string, target bmc.BootTarget, mode metalv1alpha1.BootMode) error {
	return c.setBoot(ctx, systemURI, target, true, mode)
}

func (c *Client) setBoot(ctx context.Context, systemURI string, target bmc.BootTarget, persistent bool, mode metalv1alpha1.BootMode) error {
	if err := checkSystem(systemURI); err != nil {
		return err
	}
	if _, err := BootFlags(target, persistent, false, 0); err != nil {
		return unsupported("%v", err)
	}
	return c.do(ctx, fmt.Sprintf("set boot device %s (persistent %t)", target, persistent), func(ctx context.Context, ic *client.Client) error {
		if err := c.sendBootFlags(ctx, ic, target, persistent, mode); err != nil {
			return err
		}
		c.boot.set(target, persistent, mode)
		return nil
	})
}

// reassertBoot re-sends the remembered persistent override (see bootMemory).
func (c *Client) reassertBoot(ctx context.Context, ic *client.Client) error {
	if c.boot.persistent == "" || c.boot.oncePending {
		return nil
	}
	return c.sendBootFlags(ctx, ic, c.boot.persistent, true, c.boot.persistentMode)
}

// sendBootFlags disables the valid bit's 60 s timeout (parameter 3; BMCs that refuse it, as
// OpenBMC does, are tolerated), then sets parameter 5 with the EFI bit efiBit decides: the mode
// asked for; without one, the firmware mode the BMC has now, which counts only with the valid
// bit set (once the flags expire or are consumed many BMCs answer zeros or stale bits), else
// the mode this client last sent or read valid, legacy at first. The BMC's flags are read only
// when no mode is asked for; its manufacturer (Get Device ID, once per client) only for a UEFI
// disk boot, whose selector depends on it (BootFlags).
func (c *Client) sendBootFlags(ctx context.Context, ic *client.Client, target bmc.BootTarget, persistent bool, mode metalv1alpha1.BootMode) error {
	var current []byte
	if mode == "" {
		var err error
		current, err = raw(ctx, ic, types.CommandGetSystemBootOptions, bootParamFlags, 0, 0)
		if err != nil && !isCC(err) {
			return err
		}
	}
	uefi, fromGuess := c.boot.efiBit(mode, current)
	var manufacturer uint32
	if target == bmc.BootDisk && uefi {
		var err error
		if manufacturer, err = c.manufacturerID(ctx, ic); err != nil {
			return err
		}
	}
	if _, err := raw(ctx, ic, types.CommandSetSystemBootOptions, bootParamValidBitClearing, bootNoTimeoutClear); err != nil && !isCC(err) {
		return err
	}
	flags, err := BootFlags(target, persistent, uefi, manufacturer)
	if err != nil {
		return unsupported("%v", err)
	}
	if _, err := raw(ctx, ic, types.CommandSetSystemBootOptions, append([]byte{bootParamFlags}, flags[:]...)...); err != nil {
		if isUnsupportedCC(err) {
			return unsupported("%v", err)
		}
		return err
	}
	c.boot.guessed = nil
	if fromGuess {
		c.boot.guessed = &flags
	}
	return nil
}

// BootMode reads the boot flags (parameter 5): with the valid bit set, the EFI bit says UEFI or
// Legacy (IPMI knows nothing of Secure Boot); without it, or from a BMC that keeps no flags,
// the mode is unknown (""). Flags this client sent with a guessed EFI bit (no mode asked for,
// none known) are unknown too: they say what it guessed, not how the firmware boots.
func (c *Client) BootMode(ctx context.Context, systemURI string) (metalv1alpha1.BootMode, error) {
	if err := checkSystem(systemURI); err != nil {
		return "", err
	}
	var mode metalv1alpha1.BootMode
	err := c.do(ctx, "read boot flags", func(ctx context.Context, ic *client.Client) error {
		b, err := raw(ctx, ic, types.CommandGetSystemBootOptions, bootParamFlags, 0, 0)
		if isCC(err) {
			return nil
		}
		if err != nil {
			return err
		}
		flags, err := DecodeBootFlags(b)
		if err != nil || (c.boot.guessed != nil && flags == *c.boot.guessed) {
			return nil
		}
		mode = BootModeOf(flags)
		return nil
	})
	return mode, err
}

// BootModeOf is the firmware mode boot flags (parameter 5's data bytes) say: "" unless the
// valid bit (0x80) is set; then UEFI when the EFI bit (0x20) is, else Legacy.
func BootModeOf(flags [5]byte) metalv1alpha1.BootMode {
	switch {
	case flags[0]&0x80 == 0:
		return ""
	case flags[0]&0x20 != 0:
		return metalv1alpha1.BootModeUEFI
	}
	return metalv1alpha1.BootModeLegacy
}

// manufacturerID is the BMC's IANA enterprise number from Get Device ID, read once per client
// (Manager's read counts too). A BMC that refuses the command or answers it malformed is of no
// known vendor (0), kept; no answer fails the call, as any other command would.
func (c *Client) manufacturerID(ctx context.Context, ic *client.Client) (uint32, error) {
	if c.manufacturer != nil {
		return *c.manufacturer, nil
	}
	b, err := raw(ctx, ic, types.CommandGetDeviceID)
	if err != nil && !isCC(err) {
		return 0, err
	}
	var n uint32
	if err == nil {
		if id, derr := DecodeDeviceID(b); derr == nil {
			n = id.ManufacturerID
		}
	}
	c.manufacturer = &n
	return n, nil
}

// isCC reports whether err is a completion code: the BMC answered, with a refusal.
func isCC(err error) bool {
	_, ok := completionCode(err)
	return ok
}
