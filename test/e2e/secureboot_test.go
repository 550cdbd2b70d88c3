package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestAnUnsignedLoaderIsRefusedUnderSecureBoot: a VM whose firmware enforces Secure Boot
// (OVMF with Microsoft's keys) behind a BMC that cannot tell (no SecureBoot resource, as many
// OpenBMC builds): the BMC says UEFI, so the boot service offers the VM's PXE iPXE
// (snponly.efi), which is not signed, and the firmware refuses to run it. The VM never reaches
// the probe; when the discovery times out, the Server says why, and what to set.
func TestAnUnsignedLoaderIsRefusedUnderSecureBoot(t *testing.T) {
	requireVMs(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, SecureBootVMs: 1,
		BMCQuirks: bmcsim.Quirks{NoSecureBoot: true},
		// Long enough for OVMF to start and try its PXE (about 25 s under TCG), short enough
		// for a test.
		DiscoveryTimeout: 75 * time.Second})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 1)
	h := l.VMs[0]
	require.True(t, h.Def.SecureBoot)
	t.Cleanup(func() {
		if t.Failed() {
			logConsole(t, h)
		}
	})
	name := strings.ToLower(h.Def.SMBIOS.UUID)

	var timedOut *metav1.Condition
	waitForServer(t, l, name, 4*time.Minute, func(s *m.Server) bool {
		timedOut = meta.FindStatusCondition(s.Status.Conditions, m.ConditionDiscovered)
		return timedOut != nil && timedOut.Reason == m.ReasonDiscoveryTimedOut
	})
	t.Logf("Discovered=%s %s: %s", timedOut.Status, timedOut.Reason, timedOut.Message)
	assert.Equal(t, metav1.ConditionFalse, timedOut.Status)
	assert.Contains(t, timedOut.Message, "snponly.efi", "the Server names the loader offered")
	assert.Contains(t, timedOut.Message, "the firmware did not run the loader")
	assert.Contains(t, timedOut.Message, "set spec.bootMode to UEFISecureBoot", "and what to set")
	assert.Contains(t, timedOut.Message, "as its BMC reports", "and where its boot mode came from")

	lines, err := vm.ReadConsole(h.Machine.ConsoleLog())
	require.NoError(t, err)
	console := strings.Join(lines, "\n")
	assert.Contains(t, console, "NBP filename is snponly.efi", "the firmware's PXE was offered iPXE")
	assert.Contains(t, console, "Access Denied", "and refused it")
	assert.NotContains(t, console, "iPXE initialising devices", "iPXE never ran")
	assert.NotContains(t, console, "ironfleet-init", "the probe never booted")
	enabled, err := vm.SecureBootEnabled(h.Machine.FirmwareVars())
	require.NoError(t, err)
	assert.True(t, enabled, "Secure Boot on in the VM's firmware's variable store")
}
