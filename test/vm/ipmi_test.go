package vm_test

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ipmisim"
	"github.com/ironfleet/ironfleet/test/vm"
)

// vmBehindIPMI is a VM with an in-band KCS BMC, bound to that ipmi_sim.
type vmBehindIPMI struct {
	vm      *vm.VM
	bmc     *ipmisim.BMC
	binding *vm.Binding
}

func startVMBehindIPMI(t *testing.T, def vm.Definition) *vmBehindIPMI {
	t.Helper()
	ipmisim.RequireTools(t)
	n := newNetwork(t)
	guid, err := ipmisim.SMBIOSGUID(def.SMBIOS.UUID)
	require.NoError(t, err)
	require.NotEmpty(t, guid)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	b, err := ipmisim.Start(ctx, ipmisim.Options{
		Dir: t.TempDir(), Username: bmcUser, Password: bmcPass, GUID: def.SMBIOS.UUID, VMChardev: true,
		FRU: ipmisim.FRU{Manufacturer: def.SMBIOS.Manufacturer, Product: def.SMBIOS.Product, Serial: def.SMBIOS.Serial},
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		if t.Failed() {
			logTail(t, "ipmi_sim", b.LogFile())
		}
	})
	m := newVMWith(t, def, vm.Options{Network: n, IPMIChardev: b.VMAddr()})
	binding, err := vm.AttachIPMI(b, m)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, binding.Close())
		assert.Empty(t, binding.Errors(), "every power action reached the VM")
	})
	return &vmBehindIPMI{vm: m, bmc: b, binding: binding}
}

// ipmitool runs one command through ipmitool (lanplus, suite 3) against the BMC.
func (h *vmBehindIPMI) ipmitool(t *testing.T, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(h.bmc.Addr(), ":")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	all := append([]string{"-I", "lanplus", "-H", host, "-p", port, "-U", bmcUser, "-P", bmcPass, "-C", "3"}, args...)
	out, err := exec.CommandContext(ctx, "ipmitool", all...).CombinedOutput()
	require.NoError(t, err, "ipmitool %v: %s", args, out)
	return string(out)
}

// power runs `ipmitool chassis power <action>` and waits until the binding carried out
// the actions it caused.
func (h *vmBehindIPMI) power(t *testing.T, action string, actions int) {
	t.Helper()
	before := h.binding.Applied()
	h.ipmitool(t, "chassis", "power", action)
	waitFor(t, 60*time.Second, "the VM carried out power "+action, func() bool { return h.binding.Applied() >= before+actions })
}

// kcsConnected reports whether QEMU's ipmi-bmc-extern chardev is connected to ipmi_sim.
func kcsConnected(m *vm.VM) bool {
	raw, err := m.QMP("query-chardev", nil)
	if err != nil {
		return false
	}
	var devs []struct{ Label, Filename string }
	if json.Unmarshal(raw, &devs) != nil {
		return false
	}
	for _, d := range devs {
		if d.Label == "ipmi0" {
			return strings.HasPrefix(d.Filename, "tcp:")
		}
	}
	return false
}

func TestIPMIPowersTheVM(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			h := startVMBehindIPMI(t, testDefinition("ipmi-"+strings.ToLower(string(fw)), fw))
			assert.Contains(t, h.ipmitool(t, "chassis", "power", "status"), "Chassis Power is off")
			assert.False(t, h.vm.Running(), "an Off host has no QEMU")

			// A one-time PXE boot: QEMU starts for the network.
			h.ipmitool(t, "chassis", "bootdev", "pxe")
			h.power(t, "on", 1)
			require.True(t, h.vm.Running())
			assert.Equal(t, vm.BootNetwork, h.vm.BootDevice())
			assert.Contains(t, h.ipmitool(t, "chassis", "power", "status"), "Chassis Power is on")
			waitFor(t, 30*time.Second, "QEMU's KCS BMC connected to ipmi_sim", func() bool { return kcsConnected(h.vm) })

			// The device was next boot only: a reset boots the disk, in a new QEMU.
			pid := h.vm.PID()
			h.power(t, "reset", 1)
			assert.Equal(t, vm.BootDisk, h.vm.BootDevice())
			assert.NotEqual(t, pid, h.vm.PID(), "another boot order needs another QEMU")

			// Same device again: reset in place.
			pid = h.vm.PID()
			h.power(t, "reset", 1)
			assert.Equal(t, pid, h.vm.PID(), "system_reset keeps QEMU")

			// Firmware ignores the ACPI button: the host honestly stays on.
			h.power(t, "soft", 1)
			assert.True(t, h.vm.Running())
			assert.Equal(t, "On", h.bmc.PowerState())

			h.power(t, "off", 1)
			assert.False(t, h.vm.Running(), "power off kills QEMU")
			assert.Contains(t, h.ipmitool(t, "chassis", "power", "status"), "Chassis Power is off")

			// A QEMU that exits by itself turns the BMC off.
			h.power(t, "on", 1)
			require.True(t, h.vm.Running())
			assert.Equal(t, vm.BootDisk, h.vm.BootDevice())
			_, _ = h.vm.QMP("quit", nil)
			waitFor(t, 30*time.Second, "ipmitool shows off after QEMU exited", func() bool { return h.bmc.PowerState() == "Off" })
			assert.Contains(t, h.ipmitool(t, "chassis", "power", "status"), "Chassis Power is off")
		})
	}
}

func TestIPMIPowerCycleRestartsTheVMForTheBootDevice(t *testing.T) {
	h := startVMBehindIPMI(t, testDefinition("ipmi-cycle", vm.BIOS))
	h.power(t, "on", 1)
	require.Equal(t, vm.BootDisk, h.vm.BootDevice())
	pid := h.vm.PID()

	// bootdev pxe + cycle: off (QEMU killed), then on for the network.
	h.ipmitool(t, "chassis", "bootdev", "pxe")
	h.power(t, "cycle", 2)
	require.True(t, h.vm.Running())
	assert.NotEqual(t, pid, h.vm.PID())
	assert.Equal(t, vm.BootNetwork, h.vm.BootDevice())
	waitFor(t, 30*time.Second, "iPXE on the console", func() bool { return consoleHas(h.vm, "iPXE") })

	// The BMC going away does not touch the host; QEMU's chardev reconnects.
	require.NoError(t, h.bmc.Restart())
	assert.True(t, h.vm.Running())
	waitFor(t, 30*time.Second, "QEMU's KCS BMC reconnected", func() bool { return kcsConnected(h.vm) })
	assert.Contains(t, h.ipmitool(t, "chassis", "power", "status"), "Chassis Power is on")

	// Get System GUID names the VM's SMBIOS UUID: ipmitool decodes a GUID with a valid
	// version (this one is version 4) from the SMBIOS byte order back to the UUID.
	uuid := h.vm.Definition().SMBIOS.UUID
	out := h.ipmitool(t, "mc", "guid")
	assert.Contains(t, strings.ReplaceAll(strings.ToLower(out), "-", ""), strings.ReplaceAll(uuid, "-", ""), out)
}
