package image

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/test/ciskip"
	"github.com/ironfleet/ironfleet/test/vm"
)

// The secure-wipe VM: one NVMe and one virtio disk, both filled with fixtures.DiskPattern on
// the host before the boot.
const (
	wipeVMUUID    = "8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d"
	wipeVMMAC     = "52:54:00:5e:c0:01"
	wipeNVMeBytes = 64 << 20
	wipeVDBytes   = 32 << 20
)

// requireQEMU returns qemu-system-x86_64's path. Without it the test is skipped, saying why,
// unless $CI is set: CI must run it, so there it fails.
func requireQEMU(t *testing.T) string {
	t.Helper()
	qemu, err := exec.LookPath("qemu-system-x86_64")
	ciskip.Unless(t, err == nil, "qemu-system-x86_64 is not installed (make vm-deps, or apt-get install --no-install-recommends qemu-system-x86); this test boots the probe image in it: %v", err)
	return qemu
}

// TestProbeImageSecureWipeOnQEMUNVMe boots the real probe image in wipe mode with the secure
// policy on a VM (test/vm's machine definition, QEMU TCG, the kernel and initramfs booted
// directly as TestProbeImageBootsAndReports does) with an NVMe and a virtio disk that hold a
// non-zero pattern, and checks what the registry receives and what is left on the disks once
// the VM is off:
//
//   - nvme0n1: erased by the controller (QEMU's NVMe accepts Format NVM with Secure Erase
//     Settings 1), read back as zeros, reported Succeeded with Method secure; its file on the
//     host is all zeros.
//   - vda: virtio-blk has no device-level erase: reported not wiped, Method none, with a
//     message naming vda; its file still holds the pattern byte for byte (nothing zero-filled
//     it).
//
// metalprobe exits 1 when a disk is not wiped, and /init runs it again after 10 s (and
// powers off only after a successful run), so the VM does not power itself off here: the test
// stops QEMU (SIGTERM, which flushes the disks) once the first report is in.
func TestProbeImageSecureWipeOnQEMUNVMe(t *testing.T) {
	qemu := requireQEMU(t)
	dir, _ := testImage(t)
	self, err := os.Executable()
	require.NoError(t, err)

	caPEM, cert := testCA(t, net.ParseIP(registryIP))
	const bootToken, probeToken = "boot-tok3n-wipe", "probe-tok3n-wipe"
	registry := &fakeRegistry{token: probeToken}
	registrySrv := startTLS(t, registry, cert)
	ign, err := ignition.Render(ignition.Config{
		RegistryURL: "https://" + registryIP, RegistryCA: string(caPEM), Token: probeToken,
		SystemUUID: wipeVMUUID, Mode: ignition.ModeWipe, WipePolicy: metalv1alpha1.WipeSecure,
	})
	require.NoError(t, err)
	boot := &fakeBootService{id: "b00t1d", token: bootToken, ignition: ign}
	bootSrv := httptest.NewServer(boot)
	t.Cleanup(bootSrv.Close)

	work := t.TempDir()
	require.NoError(t, fixtures.MakeDiskFiles(work, []string{"nvme.raw"}, wipeNVMeBytes))
	require.NoError(t, fixtures.MakeDiskFiles(work, []string{"virtio.raw"}, wipeVDBytes))
	nvmeFile, vdFile := filepath.Join(work, "dev", "nvme.raw"), filepath.Join(work, "dev", "virtio.raw")
	def := vm.Definition{
		Name: "probe-secure-wipe", Firmware: vm.BIOS, CPUs: 2, MemoryMiB: 512,
		SMBIOS: vm.SMBIOS{Manufacturer: vmManufacturer, Product: vmProduct, Serial: "IF-WIPE-0001", UUID: wipeVMUUID},
		Disks: []vm.Disk{
			{Bus: vm.NVMe, SizeBytes: wipeNVMeBytes, Serial: "NVME-WIPE-01"},
			{Bus: vm.Virtio, SizeBytes: wipeVDBytes, Serial: "VIRTIO-WIPE-02"},
		},
	}
	sockDir, err := os.MkdirTemp("", "qmp") // short: a socket path has at most 107 bytes
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	consoleLog := filepath.Join(work, "console.log")
	args, err := vm.Args(def, vm.Layout{QMPSocket: filepath.Join(sockDir, "qmp.sock"), ConsoleLog: consoleLog,
		DiskFiles: []string{nvmeFile, vdFile}}, vm.BootNetwork)
	require.NoError(t, err)
	args = append(args,
		"-no-reboot",
		"-kernel", filepath.Join(dir, KernelFile), "-initrd", filepath.Join(dir, InitramfsFile),
		"-append", fmt.Sprintf("console=ttyS0 quiet panic=-1 %s=http://%s/ignition/%s %s=01-%s",
			ignition.KernelArgIgnition, bootServiceIP, boot.id, ignition.KernelArgBootIf, strings.ReplaceAll(wipeVMMAC, ":", "-")),
		"-netdev", "user,id=net0,restrict=on,"+
			guestfwd(self, bootServiceIP, 80, bootSrv.Listener.Addr().String())+","+
			guestfwd(self, registryIP, 443, registrySrv.Listener.Addr().String()),
		"-device", "virtio-net-pci,netdev=net0,mac="+wipeVMMAC,
	)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, args...)
	var qemuErr strings.Builder
	cmd.Stderr = &qemuErr
	start := time.Now()
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	console := func() string {
		data, _ := os.ReadFile(consoleLog)
		return string(data)
	}
	reports := func() int {
		registry.mu.Lock()
		defer registry.mu.Unlock()
		return len(registry.reports)
	}

	// Wait for the first report (or QEMU's end), then turn the VM off.
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var qemuDone bool
wait:
	for reports() == 0 {
		select {
		case err = <-exited:
			qemuDone = true
			break wait
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			<-exited
			t.Fatalf("no report within 4 minutes; stages %v; console:\n%s", boot.stages(), tail(console(), 60))
		case <-tick.C:
		}
	}
	reported := time.Since(start)
	if !qemuDone {
		require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err = <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			err = <-exited
			t.Errorf("QEMU did not stop within 30 s of SIGTERM")
		}
		// SIGTERM is QEMU's orderly shutdown: it exits 0 (or reports the signal).
		if err != nil && !strings.Contains(qemuErr.String(), "terminating on signal") {
			t.Errorf("qemu: %v: %s", err, qemuErr.String())
		}
	} else {
		require.NoError(t, err, "qemu: %s", qemuErr.String())
	}
	t.Logf("QEMU start to first report %s (TCG, -smp %d)", reported.Round(10*time.Millisecond), def.CPUs)
	for _, line := range strings.Split(strings.ReplaceAll(console(), "\r", ""), "\n") {
		if strings.Contains(line, "metalprobe: ") && (strings.Contains(line, "wip") || strings.Contains(line, "FAILED")) {
			t.Logf("console: %s", strings.TrimSpace(line))
		}
	}

	registry.mu.Lock()
	reps, refused := registry.reports, registry.refused
	registry.mu.Unlock()
	require.Empty(t, refused, "the registry refused a report")
	require.NotEmpty(t, reps, "console:\n%s", tail(console(), 60))
	rep := reps[0]
	assert.Equal(t, wipeVMUUID, rep.SystemUUID)
	require.NotNil(t, rep.Wipe, "a wipe-mode report carries the wipe; warnings %v", rep.Warnings)
	assert.Equal(t, metalv1alpha1.WipeSecure, rep.Wipe.Policy)
	got := map[string]metalv1alpha1.DiskWipe{}
	for _, d := range rep.Wipe.Disks {
		got[d.Name] = d
		t.Logf("report: %s (%s) method %s succeeded %v: %s", d.Name, d.SerialNumber, d.Method, d.Succeeded, d.Message)
	}
	require.Len(t, got, 2, "two disks wiped: %+v", rep.Wipe.Disks)

	nvme, ok := got["nvme0n1"]
	require.True(t, ok, "the NVMe disk is nvme0n1: %+v", rep.Wipe.Disks)
	assert.Equal(t, "NVME-WIPE-01", nvme.SerialNumber)
	assert.Equal(t, "secure", nvme.Method)
	assert.True(t, nvme.Succeeded, nvme.Message)
	assert.Regexp(t, `^NVMe (Format NVM, Secure Erase Settings 1 \(user data erase\)|Sanitize)`, nvme.Message)
	assert.Contains(t, nvme.Message, fmt.Sprintf("read back all %d bytes: zeros", wipeNVMeBytes))

	vd, ok := got["vda"]
	require.True(t, ok, "the virtio disk is vda: %+v", rep.Wipe.Disks)
	assert.Equal(t, "VIRTIO-WIPE-02", vd.SerialNumber)
	assert.Equal(t, "none", vd.Method)
	assert.False(t, vd.Succeeded)
	assert.Contains(t, vd.Message, "vda: no device-level secure erase")
	assert.Contains(t, vd.Message, "not NVMe")
	assert.Contains(t, vd.Message, "BLKSECDISCARD")

	// On the host, with QEMU gone: the NVMe disk holds nothing, the virtio disk its pattern.
	assertAllZero(t, nvmeFile, wipeNVMeBytes)
	assertPattern(t, vdFile, wipeVDBytes)
}

// assertAllZero checks that a disk file has size bytes, all zero.
func assertAllZero(t *testing.T, path string, size int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, data, int(size))
	if bytes.Equal(data, make([]byte, size)) {
		return
	}
	for off, b := range data {
		if b != 0 {
			t.Errorf("%s: byte %d is %#x after the secure wipe, want 0", filepath.Base(path), off, b)
			return
		}
	}
}

// assertPattern checks that a disk file still holds fixtures.DiskPattern at every byte.
func assertPattern(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Len(t, data, int(size))
	for off, b := range data {
		if want := fixtures.DiskPattern(int64(off)); b != want {
			t.Errorf("%s: byte %d is %#x, want the pattern's %#x: the disk was written to", filepath.Base(path), off, b, want)
			return
		}
	}
}
