package tenantimage

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
	"github.com/ironfleet/ironfleet/test/vm"
)

// The target machine: a BIOS server with one virtio disk, larger than the image (the config
// drive goes after the image's partition), and one virtio NIC on a private network.
const (
	targetDiskBytes = 256 << 20
	targetMAC       = "52:54:00:7e:4a:01"
	instanceID      = "6f1e2d3c-4b5a-4978-8c6d-5e4f3a2b1c0d"
	hostname        = "tenant-0"
	bootTimeout     = 3 * time.Minute
)

// TestTenantBootsFromDiskAndReadsConfigDrive installs the image onto a larger disk, adds a
// config drive with metalprobe/configdrive, and boots the disk in QEMU (no -kernel) by each
// firmware: SeaBIOS, which loads syslinux's MBR, syslinux the kernel; and OVMF with Secure
// Boot enforced (Microsoft's keys), which loads the image's shim, shim the signed GRUB, GRUB
// Debian's signed kernel. The console must show a kernel command line that came from the
// image's boot loader, and /init's line with the SHA-256 of the user_data written; the report
// /init POSTs over the static address from the user_data must carry exactly the user_data's
// bytes, and how the firmware booted it; and nothing may have asked for DHCP.
func TestTenantBootsFromDiskAndReadsConfigDrive(t *testing.T) {
	requireVMs(t)
	dir, m := testImage(t)
	for _, c := range []struct {
		firmware   vm.Firmware
		secureBoot bool
		want       string
	}{
		{vm.BIOS, false, contract.FirmwareBIOS},
		{vm.UEFI, true, contract.FirmwareUEFISecureBoot},
	} {
		t.Run(c.want, func(t *testing.T) {
			bootTenant(t, dir, m, c.firmware, c.secureBoot, c.want)
		})
	}
}

func bootTenant(t *testing.T, dir string, m *Manifest, firmware vm.Firmware, secureBoot bool, wantFirmware string) {

	network, err := vm.NewNetwork(vm.NetworkOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, network.Close()) })
	bridge := network.BridgeIP()
	guest := bridge.As4()
	guest[3] = 50
	guestAddr := netip.PrefixFrom(netip.AddrFrom4(guest), network.Subnet().Bits())

	// Any DHCP request the guest (or its NIC's iPXE ROM) broadcasts reaches this socket.
	dhcp, err := network.ListenUDPOnBridge(":67")
	require.NoError(t, err)
	var dhcpMu sync.Mutex
	var dhcpSeen []string
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := dhcp.ReadFromUDP(buf)
			if err != nil {
				return
			}
			dhcpMu.Lock()
			dhcpSeen = append(dhcpSeen, from.String()+" "+strings.TrimSpace(string(bytes.ToValidUTF8(buf[:min(n, 64)], nil))))
			dhcpMu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = dhcp.Close() })

	ln, err := network.ListenTCP(net.JoinHostPort(bridge.String(), "0"))
	require.NoError(t, err)
	reports := ServeReports(ln)
	t.Cleanup(func() { assert.NoError(t, reports.Close()) })
	reportURL := "http://" + ln.Addr().String() + "/report"

	// The user_data: the test's object, an Ignition-like document around it, and bytes after
	// the JSON that are not even UTF-8 (/init reports the file byte for byte, and reads only
	// the first JSON value).
	userData, err := UserData(TestConfig{Address: guestAddr.String(), ReportURL: reportURL},
		map[string]any{
			"ignition": map[string]any{"version": "3.4.0"},
			"storage":  map[string]any{"files": []any{map[string]any{"path": "/etc/motd", "contents": map[string]any{"source": "data:,hello%20tenant"}}}},
			"padding":  strings.Repeat("ironfleet ", 5000),
		},
		[]byte("\n# trailer \x00\x01\xfe\xff\n"))
	require.NoError(t, err)

	machine, err := vm.New(vm.Definition{
		Name: "tenant", Firmware: firmware, SecureBoot: secureBoot, CPUs: 1, MemoryMiB: 512,
		SMBIOS: vm.SMBIOS{Manufacturer: "Ironfleet", Product: "Tenant VM", Serial: "IF-TENANT-1", UUID: instanceID},
		Disks:  []vm.Disk{{Bus: vm.Virtio, SizeBytes: targetDiskBytes, Serial: "TENANT-DISK-1"}},
		NICs:   []vm.NIC{{Model: vm.VirtioNet, MAC: targetMAC}},
	}, vm.Options{Dir: t.TempDir(), Network: network})
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, machine.Close())
		if t.Failed() {
			lines, _ := vm.ReadConsole(machine.ConsoleLog())
			logTail(t, "console "+machine.ConsoleLog(), lines)
			qemu, _ := os.ReadFile(machine.QEMULog())
			t.Logf("QEMU log:\n%s", qemu)
		}
	})
	disk := machine.DiskFiles()[0]
	require.NoError(t, CopyDisk(dir, disk))
	res, err := configdrive.Write(disk, configdrive.Files{InstanceID: instanceID, Hostname: hostname, UserData: userData})
	require.NoError(t, err)
	require.Equal(t, 2, res.Partition, "the config drive is the partition after the image's")
	st, err := os.Stat(disk)
	require.NoError(t, err)
	require.EqualValues(t, targetDiskBytes, st.Size())

	exited := make(chan error, 1)
	machine.OnExit(func(err error) { exited <- err })
	start := time.Now()
	require.NoError(t, machine.Start(vm.BootDisk))

	var report Report
	select {
	case report = <-reports.Reports():
		t.Logf("report after %s", time.Since(start).Round(10*time.Millisecond))
	case err := <-exited:
		t.Fatalf("QEMU exited before the report: %v", err)
	case <-time.After(bootTimeout):
		t.Fatalf("no report within %s", bootTimeout)
	}

	assert.True(t, bytes.Equal(userData, report.UserData), "the report's user_data (%d bytes) is the %d bytes written", len(report.UserData), len(userData))
	assert.Equal(t, "vda2", report.ConfigDrive)
	assert.Equal(t, m.Kernel.Release(), report.Kernel)
	assert.Equal(t, "BOOT_IMAGE=/"+BootKernel+" "+KernelCmdline, report.Cmdline, "syslinux booted the image's entry")
	assert.Equal(t, wantFirmware, report.Firmware, "how the firmware booted it, as the EFI stub found it")
	assert.Equal(t, guestAddr.String(), report.Address)
	assert.NotEmpty(t, report.Interface)
	var meta struct {
		UUID     string `json:"uuid"`
		Hostname string `json:"hostname"`
	}
	require.NoError(t, json.Unmarshal(report.MetaData, &meta), "meta_data.json: %s", report.MetaData)
	assert.Equal(t, instanceID, meta.UUID)
	assert.Equal(t, hostname, meta.Hostname)

	// The console: SeaBIOS booted the disk, syslinux the kernel, /init read the drive.
	consoleHas := func(want string) bool {
		lines, _ := vm.ReadConsole(machine.ConsoleLog())
		for _, l := range lines {
			if strings.Contains(l, want) {
				return true
			}
		}
		return false
	}
	require.Eventually(t, func() bool { return consoleHas(ReportedLine(reportURL)) }, 30*time.Second, 100*time.Millisecond,
		"the console shows %q", ReportedLine(reportURL))
	lines, err := vm.ReadConsole(machine.ConsoleLog())
	require.NoError(t, err)
	console := strings.Join(lines, "\n")
	for _, l := range lines {
		if strings.HasPrefix(l, ConsolePrefix) || strings.Contains(l, "SYSLINUX") || strings.Contains(l, "Booting from") {
			t.Log("console: " + l)
		}
	}
	if firmware == vm.BIOS {
		assert.Contains(t, console, "Booting from Hard Disk", "SeaBIOS booted the disk")
		assert.NotContains(t, console, "Booting from ROM", "the NIC's option ROM never booted")
		assert.Contains(t, console, "SYSLINUX 6.04", "syslinux's banner")
	} else {
		enabled, err := vm.SecureBootEnabled(machine.FirmwareVars())
		require.NoError(t, err)
		assert.Equal(t, secureBoot, enabled, "Secure Boot in the firmware's own variable store")
		assert.NotContains(t, console, "Start PXE over", "the firmware booted the disk, not the network")
	}
	assert.Contains(t, lines, BootedLine(m.Kernel.Release(), "BOOT_IMAGE=/"+BootKernel+" "+KernelCmdline))
	assert.Contains(t, lines, ConfigDriveLine("vda2", userData))
	assert.Contains(t, lines, LineNetwork+report.Interface+" "+guestAddr.String())
	assert.NotContains(t, console, LineError)

	dhcpMu.Lock()
	defer dhcpMu.Unlock()
	assert.Empty(t, dhcpSeen, "DHCP requests on the network")
}
