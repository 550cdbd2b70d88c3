package image

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// The virtual machine the boot test probes: what metalprobe must report, exactly.
const (
	vmUUID         = "5d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
	vmSerial       = "IF-TEST-0001"
	vmManufacturer = "Ironfleet Test Systems"
	vmProduct      = "Probe VM"
	vmMAC          = "52:54:00:1f:2e:3d"
	vmCPUs         = 2
	vmMemoryMiB    = 512

	// Where the guest reaches the test's servers (QEMU user-network guestfwd addresses).
	bootServiceIP = "10.0.2.100"
	registryIP    = "10.0.2.101"
)

// vmDisk is one disk of the VM: its bus, serial and size.
type vmDisk struct {
	id, serial string
	sizeMiB    int64
	controller string   // as the report names it
	devices    []string // QEMU -device arguments; %s is the drive id
}

var vmDisks = []vmDisk{
	{id: "vd0", serial: "VIRTIO-SN-01", sizeMiB: 64, controller: "virtio", devices: []string{"virtio-blk-pci,drive=%s,serial=VIRTIO-SN-01"}},
	{id: "nv0", serial: "NVME-SN-02", sizeMiB: 96, controller: "NVMe", devices: []string{"nvme,drive=%s,serial=NVME-SN-02"}},
	{id: "sd0", serial: "SATA-SN-03", sizeMiB: 128, controller: "SATA", devices: []string{"ide-hd,bus=ahci0.0,drive=%s,serial=SATA-SN-03"}},
}

// TestProbeImageBootsAndReports boots the probe image in QEMU (TCG: no KVM here) the way the
// boot service boots a server, and checks that the report the registry receives describes
// the VM exactly, that /init reports its stages in order, and that the VM powers off.
// Nothing leaves the machine: the VM's only network is QEMU's user network with restrict=on,
// whose guestfwd addresses lead to this test's servers on loopback.
func TestProbeImageBootsAndReports(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Fatalf("qemu-system-x86_64 is not installed (apt-get install --no-install-recommends qemu-system-x86 ipxe-qemu); this test boots the probe image in it: %v", err)
	}
	dir, manifest := testImage(t)
	self, err := os.Executable()
	require.NoError(t, err)

	caPEM, cert := testCA(t, net.ParseIP(registryIP))
	const bootToken, probeToken = "boot-tok3n-never-printed", "probe-tok3n-never-printed"
	registry := &fakeRegistry{token: probeToken}
	registrySrv := startTLS(t, registry, cert)
	ign, err := ignition.Render(ignition.Config{
		RegistryURL: "https://" + registryIP, RegistryCA: string(caPEM), Token: probeToken,
		SystemUUID: vmUUID, Mode: ignition.ModeDiscovery,
	})
	require.NoError(t, err)
	boot := &fakeBootService{id: "b00t1d", token: bootToken, ignition: ign}
	bootSrv := httptest.NewServer(boot)
	t.Cleanup(bootSrv.Close)

	work := t.TempDir()
	args := []string{
		"-accel", "tcg", "-cpu", "max", "-smp", fmt.Sprint(vmCPUs), "-m", fmt.Sprint(vmMemoryMiB),
		"-nodefaults", "-display", "none", "-no-reboot",
		"-serial", "file:" + filepath.Join(work, "console.log"),
		"-smbios", fmt.Sprintf("type=1,manufacturer=%s,product=%s,serial=%s,uuid=%s", vmManufacturer, vmProduct, vmSerial, vmUUID),
		"-kernel", filepath.Join(dir, KernelFile), "-initrd", filepath.Join(dir, InitramfsFile),
		// quiet: the kernel logs its command line at notice level.
		"-append", fmt.Sprintf("console=ttyS0 quiet panic=-1 %s=http://%s/ignition/%s %s=01-%s",
			ignition.KernelArgIgnition, bootServiceIP, boot.id, ignition.KernelArgBootIf, strings.ReplaceAll(vmMAC, ":", "-")),
		"-netdev", "user,id=net0,restrict=on," +
			guestfwd(self, bootServiceIP, 80, bootSrv.Listener.Addr().String()) + "," +
			guestfwd(self, registryIP, 443, registrySrv.Listener.Addr().String()),
		"-device", "virtio-net-pci,netdev=net0,mac=" + vmMAC,
		"-device", "virtio-rng-pci",
		"-device", "ahci,id=ahci0",
	}
	for _, d := range vmDisks {
		img := filepath.Join(work, d.id+".img")
		require.NoError(t, os.WriteFile(img, nil, 0o644))
		require.NoError(t, os.Truncate(img, d.sizeMiB<<20))
		args = append(args, "-drive", fmt.Sprintf("if=none,id=%s,format=raw,file=%s", d.id, img))
		for _, dev := range d.devices {
			args = append(args, "-device", fmt.Sprintf(dev, d.id))
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	var qemuErr strings.Builder
	cmd.Stderr = &qemuErr
	start := time.Now()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	console := func() string {
		data, _ := os.ReadFile(filepath.Join(work, "console.log"))
		return string(data)
	}

	// QEMU exits when the guest powers off (or, -no-reboot with panic=-1, when the kernel
	// panics); the deadline is ctx's.
	select {
	case err = <-exited:
	case <-ctx.Done():
		err = <-exited
		t.Fatalf("the VM did not power off within 3 minutes; stages %v; console:\n%s", boot.stages(), tail(console(), 60))
	}
	require.NoError(t, err, "qemu: %s", qemuErr.String())
	poweredOff := time.Since(start)

	registry.mu.Lock()
	reports, refused, at := registry.reports, registry.refused, registry.at
	registry.mu.Unlock()
	require.Empty(t, refused, "the registry refused a report")
	require.Len(t, reports, 1, "one report; stages %v; console:\n%s", boot.stages(), tail(console(), 60))
	t.Logf("boot time: QEMU start to report %s, to power-off %s (TCG, -smp %d)", at[0].Sub(start).Round(10*time.Millisecond), poweredOff.Round(10*time.Millisecond), vmCPUs)
	t.Logf("image: %s", sizes(manifest))

	rep := reports[0]
	inv := rep.Inventory
	assert.Equal(t, vmUUID, rep.SystemUUID)
	require.NotNil(t, inv.DMI)
	assert.Equal(t, vmUUID, strings.ToLower(inv.DMI.System.UUID))
	assert.Equal(t, vmSerial, inv.DMI.System.SerialNumber)
	assert.Equal(t, vmManufacturer, inv.DMI.System.Manufacturer)
	assert.Equal(t, vmProduct, inv.DMI.System.ProductName)
	assert.EqualValues(t, vmCPUs, inv.CPU.Threads, "logical CPUs")
	require.NotNil(t, inv.Memory.Total)
	assert.Equal(t, resource.NewQuantity(vmMemoryMiB<<20, resource.BinarySI).String(), inv.Memory.Total.String(), "installed memory")

	type disk struct {
		size       int64
		controller string
	}
	disks := map[string]disk{}
	for _, d := range inv.Storage {
		require.NotNil(t, d.Size, d.Name)
		disks[d.SerialNumber] = disk{d.Size.Value(), d.Controller}
	}
	want := map[string]disk{}
	for _, d := range vmDisks {
		want[d.serial] = disk{d.sizeMiB << 20, d.controller}
	}
	assert.Equal(t, want, disks, "disk serials, sizes and controllers: %+v", inv.Storage)

	var macs []string
	for _, n := range inv.NetworkInterfaces {
		macs = append(macs, n.MACAddress)
	}
	assert.Equal(t, []string{vmMAC}, macs)
	for _, w := range rep.Warnings {
		t.Logf("report warning: %s", w)
	}

	var stages []ignition.Stage
	for _, p := range boot.stages() {
		stages = append(stages, p.Stage)
	}
	assert.Equal(t, []ignition.Stage{ignition.StageInitStarted, ignition.StageNetworkUp, ignition.StageIgnitionFetched,
		ignition.StageProbeRunning, ignition.StageReported}, stages)

	out := console()
	for _, secret := range []string{bootToken, probeToken} {
		assert.NotContains(t, out, secret, "a token reached the console")
	}
	assert.Contains(t, out, ignition.ConsolePrefix+string(ignition.StageReported))
}

// guestfwd forwards the guest's connections to ip:port to addr on this machine, through this
// test binary as a relay (see TestMain).
func guestfwd(self, ip string, port int, addr string) string {
	return fmt.Sprintf("guestfwd=tcp:%s:%d-cmd:%s %s%s", ip, port, self, guestfwdFlag, addr)
}

// tail is the last n lines of a console log, for failure messages.
func tail(log string, n int) string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(log, "\r", "\n")))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
