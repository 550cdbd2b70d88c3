package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestAVirtualMediaVMIsDiscoveredInstalledAndWipedWithoutDHCP: real VMs whose BMCs boot by
// VirtualMedia, with static probe networks, on a network where the boot service's DHCP is off.
// Each BMC fetches each boot's ISO from the boot service and its VM boots it from its CD drive
// through its own firmware (SeaBIOS and isolinux; OVMF with Secure Boot enforced — Microsoft's
// keys — and the ISO's shim and signed GRUB): both are discovered (inventory exact, the second
// in UEFISecureBoot by its probe's report and by its firmware's variable store); the Secure
// Boot one is provisioned with Secure Boot on (the installed OS reports the claim's ignition
// byte for byte, and that the EFI stub found Secure Boot enforced) and wiped (its disk read
// back); and the bridge sees not one DHCP packet from either over the whole run. The ISO is
// ejected at the end of every boot.
func TestAVirtualMediaVMIsDiscoveredInstalledAndWipedWithoutDHCP(t *testing.T) {
	requireVMs(t)
	requireTenantImage(t)
	requireProbeISO(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 1, SecureBootVMs: 1,
		VirtualMedia: true, DiscoveryTimeout: 5 * time.Minute, VMDiskBytes: 256 << 20, ManualStart: true})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 2)
	require.True(t, l.VMs[1].Def.SecureBoot)
	h := l.VMs[1]
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range l.VMs {
				logConsole(t, h)
			}
		}
	})
	// Watching from before anything boots: any DHCP packet from the VM, ever, is seen.
	dhcpSeen, err := l.VMNetwork().WatchDHCP()
	require.NoError(t, err)
	t.Cleanup(dhcpSeen.Close)
	noDHCP := func(when string) {
		t.Helper()
		for _, h := range l.VMs {
			for _, nic := range h.Def.NICs {
				assert.Empty(t, dhcpSeen.Seen(nic.MAC), "no DHCP from VM %s's NIC %s %s", h.Def.Name, nic.MAC, when)
			}
		}
	}
	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))

	require.NoError(t, l.WaitForServers(ctx, 3, m.ServerStateAvailable, 8*time.Minute))
	for _, h := range l.VMs {
		var server m.Server
		require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: strings.ToLower(h.Def.SMBIOS.UUID)}, &server))
		assertInventoryIsTheDefinition(t, h.Def, &server)
		console, err := os.ReadFile(h.Machine.ConsoleLog())
		require.NoError(t, err)
		assert.Contains(t, string(console), ignition.MediaConsoleLine, "VM %s's probe took its ignition from the ISO", h.Def.Name)
		assert.Contains(t, string(console), " static ", "VM %s's probe configured its static network", h.Def.Name)
		assert.Equal(t, bootModeOf(h.Def), server.Status.BootMode, "VM %s's boot mode", h.Def.Name)
		assert.Equal(t, m.BootModeSourceProbe, server.Status.BootModeSource, "VM %s", h.Def.Name)
		if h.Def.SecureBoot {
			on, err := vm.SecureBootEnabled(h.Machine.FirmwareVars())
			require.NoError(t, err)
			assert.True(t, on, "VM %s: Secure Boot on in its firmware's variable store", h.Def.Name)
		}
		// The step that ends the boot ejects the ISO right after its status write.
		assert.Eventually(t, func() bool { return !h.BMC.Media(h.SystemID).Inserted }, time.Minute, 200*time.Millisecond,
			"VM %s's discovery ISO is ejected once the probe reported", h.Def.Name)
		stats := h.BMC.Stats()
		assert.GreaterOrEqual(t, stats.MediaInserts, int64(1), "VM %s's BMC was asked to insert the ISO", h.Def.Name)
		assert.GreaterOrEqual(t, stats.MediaEjects, int64(1), "and to eject it")
	}
	noDHCP("during discovery")
	// Provisioned: the claim's image installed by a probe booted from its ISO, on the Secure
	// Boot VM (whose OVMF boots the tenant image's shim, GRUB and kernel, all signed, from the
	// disk the hints name); then wiped: the claim goes, a wipe probe boots from its ISO, the
	// disk is read back. The BIOS VM's boots from its ISO are the discovery's above; its
	// firmware boots the tenant image's syslinux in the network-boot tests.
	installAndWipe(t, l, h, "vmedia-tenant", "virtual media", func() {
		assert.False(t, h.BMC.Media(h.SystemID).Inserted, "the install ISO was ejected before the disk booted")
	})
	assert.False(t, h.BMC.Media(h.SystemID).Inserted, "the wipe ISO is ejected")
	assert.GreaterOrEqual(t, h.BMC.Stats().MediaInserts, int64(3), "three boots, each from its own ISO: discovery, install, wipe")

	noDHCP("over the whole run")
}

// requireProbeISO fails the test in CI, or skips it outside, when make probe-image has not
// built the probe's ISO.
func requireProbeISO(t *testing.T) {
	t.Helper()
	dir, err := lab.ProbeDir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, bootmedia.ISOFile))
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the probe's ISO is missing in CI (%v): make test builds it with make probe-image", err)
	}
	t.Skipf("the probe's ISO is missing (%v): run make probe-image", err)
}
