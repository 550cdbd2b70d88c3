package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
	"github.com/ironfleet/ironfleet/test/ciskip"
)

// TestMain makes this test binary the init of TestStaticNetworkInVM's VM when it runs as
// PID 1 there; anywhere else it runs the tests.
func TestMain(m *testing.M) {
	if os.Getpid() == 1 {
		guestInit(m)
	}
	os.Exit(m.Run())
}

// guestExitPrefix starts the line the guest prints with m.Run's exit status.
const guestExitPrefix = "ironfleet-init-test: exit status "

// guestInit mounts what /init mounts, loads the modules in /modules/load-order (802.1Q and
// veth, which the host's kernel may lack), runs the tests named on the kernel command line
// (after "--", which the kernel passes to init), prints their exit status and powers off.
func guestInit(m *testing.M) {
	if err := earlyboot.MountAll(filesystems); err != nil {
		fmt.Println("guest:", err)
	}
	order, err := os.ReadFile("/modules/load-order")
	if err != nil {
		fmt.Println("guest:", err)
	}
	for _, name := range strings.Fields(string(order)) {
		if err := earlyboot.LoadModule("/modules/" + name); err != nil {
			fmt.Printf("guest: module %s: %v\n", name, err)
		}
	}
	code := m.Run()
	fmt.Printf("\n%s%d\n", guestExitPrefix, code)
	if err := powerOff(); err != nil {
		fmt.Println("guest: powering off:", err)
	}
	waitForever()
}

// vmModules are what the VM loads, in load order (each after what it depends on): veth for
// the test's links, 8021q (with garp, mrp, stp, llc) for the VLAN. Paths are under the
// kernel package's lib/modules/<release>/kernel/.
var vmModules = []string{"net/llc/llc.ko", "net/802/stp.ko", "net/802/garp.ko", "net/802/mrp.ko", "net/8021q/8021q.ko", "drivers/net/veth.ko"}

// cachedKernelDeb is the probe's kernel package as the image builder cached it (make
// probe-image fetches it); the test never downloads it.
func cachedKernelDeb(t *testing.T) (deb, release string) {
	t.Helper()
	pinFile, err := os.ReadFile("../image/kernel.version")
	require.NoError(t, err)
	var pkg, version string
	for _, line := range strings.Split(string(pinFile), "\n") {
		if f := strings.Fields(line); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			pkg, version = f[0], f[1]
			break
		}
	}
	require.NotEmpty(t, pkg, "no pin in metalprobe/image/kernel.version")
	cache, err := os.UserCacheDir()
	require.NoError(t, err)
	deb = filepath.Join(cache, "ironfleet", "kernel", pkg+"_"+strings.ReplaceAll(version, ":", "%3a")+"_amd64.deb")
	_, err = os.Stat(deb)
	ciskip.Unless(t, err == nil, "the probe's kernel package is not cached (make probe-image fetches it): %v", err)
	return deb, strings.TrimPrefix(pkg, "linux-image-")
}

// extractKernel reads the kernel and vmModules out of the package, without unpacking the rest.
func extractKernel(t *testing.T, deb, release string) (vmlinuz []byte, modules map[string][]byte) {
	t.Helper()
	cmd := exec.Command("dpkg-deb", "--fsys-tarfile", deb)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	wanted := map[string]string{}
	for _, m := range vmModules {
		wanted["./lib/modules/"+release+"/kernel/"+m] = path.Base(m)
	}
	modules = map[string][]byte{}
	tr := tar.NewReader(bufio.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		name, isModule := wanted[h.Name]
		if h.Name != "./boot/vmlinuz-"+release && !isModule {
			continue
		}
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		if isModule {
			modules[name] = data
		} else {
			vmlinuz = data
		}
	}
	require.NoError(t, cmd.Wait(), "dpkg-deb: %s", stderr.String())
	require.NotEmpty(t, vmlinuz, "no vmlinuz-%s in %s", release, deb)
	require.Len(t, modules, len(vmModules), "modules found in %s", deb)
	return vmlinuz, modules
}

// TestStaticNetworkInVM runs TestStaticNetworkInNetns in a VM with the probe's own kernel
// (Debian's, 8021q and veth as modules), so that the VLAN case is tested wherever the host's
// kernel has no 802.1Q (CI's VMs): this test binary, built static, is the VM's init. The VM
// has no NIC at all: the test's veth pairs live inside it.
func TestStaticNetworkInVM(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	ciskip.Unless(t, err == nil, "qemu-system-x86_64 is not installed (make vm-deps): %v", err)
	deb, release := cachedKernelDeb(t)
	vmlinuz, modules := extractKernel(t, deb, release)

	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(work, "init.test")
	build := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building the test binary static: %s", out)
	initBin, err := os.ReadFile(bin)
	require.NoError(t, err)

	var initrd bytes.Buffer
	zw := gzip.NewWriter(&initrd)
	cw := cpio.Newc.Writer(zw)
	records := []cpio.Record{
		cpio.Directory("dev", 0o755), cpio.CharDev("dev/console", 0o600, 5, 1),
		cpio.StaticFile("init", string(initBin), 0o755), cpio.Directory("modules", 0o755),
	}
	var order []string
	for _, m := range vmModules {
		name := path.Base(m)
		order = append(order, name)
		records = append(records, cpio.StaticFile("modules/"+name, string(modules[name]), 0o644))
	}
	records = append(records, cpio.StaticFile("modules/load-order", strings.Join(order, "\n")+"\n", 0o644))
	for _, r := range records {
		require.NoError(t, cw.WriteRecord(r))
	}
	require.NoError(t, cpio.WriteTrailer(cw))
	require.NoError(t, zw.Close())
	kernelPath, initrdPath, consolePath := filepath.Join(work, "vmlinuz"), filepath.Join(work, "initrd.gz"), filepath.Join(work, "console.log")
	require.NoError(t, os.WriteFile(kernelPath, vmlinuz, 0o644))
	require.NoError(t, os.WriteFile(initrdPath, initrd.Bytes(), 0o644))

	// TCG, as metalprobe/image's boot tests: KVM, where /dev/kvm exists at all, is nested
	// here and refuses -cpu max's MSRs.
	cmd := exec.CommandContext(ctx, qemu,
		"-accel", "tcg", "-cpu", "max", "-smp", "1", "-m", "512",
		"-nodefaults", "-display", "none", "-no-reboot", "-serial", "file:"+consolePath,
		"-kernel", kernelPath, "-initrd", initrdPath,
		"-append", "console=ttyS0 quiet panic=-1 -- -test.run=^TestStaticNetworkInNetns$ -test.v -test.count=1 -test.timeout=3m")
	var qemuErr bytes.Buffer
	cmd.Stderr = &qemuErr
	start := time.Now()
	err = cmd.Run()
	console, _ := os.ReadFile(consolePath)
	require.NoError(t, err, "qemu (the VM must power off within 5 minutes): %s\nconsole:\n%s", qemuErr.String(), console)
	t.Logf("the VM (TCG) ran the netns test in %s", time.Since(start).Round(10*time.Millisecond))
	out = console
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "--- ") || strings.Contains(line, "guest:") {
			t.Logf("VM: %s", strings.TrimSpace(line))
		}
	}
	for _, want := range []string{
		"--- PASS: TestStaticNetworkInNetns/untagged",
		"--- PASS: TestStaticNetworkInNetns/VLAN_42_on_the_NIC_with_the_MAC", // ran, not skipped
		"--- PASS: TestStaticNetworkInNetns/IPv6",
		guestExitPrefix + "0",
	} {
		assert.True(t, strings.Contains(string(out), want), "the VM's console has no %q", want)
	}
	if t.Failed() {
		t.Logf("console:\n%s", out)
	}
}
