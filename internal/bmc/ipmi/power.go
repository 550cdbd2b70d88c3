package ipmi

import (
	"context"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Chassis Control actions (IPMI v2.0 table 28-4).
const (
	chassisPowerDown    = 0x00
	chassisPowerUp      = 0x01
	chassisPowerCycle   = 0x02 // off, then on after the BMC's interval
	chassisHardReset    = 0x03
	chassisSoftShutdown = 0x05 // ACPI soft shutdown: the power button, on most BMCs
)

// PowerState reads the system's power with Get Chassis Status.
func (c *Client) PowerState(ctx context.Context, systemURI string) (metalv1alpha1.PowerState, error) {
	if err := checkSystem(systemURI); err != nil {
		return "", err
	}
	var state metalv1alpha1.PowerState
	err := c.do(ctx, "read power state", func(ctx context.Context, ic *client.Client) error {
		var err error
		state, err = powerState(ctx, ic)
		return err
	})
	return state, err
}

func powerState(ctx context.Context, ic *client.Client) (metalv1alpha1.PowerState, error) {
	b, err := raw(ctx, ic, types.CommandGetChassisStatus)
	if err != nil {
		return "", err
	}
	on, err := DecodeChassisPower(b)
	if err != nil {
		return "", err
	}
	if on {
		return metalv1alpha1.PowerStateOn, nil
	}
	return metalv1alpha1.PowerStateOff, nil
}

// SetPower sends a Chassis Control: On powers up, ForceOff powers down, GracefulShutdown asks
// for an ACPI soft shutdown, ForceRestart hard-resets a running system (power-cycles it when
// the BMC has no hard reset) and powers up one that is off. Before On and ForceRestart it re-sends the persistent boot override (see boot.go).
func (c *Client) SetPower(ctx context.Context, systemURI string, action bmc.PowerAction) error {
	if err := checkSystem(systemURI); err != nil {
		return err
	}
	return c.do(ctx, "power "+string(action), func(ctx context.Context, ic *client.Client) error {
		var control byte
		switch action {
		case bmc.PowerOn:
			control = chassisPowerUp
		case bmc.PowerOff:
			control = chassisPowerDown
		case bmc.PowerGracefulShutdown:
			control = chassisSoftShutdown
		case bmc.PowerForceRestart:
			state, err := powerState(ctx, ic)
			if err != nil {
				return err
			}
			control = chassisHardReset
			if state == metalv1alpha1.PowerStateOff {
				control = chassisPowerUp
			}
		default:
			return unsupported("power action %q", action)
		}
		if control == chassisPowerUp || control == chassisHardReset {
			if err := c.reassertBoot(ctx, ic); err != nil {
				return err
			}
		}
		_, err := raw(ctx, ic, types.CommandChassisControl, control)
		if err != nil && control == chassisHardReset && isUnsupportedCC(err) {
			// Some BMCs implement no hard reset; a power cycle restarts the host too (as
			// Redfish's ForceRestart falls back to PowerCycle).
			_, err = raw(ctx, ic, types.CommandChassisControl, chassisPowerCycle)
		}
		if err != nil {
			if isUnsupportedCC(err) {
				return unsupported("%v", err)
			}
			return err
		}
		c.boot.powerActionDone()
		return nil
	})
}
