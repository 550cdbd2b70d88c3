package redfish_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestEveryControlQuirk takes each quirk of the shared design note's Control section
// (REDFISH-QUIRKS.md) against the simulator and checks what the client makes of it: the
// control works, or it says "unsupported"; the power state is observed, never assumed.
func TestEveryControlQuirk(t *testing.T) {
	for name, tc := range map[string]struct {
		quirks bmcsim.Quirks
		check  func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo)
	}{
		"reset types only in ActionInfo": {bmcsim.Quirks{ResetTypesOnlyInActionInfo: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			assert.Equal(t, "On", sim.PowerState(sys.ID))
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff))
			assert.Equal(t, "Off", sim.PowerState(sys.ID))
		}},
		"a malformed allowable reset type": {bmcsim.Quirks{MalformedResetType: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff), "ForceOff is picked, not the malformed \"Force Off \"")
			assert.Equal(t, "Off", sim.PowerState(sys.ID))
		}},
		"no Reset action": {bmcsim.Quirks{NoResetAction: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			err := c.SetPower(ctx, sys.URI, bmc.PowerOn)
			assert.True(t, errors.Is(err, bmc.ErrUnsupported), "unsupported, not a crash or a retry loop: %v", err)
		}},
		"no Boot object": {bmcsim.Quirks{NoBootObject: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			assert.True(t, errors.Is(c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, ""), bmc.ErrUnsupported))
			assert.True(t, errors.Is(c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, ""), bmc.ErrUnsupported))
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn), "power still works")
		}},
		"one-time boot overrides only": {bmcsim.Quirks{BootOnceOnly: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			assert.True(t, errors.Is(c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, ""), bmc.ErrUnsupported))
			require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, ""))
			target, enabled := sim.BootOverride(sys.ID)
			assert.Equal(t, bmcsim.BootTarget("Pxe"), target)
			assert.Equal(t, "Once", enabled)
		}},
		"PATCHing the boot mode is refused": {bmcsim.Quirks{RejectBootModePatch: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootPXE, ""), "no mode asked for: BootSourceOverrideMode is not sent")
			require.NoError(t, c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, metalv1alpha1.BootModeUEFI), "the mode it has: not sent")
			require.NoError(t, c.SetBootPersistent(ctx, sys.URI, bmc.BootDisk, metalv1alpha1.BootModeLegacy), "another mode: refused, sent again without it")
			target, enabled := sim.BootOverride(sys.ID)
			assert.Equal(t, bmcsim.BootTarget("Hdd"), target)
			assert.Equal(t, "Continuous", enabled)
		}},
		"the power state lags a reset": {bmcsim.Quirks{PowerStateLag: 300 * time.Millisecond}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			now, err := c.PowerState(ctx, sys.URI)
			require.NoError(t, err)
			assert.Equal(t, metalv1alpha1.PowerStateOff, now, "read at once: the old state")
			assert.Eventually(t, func() bool {
				now, err := c.PowerState(ctx, sys.URI)
				return err == nil && now == metalv1alpha1.PowerStateOn
			}, 5*time.Second, 50*time.Millisecond, "observed once the BMC shows it")
		}},
		"no power state": {bmcsim.Quirks{NoPowerState: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			now, err := c.PowerState(ctx, sys.URI)
			require.NoError(t, err)
			assert.Equal(t, metalv1alpha1.PowerStateUnknown, now, "absent is Unknown, not Off")
		}},
		"resets accepted and ignored": {bmcsim.Quirks{IgnoresResets: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn), "the BMC says yes")
			now, err := c.PowerState(ctx, sys.URI)
			require.NoError(t, err)
			assert.Equal(t, metalv1alpha1.PowerStateOff, now, "and the client reports what the BMC shows, not what it asked")
		}},
		"already in that state (409)": {bmcsim.Quirks{ResetConflictInState: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c bmc.Client, sys bmc.SystemInfo) {
			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOff), "off already: done, not failed")
		}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			q := tc.quirks
			sim := startSim(t, bmcsim.Options{Quirks: &q})
			c := connect(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			require.NotEmpty(t, systems)
			tc.check(t, ctx, sim, c, systems[0])
		})
	}
}
