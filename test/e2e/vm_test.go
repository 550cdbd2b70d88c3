package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/vm"
)

// requireVMs fails the test when this machine cannot run the lab's VMs: in CI (root, QEMU
// installed by make test-deps) that is a broken setup, never a reason to skip. Outside CI a
// developer without root is told why the test did not run.
func requireVMs(t *testing.T) {
	t.Helper()
	err := lab.CanRunVMs()
	if err == nil {
		dir, _ := lab.ProbeDir()
		for _, f := range []string{"vmlinuz", "initramfs.cpio.gz"} {
			if _, statErr := os.Stat(filepath.Join(dir, f)); statErr != nil {
				err = fmt.Errorf("the probe image is missing (%v): run make probe-image", statErr)
			}
		}
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the VM end-to-end test cannot run in CI: %v", err)
	}
	t.Skipf("the VM end-to-end test needs what this machine lacks: %v; it runs as root after make test-deps and make probe-image (make test does both), and in CI it fails instead of skipping", err)
}

// TestVMsNetworkBootTheProbeAndAreDiscovered: four real VMs — one BIOS with virtio NIC and
// virtio + NVMe disks, one UEFI (OVMF, q35) with an e1000 NIC and SATA disks, one UEFI with
// Secure Boot enforced (Debian's OVMF with Microsoft's keys), one UEFI that boots by UEFI HTTP
// boot only — enroll through their Redfish BMC, network-boot the probe through Ironfleet's boot
// service (DHCP, TFTP, HTTP; the Secure Boot one through the signed chain, shim → GRUB → kernel,
// all over TFTP; the HTTP boot one iPXE over HTTP, without one TFTP request) on a private
// network, and
// become Available with exactly the hardware they were defined with, each in the boot mode its
// firmware has: from its BMC first, then from the probe's report (the firmware's variables).
// On the way: an unknown MAC gets no DHCP answer; a probe that cannot reach the registry leaves
// its Server in Discovery saying so, and reports once it can; each probe got its ignition
// once, at the address the boot service leased it, and another host asking for a VM's script
// is refused. Then, while the Secure Boot VM is installed and wiped, a FirmwareBaseline updates
// the BIOS VM's BIOS and a setting, verified by its probe's SMBIOS.
func TestVMsNetworkBootTheProbeAndAreDiscovered(t *testing.T) {
	requireVMs(t)
	ctx := context.Background()
	started := time.Now()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 2, SecureBootVMs: 1, HTTPBootVMs: 1,
		DiscoveryTimeout: 5 * time.Minute, VMRegistryClosed: true, ManualStart: true,
		// The Secure Boot VM is installed and wiped at the end: disks the wipe zero-fills quickly.
		VMDiskBytes: 256 << 20})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 4)
	require.True(t, l.VMs[2].Def.SecureBoot)
	require.True(t, l.VMs[3].Def.HTTPBoot)
	// Watching from before anything boots: any TFTP request from a VM, ever, is seen.
	tftpSeen, err := l.VMNetwork().WatchTFTP()
	require.NoError(t, err)
	t.Cleanup(tftpSeen.Close)
	// And any DHCP reply offering one something to boot (the control of the URI boot test's
	// "none": these VMs are offered their loaders).
	bootOffers, err := l.VMNetwork().WatchDHCPBootOffers()
	require.NoError(t, err)
	t.Cleanup(bootOffers.Close)
	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range l.VMs {
				logConsole(t, h)
			}
		}
	})

	// Before any probe reported, each Server has the boot mode its BMC reports.
	for _, h := range l.VMs {
		name := strings.ToLower(h.Def.SMBIOS.UUID)
		require.NoError(t, lab.Poll(ctx, 2*time.Minute, "server "+name+" with its BMC's boot mode", func() (bool, error) {
			var s m.Server
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				return false, nil
			}
			return s.Status.BootMode != "", nil
		}), "VM %s", h.Def.Name)
		var s m.Server
		require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &s))
		// The registry is out of the probes' reach: no report can have set it.
		assert.Equal(t, m.BootModeSourceBMC, s.Status.BootModeSource, "VM %s", h.Def.Name)
		assert.Equal(t, bootModeOf(h.Def), s.Status.BootMode, "VM %s: the BMC's boot mode", h.Def.Name)
	}

	// The VMs boot the probe, whose registry is out of reach: their Servers say so.
	for _, h := range l.VMs {
		name := strings.ToLower(h.Def.SMBIOS.UUID)
		require.NoError(t, lab.Poll(ctx, 4*time.Minute, "server "+name+" in Discovery saying the registry is unreachable", func() (bool, error) {
			var s m.Server
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				return false, nil
			}
			ready := meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
			return s.Status.State == m.ServerStateDiscovery && ready != nil && ready.Reason == "RegistryUnreachable" &&
				strings.Contains(ready.Message, "registry"), nil
		}), "VM %s", h.Def.Name)
	}

	t.Run("an unknown MAC gets no DHCP answer", func(t *testing.T) {
		// The control: a MAC of a Server with a Ready boot is answered from the same port.
		known, err := net.ParseMAC(l.VMs[0].Def.NICs[0].MAC)
		require.NoError(t, err)
		offer, err := discoverFrom(l.VMNetwork(), known)
		require.NoError(t, err, "a VM's MAC, its discovery boot Ready, is offered an address")
		t.Logf("offer for %s: %s", known, firstLine(offer))
		ignoredBefore := counter(t, "ironfleet_boot_dhcp_ignored_total", "reason", "unknown_mac")
		offer, err = discoverFrom(l.VMNetwork(), randomMAC(t))
		require.Error(t, err, "the boot service answered a MAC no Server has: %s", offer)
		assert.Greater(t, counter(t, "ironfleet_boot_dhcp_ignored_total", "reason", "unknown_mac"), ignoredBefore, "the unknown MAC is counted")
	})

	// Both probes fetched their ignition, once, from the address the boot service leased them.
	assert.GreaterOrEqual(t, counter(t, "ironfleet_boot_boots_served_total", "purpose", "Discovery"), 2.0, "discovery ignitions served to the VMs")
	for _, h := range l.VMs {
		rec := bootSecretsOf(ctx, t, l, strings.ToLower(h.Def.SMBIOS.UUID))
		assert.NotEmpty(t, rec.IgnitionServedTo, "VM %s: its ignition was served", h.Def.Name)
		assert.Equal(t, rec.HostAddress, rec.IgnitionServedTo, "VM %s: to the address its boot is bound to", h.Def.Name)
		assert.Equal(t, "Lease", rec.HostAddressSource, "VM %s: its DHCP lease", h.Def.Name)
		assert.False(t, rec.Ended, "VM %s", h.Def.Name)
	}
	// Another host on the VMs' network that knows VM 0's MAC asks for its script: refused (the
	// lease says which host VM 0 is), with nothing of the boot in the answer, and the boot goes on.
	scriptURL := l.BootService().Config().PublicURL + "/ipxe/" + l.VMs[0].Def.NICs[0].MAC
	resp, err := getInside(l.VMNetwork(), scriptURL)
	require.NoError(t, err)
	script, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode, "VM 0's script, asked for by another host: %s", script)
	assert.NotContains(t, string(script), "/ignition/")
	assert.NotContains(t, string(script), "/boot/")

	require.NoError(t, l.OpenVMRegistry())
	for _, h := range l.VMs {
		name := strings.ToLower(h.Def.SMBIOS.UUID)
		var s m.Server
		require.NoError(t, lab.Poll(ctx, 5*time.Minute, "server "+name+" Available", func() (bool, error) {
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				return false, nil
			}
			return s.Status.State == m.ServerStateAvailable, nil
		}), "VM %s", h.Def.Name)
		t.Logf("VM %s (%s, %s) Available %v after the lab started", h.Def.Name, h.Def.Firmware, s.Status.BootMode, time.Since(started).Round(time.Second))
		assertInventoryIsTheDefinition(t, h.Def, &s)
		// The probe read the mode from the firmware's own variables (efivars: SecureBoot).
		assert.Equal(t, bootModeOf(h.Def), s.Status.Inventory.BootMode, "VM %s: the probe's boot mode", h.Def.Name)
		assert.Equal(t, bootModeOf(h.Def), s.Status.BootMode, "VM %s", h.Def.Name)
		assert.Equal(t, m.BootModeSourceProbe, s.Status.BootModeSource, "VM %s", h.Def.Name)
	}

	// The Secure Boot VM came through the signed chain, with Secure Boot on in its firmware's
	// own record (the variable store, read from the host); the UEFI VM without it came through
	// iPXE.
	for _, h := range l.VMs {
		lines, err := vm.ReadConsole(h.Machine.ConsoleLog())
		require.NoError(t, err)
		console := strings.Join(lines, "\n")
		if h.Def.Firmware != vm.UEFI {
			continue
		}
		assert.NotEmpty(t, bootOffers.Seen(h.Def.NICs[0].MAC), "VM %s: the watch on the bridge sees DHCP offer it its loader", h.Def.Name)
		enabled, err := vm.SecureBootEnabled(h.Machine.FirmwareVars())
		require.NoError(t, err)
		assert.Equal(t, h.Def.SecureBoot, enabled, "VM %s: SecureBootEnable in its firmware's variable store", h.Def.Name)
		switch {
		case h.Def.SecureBoot:
			assert.Contains(t, console, "NBP filename is shimx64.efi", "VM %s: its firmware loaded shim", h.Def.Name)
			assert.Contains(t, console, "Ironfleet: booting the metalprobe (discovery)", "VM %s: GRUB read its boot configuration", h.Def.Name)
		case h.Def.HTTPBoot:
			// UEFI HTTP boot: iPXE's URL from DHCP, iPXE over HTTP, and not one TFTP request.
			assert.Contains(t, console, "Start HTTP Boot over IPv4", "VM %s: its firmware HTTP-booted", h.Def.Name)
			assert.NotContains(t, console, "Start PXE over", "VM %s: its firmware's PXE is off", h.Def.Name)
			assert.Empty(t, tftpSeen.Seen(h.Def.NICs[0].MAC), "VM %s: no TFTP request on the bridge", h.Def.Name)
		default:
			assert.Contains(t, console, "NBP filename is snponly.efi", "VM %s: its firmware loaded iPXE", h.Def.Name)
			assert.NotEmpty(t, tftpSeen.Seen(h.Def.NICs[0].MAC), "VM %s: the watch sees its TFTP requests", h.Def.Name)
		}
	}

	// The UEFI VM's firmware PXE loaded iPXE over TFTP.
	assert.Positive(t, counter(t, "ironfleet_boot_tftp_sent_bytes_total"), "iPXE served over TFTP")

	// The Secure Boot VM is installed and wiped with Secure Boot on all the way: the install's
	// probe through the signed chain, the tenant image from its disk through the image's own
	// shim and signed GRUB to Debian's signed kernel (its OS reports that the EFI stub found
	// Secure Boot enforced), the wipe's probe through the chain again; its disk read back.
	// Meanwhile a FirmwareBaseline updates the BIOS VM's BIOS and one of its settings, through
	// its BMC, verified by its probe from inside the host (firmware_test.go).
	firmwareUpdated := startFirmwareUpdate(t, l, l.VMs[0])
	sb := l.VMs[2]
	installAndWipe(t, l, sb, "secure-boot-tenant", "Secure Boot", func() {
		enabled, err := vm.SecureBootEnabled(sb.Machine.FirmwareVars())
		require.NoError(t, err)
		assert.True(t, enabled, "VM %s: Secure Boot still on in its firmware's variable store", sb.Def.Name)
	})
	lines, err := vm.ReadConsole(sb.Machine.ConsoleLog())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, strings.Count(strings.Join(lines, "\n"), "NBP filename is shimx64.efi"), 3,
		"VM %s loaded shim from the network for discovery, install and wipe", sb.Def.Name)
	firmwareUpdated()
}

// bootSecretsOf is the record of where the current discovery boot of a server's secrets went.
func bootSecretsOf(ctx context.Context, t *testing.T, l *lab.Lab, server string) m.BootSecrets {
	t.Helper()
	var list m.ServerBootConfigurationList
	require.NoError(t, l.Client.List(ctx, &list))
	for _, sbc := range list.Items {
		if sbc.Spec.ServerRef.Name == server && sbc.Spec.Purpose == m.BootPurposeDiscovery {
			require.NotNil(t, sbc.Status.Secrets, "boot configuration %s records no secrets", sbc.Name)
			return *sbc.Status.Secrets
		}
	}
	t.Fatalf("server %s has no discovery boot configuration", server)
	return m.BootSecrets{}
}

// assertInventoryIsTheDefinition: what the probe reported equals the VM's definition.
func assertInventoryIsTheDefinition(t *testing.T, def vm.Definition, s *m.Server) {
	t.Helper()
	inv := s.Status.Inventory
	require.NotNil(t, inv)
	assert.Equal(t, "Probe", inv.Source)
	require.NotNil(t, inv.DMI)
	assert.Equal(t, strings.ToLower(def.SMBIOS.UUID), strings.ToLower(inv.DMI.System.UUID), "UUID")
	assert.Equal(t, def.SMBIOS.Serial, inv.DMI.System.SerialNumber, "serial")
	assert.Equal(t, def.SMBIOS.Manufacturer, inv.DMI.System.Manufacturer, "manufacturer")
	assert.Equal(t, int32(def.CPUs), inv.CPU.Threads, "CPU count")
	require.NotNil(t, inv.Memory.Total)
	assert.Equal(t, int64(def.MemoryMiB)<<20, inv.Memory.Total.Value(), "memory")

	type disk struct {
		serial string
		size   int64
	}
	var want, got []disk
	for _, d := range def.Disks {
		want = append(want, disk{d.Serial, d.SizeBytes})
	}
	for _, d := range inv.Storage {
		if d.Removable {
			continue
		}
		var size int64
		if d.Size != nil {
			size = d.Size.Value()
		}
		got = append(got, disk{d.SerialNumber, size})
	}
	byDisk := func(ds []disk) { sort.Slice(ds, func(i, j int) bool { return ds[i].serial < ds[j].serial }) }
	byDisk(want)
	byDisk(got)
	assert.Equal(t, want, got, "disks (serial, size)")

	var wantMACs, gotMACs []string
	for _, n := range def.NICs {
		wantMACs = append(wantMACs, strings.ToLower(n.MAC))
	}
	for _, n := range inv.NetworkInterfaces {
		gotMACs = append(gotMACs, strings.ToLower(n.MACAddress))
	}
	sort.Strings(wantMACs)
	sort.Strings(gotMACs)
	assert.Equal(t, wantMACs, gotMACs, "NIC MACs")
}

// bootModeOf is the boot mode a VM definition's firmware has, as its simulated BMC reports it
// (test/vm's SystemSpec; the simulator's modes are the API's words).
func bootModeOf(def vm.Definition) m.BootMode { return m.BootMode(vm.SystemSpec(def).BootMode) }

// discoverFrom sends a DHCPDISCOVER from mac on a new port of the VMs' bridge and returns the
// offer, or the error of getting none within a few seconds.
func discoverFrom(network *vm.Network, mac net.HardwareAddr) (offer string, err error) {
	err = network.Do(func() error {
		if err := bridgePort(); err != nil {
			return err
		}
		c, err := nclient4.New("dhcptest0", nclient4.WithHWAddr(mac), nclient4.WithTimeout(3*time.Second), nclient4.WithRetry(2))
		if err != nil {
			return fmt.Errorf("opening a DHCP client: %w", err)
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := c.DiscoverOffer(ctx)
		if err != nil {
			return err
		}
		offer = got.Summary()
		return nil
	})
	return offer, err
}

// bridgePort makes (once) a veth pair inside the namespace the caller's thread is in, one end
// on the VMs' bridge, the other, dhcptest0, for a test's DHCP client.
func bridgePort() error {
	if _, err := netlink.LinkByName("dhcptest0"); err == nil {
		return nil
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dhcptest0"}, PeerName: "dhcptest0-br"}
	if err := netlink.LinkAdd(veth); err != nil {
		return fmt.Errorf("adding a veth on the bridge: %w", err)
	}
	peer, err := netlink.LinkByName("dhcptest0-br")
	if err != nil {
		return err
	}
	bridge, err := netlink.LinkByName(vm.BridgeName)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetMaster(peer, bridge); err != nil {
		return err
	}
	for _, link := range []netlink.Link{veth, peer} {
		if err := netlink.LinkSetUp(link); err != nil {
			return err
		}
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// getInside GETs a URL from inside the VMs' network namespace.
func getInside(network *vm.Network, url string) (*http.Response, error) {
	var resp *http.Response
	err := network.Do(func() error {
		var conn net.Conn
		host := strings.TrimPrefix(url, "http://")
		host = host[:strings.Index(host, "/")]
		var err error
		if conn, err = net.DialTimeout("tcp", host, 5*time.Second); err != nil {
			return err
		}
		tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}
		resp, err = (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url) //nolint:noctx
		return err
	})
	return resp, err
}

// counter sums a counter of this process's metrics registry (the lab's boot service runs
// in-process) over the series whose labels match the given name/value pairs.
func counter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func randomMAC(t *testing.T) net.HardwareAddr {
	mac := make(net.HardwareAddr, 6)
	_, err := rand.Read(mac)
	require.NoError(t, err)
	mac[0] = mac[0]&0xfe | 0x02 // unicast, locally administered
	return mac
}

// logConsole shows the end of a VM's console when a test failed.
func logConsole(t *testing.T, h *lab.VMHost) {
	lines, err := vm.ReadConsole(h.Machine.ConsoleLog())
	if err != nil {
		t.Logf("VM %s console: %v", h.Def.Name, err)
		return
	}
	if len(lines) > 60 {
		lines = lines[len(lines)-60:]
	}
	t.Logf("VM %s console (last %d lines):\n%s", h.Def.Name, len(lines), strings.Join(lines, "\n"))
}
