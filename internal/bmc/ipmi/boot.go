package ipmi

import (
	"context"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

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
)

// BootFlags builds the 5 data bytes of boot option parameter 5 as Ironic sends them: byte 1 is
// valid (0x80) | persistent (0x40) | UEFI (0x20), byte 2 the device selector shifted left by 2
// (PXE 0x04, disk 0x08, CD 0x14), bytes 3–5 zero (no console redirection, lockouts or
// instance). So UEFI PXE once is a0 04 00 00 00.
func BootFlags(target bmc.BootTarget, persistent, uefi bool) ([5]byte, error) {
	var flags [5]byte
	var selector byte
	switch target {
	case bmc.BootPXE:
		selector = selectorPXE
	case bmc.BootDisk:
		selector = selectorDisk
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
// clear it at the next power action), so the last persistent target is re-sent before every
// power-on or restart this client issues, unless a one-time override was set since the last
// power action (re-sending would overwrite it).
type bootMemory struct {
	persistent  bmc.BootTarget // "" when none was set
	oncePending bool
	// uefi is the firmware mode of the last boot flags this client sent, or read with the
	// valid bit set: what it sends when the BMC's flags are not valid (legacy at first).
	uefi bool
}

func (m *bootMemory) set(target bmc.BootTarget, persistent bool) {
	if persistent {
		m.persistent, m.oncePending = target, false
		return
	}
	m.oncePending = true
}

func (m *bootMemory) powerActionDone() { m.oncePending = false }

// SetBootOnce sets the boot device for the next boot only.
func (c *Client) SetBootOnce(ctx context.Context, systemURI string, target bmc.BootTarget) error {
	return c.setBoot(ctx, systemURI, target, false)
}

// SetBootPersistent sets the boot device for every boot from now on.
func (c *Client) SetBootPersistent(ctx context.Context, systemURI string, target bmc.BootTarget) error {
	return c.setBoot(ctx, systemURI, target, true)
}

func (c *Client) setBoot(ctx context.Context, systemURI string, target bmc.BootTarget, persistent bool) error {
	if err := checkSystem(systemURI); err != nil {
		return err
	}
	if _, err := BootFlags(target, persistent, false); err != nil {
		return unsupported("%v", err)
	}
	return c.do(ctx, fmt.Sprintf("set boot device %s (persistent %t)", target, persistent), func(ctx context.Context, ic *client.Client) error {
		if err := c.sendBootFlags(ctx, ic, target, persistent); err != nil {
			return err
		}
		c.boot.set(target, persistent)
		return nil
	})
}

// reassertBoot re-sends the remembered persistent override (see bootMemory).
func (c *Client) reassertBoot(ctx context.Context, ic *client.Client) error {
	if c.boot.persistent == "" || c.boot.oncePending {
		return nil
	}
	return c.sendBootFlags(ctx, ic, c.boot.persistent, true)
}

// sendBootFlags disables the valid bit's 60 s timeout (parameter 3; BMCs that refuse it, as
// OpenBMC does, are tolerated), then sets parameter 5, keeping the firmware mode (EFI bit) the
// BMC has now: the seam carries none. The BMC's EFI bit counts only with the valid bit set
// (once the flags expire or are consumed many BMCs answer zeros or stale bits); otherwise the
// mode this client last sent or read valid is kept, legacy at first.
func (c *Client) sendBootFlags(ctx context.Context, ic *client.Client, target bmc.BootTarget, persistent bool) error {
	uefi := c.boot.uefi
	current, err := raw(ctx, ic, types.CommandGetSystemBootOptions, bootParamFlags, 0, 0)
	switch {
	case err == nil:
		if flags, derr := DecodeBootFlags(current); derr == nil && flags[0]&0x80 != 0 {
			uefi = flags[0]&0x20 != 0
			c.boot.uefi = uefi
		}
	case !isCC(err):
		return err
	}
	if _, err := raw(ctx, ic, types.CommandSetSystemBootOptions, bootParamValidBitClearing, bootNoTimeoutClear); err != nil && !isCC(err) {
		return err
	}
	flags, err := BootFlags(target, persistent, uefi)
	if err != nil {
		return unsupported("%v", err)
	}
	if _, err := raw(ctx, ic, types.CommandSetSystemBootOptions, append([]byte{bootParamFlags}, flags[:]...)...); err != nil {
		if isUnsupportedCC(err) {
			return unsupported("%v", err)
		}
		return err
	}
	c.boot.uefi = uefi
	return nil
}

// isCC reports whether err is a completion code: the BMC answered, with a refusal.
func isCC(err error) bool {
	_, ok := completionCode(err)
	return ok
}
