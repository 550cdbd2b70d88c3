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
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestVMsBootTheProbeFromAURITheirBMCsSet: two UEFI VMs, one with Secure Boot enforced
// (Microsoft's keys), each behind a Redfish BMC of its own whose bootMethod is UefiHttp. The
// operator has each BMC set the boot override to UefiHttp once, with HttpBootUri the boot's ISO
// on the boot service; the VM's firmware gets an address from the boot service's DHCP and
// nothing to boot (no boot file, no TFTP server, no HTTPClient class: the watch on the bridge
// sees no such offer), fetches the ISO by UEFI HTTP boot and boots it from a RAM disk (shim,
// signed GRUB, Debian's kernel); the probe reports, and each is discovered with exactly its
// hardware, in its firmware's boot mode. Not one TFTP packet from either.
func TestVMsBootTheProbeFromAURITheirBMCsSet(t *testing.T) {
	requireVMs(t)
	requireProbeISO(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, SecureBootVMs: 1, HTTPBootVMs: 1,
		URIBoot: true, DiscoveryTimeout: 5 * time.Minute, ManualStart: true})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 2)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range l.VMs {
				logConsole(t, h)
			}
		}
	})
	// Watching from before anything boots.
	network := l.VMNetwork()
	tftpSeen, err := network.WatchTFTP()
	require.NoError(t, err)
	t.Cleanup(tftpSeen.Close)
	replies, err := network.WatchDHCPReplies()
	require.NoError(t, err)
	t.Cleanup(replies.Close)
	bootOffers, err := network.WatchDHCPBootOffers()
	require.NoError(t, err)
	t.Cleanup(bootOffers.Close)
	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))

	require.NoError(t, l.WaitForServers(ctx, 3, m.ServerStateAvailable, 8*time.Minute))
	for _, h := range l.VMs {
		name := strings.ToLower(h.Def.SMBIOS.UUID)
		var s m.Server
		require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &s))
		assertInventoryIsTheDefinition(t, h.Def, &s)
		assert.Equal(t, bootModeOf(h.Def), s.Status.BootMode, "VM %s", h.Def.Name)
		assert.Equal(t, m.BootModeSourceProbe, s.Status.BootModeSource, "VM %s", h.Def.Name)

		var b m.BMC
		require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: s.BMCName()}, &b))
		assert.Equal(t, m.BootMethodUefiHttp, b.Spec.BootMethod)
		httpBoot := meta.FindStatusCondition(b.Status.Conditions, m.ConditionHTTPBoot)
		require.NotNil(t, httpBoot, "BMC %s says whether it boots a URI", b.Name)
		assert.Equal(t, m.ReasonHTTPBootURI, httpBoot.Reason, httpBoot.Message)

		var byURI bool
		for _, ev := range h.BMC.BootLog(h.SystemID) {
			byURI = byURI || (ev.Boot == bmcsim.BootUefiHttp && strings.Contains(ev.HTTPBootURI, "/boot/") && strings.HasSuffix(ev.HTTPBootURI, "/probe.iso"))
		}
		assert.True(t, byURI, "VM %s's BMC was set to boot the boot's ISO by URI", h.Def.Name)

		lines, err := vm.ReadConsole(h.Machine.ConsoleLog())
		require.NoError(t, err)
		console := strings.Join(lines, "\n")
		assert.Contains(t, console, "Start HTTP Boot over IPv4", "VM %s: its firmware HTTP-booted", h.Def.Name)
		assert.Contains(t, console, "/probe.iso", "VM %s: the URI its BMC gave it", h.Def.Name)
		assert.NotContains(t, console, "NBP filename", "VM %s: no PXE loader", h.Def.Name)
		if h.Def.SecureBoot {
			enabled, err := vm.SecureBootEnabled(h.Machine.FirmwareVars())
			require.NoError(t, err)
			assert.True(t, enabled, "VM %s: Secure Boot on in its firmware's variable store", h.Def.Name)
		}

		mac := h.Def.NICs[0].MAC
		assert.NotEmpty(t, replies.Seen(mac), "VM %s: DHCP answered it (an address)", h.Def.Name)
		assert.Empty(t, bootOffers.Seen(mac), "VM %s: no DHCP reply offered it anything to boot", h.Def.Name)
		assert.Empty(t, tftpSeen.Seen(mac), "VM %s: no TFTP", h.Def.Name)
	}
}
