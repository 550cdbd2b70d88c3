package vm_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/vm"
)

// requireQEMU fails (never skips) when the machine cannot run these tests: real VMs are the
// point of this package, and a silent skip would hide that nothing was tested.
func requireQEMU(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Fatalf("qemu-system-x86_64 is missing: apt-get install --no-install-recommends qemu-system-x86 ipxe-qemu ovmf qemu-utils (%v)", err)
	}
	for _, f := range []string{"/usr/lib/ipxe/qemu/efi-virtio.rom", vm.DefaultOVMFCode, vm.DefaultOVMFVars} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%s is missing: apt-get install --no-install-recommends ipxe-qemu ovmf (%v)", f, err)
		}
	}
}

// requireRoot fails when not root: namespaces, bridges and /dev/net/tun need it (CI is root).
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("this test needs root for network namespaces and taps (euid %d)", os.Geteuid())
	}
}

// newNetwork creates a Network removed when the test ends.
func newNetwork(t *testing.T) *vm.Network {
	t.Helper()
	requireRoot(t)
	n, err := vm.NewNetwork(vm.NetworkOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	return n
}

// testDefinition is a small machine with no bootable media: the firmware tries the network
// and the disks and then waits, which is all the power tests need.
func testDefinition(name string, fw vm.Firmware) vm.Definition {
	return vm.Definition{
		Name:     name,
		Firmware: fw,
		SMBIOS: vm.SMBIOS{Manufacturer: "Ironfleet", Product: "QEMU Test Box", Serial: "IFT-" + name,
			UUID: "6a1b2c3d-0000-4000-8000-00000000000" + fmt.Sprint(len(name)%10)},
		CPUs:      1,
		MemoryMiB: 128,
		Disks: []vm.Disk{
			{Bus: vm.Virtio, SizeBytes: 64 << 20, Serial: "VD-" + name},
			{Bus: vm.NVMe, SizeBytes: 32 << 20, Serial: "NV-" + name},
			{Bus: vm.SATA, SizeBytes: 16 << 20, Serial: "SA-" + name},
		},
		NICs: []vm.NIC{{Model: vm.VirtioNet, MAC: "52:54:00:aa:00:01"}},
	}
}

// newVM makes a VM in a test directory, closed when the test ends.
func newVM(t *testing.T, def vm.Definition, n *vm.Network) *vm.VM {
	t.Helper()
	return newVMWith(t, def, vm.Options{Network: n})
}

// newVMWith is newVM with options of its own (Dir is the test's).
func newVMWith(t *testing.T, def vm.Definition, o vm.Options) *vm.VM {
	t.Helper()
	requireQEMU(t)
	o.Dir = t.TempDir()
	m, err := vm.New(def, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, m.Close())
		if t.Failed() {
			logTail(t, "console", m.ConsoleLog())
			logTail(t, "qemu", m.QEMULog())
		}
	})
	return m
}

// logTail shows the end of a log when a test fails, which is where a boot problem shows.
func logTail(t *testing.T, what, path string) {
	t.Helper()
	data, _ := os.ReadFile(path)
	lines := vm.ConsoleLines(data)
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	t.Logf("%s log %s ends:\n%s", what, path, strings.Join(lines, "\n"))
}

// waitFor polls cond until it holds or the deadline passes: the only way these tests wait.
func waitFor(t *testing.T, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, within, 20*time.Millisecond, msg)
}

// consoleHas reports whether the console log has a line containing want.
func consoleHas(m *vm.VM, want string) bool {
	lines, _ := vm.ReadConsole(m.ConsoleLog())
	for _, l := range lines {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}
