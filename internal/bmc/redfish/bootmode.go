package redfish

import (
	"context"
	"fmt"
	"strings"

	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// BootMode reads how a system's firmware boots: BootSourceOverrideMode says UEFI or Legacy, and
// a UEFI system's SecureBoot resource, when the system links one, whether Secure Boot is on.
// "" when the system does not say (no Boot object, no mode).
func (c *Client) BootMode(ctx context.Context, systemURI string) (metalv1alpha1.BootMode, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return "", classify("reading system "+systemURI, err)
	}
	return bootModeOf(system), nil
}

// bootModeOf reads the mode of a system already read: one request more for a UEFI system that
// links a SecureBoot resource, none otherwise.
//
// UEFISecureBoot needs both SecureBootEnable (the setting, for the next boot) and
// SecureBootCurrentBoot Enabled (this boot ran with it): a setting turned on since the last
// power-on counts from the power-on that applies it, one turned off counts at once. A system without a SecureBoot resource (many bmcweb builds and older firmwares
// link none) is UEFI or Legacy by its override mode alone: a BMC that does not say, not an
// error. A SecureBoot resource that fails to read leaves the mode unknown
// rather than guessed: UEFI would be wrong for a machine that enforces Secure Boot, and the
// probe's report tells the mode anyway.
func bootModeOf(system *redfish.ComputerSystem) metalv1alpha1.BootMode {
	switch mode := strings.TrimSpace(string(system.Boot.BootSourceOverrideMode)); {
	case strings.EqualFold(mode, string(redfish.LegacyBootSourceOverrideMode)):
		return metalv1alpha1.BootModeLegacy
	case !strings.EqualFold(mode, string(redfish.UEFIBootSourceOverrideMode)):
		return ""
	}
	secureBoot, err := system.SecureBoot() // nil, nil when the system links none
	switch {
	case err != nil:
		return ""
	case secureBoot != nil && secureBoot.SecureBootEnable &&
		strings.EqualFold(string(secureBoot.SecureBootCurrentBoot), string(redfish.EnabledSecureBootCurrentBootType)):
		return metalv1alpha1.BootModeUEFISecureBoot
	}
	return metalv1alpha1.BootModeUEFI
}

// overrideMode is the BootSourceOverrideMode a boot mode is booted with: the override has no
// Secure Boot setting, so UEFISecureBoot is UEFI; "" for no mode.
func overrideMode(mode metalv1alpha1.BootMode) string {
	switch {
	case mode == metalv1alpha1.BootModeLegacy:
		return string(redfish.LegacyBootSourceOverrideMode)
	case mode.UEFI():
		return string(redfish.UEFIBootSourceOverrideMode)
	}
	return ""
}

// SetSecureBoot sets the system's SecureBootEnable for its next boot, when it differs: a PATCH
// of the SecureBoot resource the system links. A system without one answers ErrUnsupported.
func (c *Client) SetSecureBoot(ctx context.Context, systemURI string, enable bool) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return false, classify("reading system "+systemURI, err)
	}
	sb, err := system.SecureBoot()
	if err != nil {
		return false, classify("reading the SecureBoot resource of system "+systemURI, err)
	}
	if sb == nil {
		return false, bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s links no SecureBoot resource: %w", systemURI, bmc.ErrUnsupported))
	}
	if sb.SecureBootEnable == enable {
		return false, nil
	}
	sb.SecureBootEnable = enable
	if err := sb.Update(); err != nil {
		return false, classify(fmt.Sprintf("setting SecureBootEnable %t on system %s", enable, systemURI), err)
	}
	return true, nil
}
