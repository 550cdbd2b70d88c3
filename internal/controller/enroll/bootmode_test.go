package enroll

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// bootModeBMC is a BMC without inventory (IPMI's way) whose boot flags say mode.
type bootModeBMC struct {
	bmc.Client
	mode  m.BootMode
	err   error
	reads int
}

func (b *bootModeBMC) BootMode(context.Context, string) (m.BootMode, error) {
	b.reads++
	return b.mode, b.err
}

// TestBMCBootModeNeverOverwritesTheProbes: the BMC's mode is recorded with source BMC, over an
// older BMC reading too; a Probe-sourced mode is kept and the BMC not even asked; an unknown
// mode ("") or a BMC that cannot say changes nothing; a failed read is the poll's error.
func TestBMCBootModeNeverOverwritesTheProbes(t *testing.T) {
	ctx := context.Background()
	r := &BMCReconciler{}
	for _, tc := range []struct {
		name       string
		had        m.BootMode
		source     string
		bmc        bootModeBMC
		want       m.BootMode
		wantSource string
		wantReads  int
		wantErr    bool
	}{
		{"unknown before: the BMC's", "", "", bootModeBMC{mode: m.BootModeLegacy}, m.BootModeLegacy, m.BootModeSourceBMC, 1, false},
		{"the BMC's before: the BMC's now", m.BootModeLegacy, m.BootModeSourceBMC, bootModeBMC{mode: m.BootModeUEFI}, m.BootModeUEFI, m.BootModeSourceBMC, 1, false},
		{"the probe's: kept, the BMC not asked", m.BootModeUEFISecureBoot, m.BootModeSourceProbe, bootModeBMC{mode: m.BootModeLegacy}, m.BootModeUEFISecureBoot, m.BootModeSourceProbe, 0, false},
		{"the BMC does not say: kept", m.BootModeUEFI, m.BootModeSourceBMC, bootModeBMC{}, m.BootModeUEFI, m.BootModeSourceBMC, 1, false},
		{"the BMC cannot say: no error", "", "", bootModeBMC{err: bmc.ErrUnsupported}, "", "", 1, false},
		{"the read failed: the poll's error", "", "", bootModeBMC{err: errors.New("no answer")}, "", "", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := serverOfBMC("s", "b", "ipmi:system", "")
			s.Status.BootMode, s.Status.BootModeSource = tc.had, tc.source
			err := r.bmcBootMode(ctx, &tc.bmc, s, "ipmi:system")
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, s.Status.BootMode)
			assert.Equal(t, tc.wantSource, s.Status.BootModeSource)
			assert.Equal(t, tc.wantReads, tc.bmc.reads)
		})
	}
}
