package vm_test

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/vm"
)

const (
	bmcUser = "admin"
	bmcPass = "s3cret-Passw0rd"
)

// vmBehindBMC is a VM attached to a loopback BMC, and a gofish client logged in to it.
type vmBehindBMC struct {
	network *vm.Network
	vm      *vm.VM
	bmc     *bmcsim.BMC
	binding *vm.Binding
	client  *gofish.APIClient
	odataID string
}

func startVMBehindBMC(t *testing.T, def vm.Definition, options ...func(*bmcsim.Options)) *vmBehindBMC {
	t.Helper()
	n := newNetwork(t)
	m := newVM(t, def, n)
	opts := bmcsim.Options{Username: bmcUser, Password: bmcPass, Systems: []bmcsim.SystemSpec{vm.SystemSpec(def)}}
	for _, o := range options {
		o(&opts)
	}
	b, err := bmcsim.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: bmcUser, Password: bmcPass, BasicAuth: true})
	require.NoError(t, err)
	t.Cleanup(c.Logout)
	systems, err := c.Service.Systems()
	require.NoError(t, err)
	require.Len(t, systems, 1)
	binding, err := vm.Attach(b, systems[0].ID, m)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, binding.Close())
		assert.Empty(t, binding.Errors(), "every power action reached the VM")
	})
	return &vmBehindBMC{network: n, vm: m, bmc: b, binding: binding, client: c, odataID: systems[0].ODataID}
}

// system reads the ComputerSystem afresh, as a client polling the BMC does.
func (h *vmBehindBMC) system(t *testing.T) *redfish.ComputerSystem {
	t.Helper()
	s, err := redfish.GetComputerSystem(h.client, h.odataID)
	require.NoError(t, err)
	return s
}

// reset asks for a reset through Redfish and waits until the binding has carried it out.
func (h *vmBehindBMC) reset(t *testing.T, rt redfish.ResetType) {
	t.Helper()
	before := h.binding.Applied()
	require.NoError(t, h.system(t).Reset(rt), "reset %s", rt)
	waitFor(t, 60*time.Second, "the VM carried out "+string(rt), func() bool { return h.binding.Applied() > before })
}

func (h *vmBehindBMC) qemuStatus() string {
	status, _ := h.vm.Status()
	return status
}

// banners counts the firmware starts the console shows. It counts in the raw log: a reset
// can cut a line, so the next banner may share it.
func banners(m *vm.VM) int {
	data, _ := os.ReadFile(m.ConsoleLog())
	return strings.Count(string(data), "SeaBIOS (version")
}

func TestRedfishResetsPowerTheVM(t *testing.T) {
	h := startVMBehindBMC(t, testDefinition("redfish", vm.BIOS))
	sys := h.system(t)
	require.Equal(t, redfish.OffPowerState, sys.PowerState)
	assert.False(t, h.vm.Running(), "an Off system has no QEMU")

	// A one-time PXE boot, as the operator's discovery does.
	require.NoError(t, sys.SetBoot(redfish.Boot{
		BootSourceOverrideTarget: redfish.PxeBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}))
	h.reset(t, redfish.OnResetType)
	assert.Equal(t, redfish.OnPowerState, h.system(t).PowerState)
	assert.Equal(t, "running", h.qemuStatus(), "QMP query-status")
	assert.Equal(t, vm.BootNetwork, h.vm.BootDevice())
	waitFor(t, 30*time.Second, "SeaBIOS and iPXE on the console", func() bool { return banners(h.vm) == 1 && consoleHas(h.vm, "iPXE") })

	// The override was used up, so a restart boots the disk: QEMU starts again with it.
	firstPID := h.vm.PID()
	h.reset(t, redfish.ForceRestartResetType)
	assert.Equal(t, vm.BootDisk, h.vm.BootDevice())
	assert.NotEqual(t, firstPID, h.vm.PID(), "another boot order needs another QEMU")
	waitFor(t, 30*time.Second, "the restarted firmware", func() bool { return banners(h.vm) == 2 })

	// Same boot device: reset in place.
	samePID := h.vm.PID()
	h.reset(t, redfish.ForceRestartResetType)
	assert.Equal(t, samePID, h.vm.PID(), "system_reset keeps QEMU")
	waitFor(t, 30*time.Second, "the firmware starts again after system_reset", func() bool { return banners(h.vm) == 3 })

	// Firmware ignores the ACPI power button: the system honestly stays On.
	h.reset(t, redfish.GracefulShutdownResetType)
	assert.Equal(t, redfish.OnPowerState, h.system(t).PowerState)
	assert.True(t, h.vm.Running())

	h.reset(t, redfish.ForceOffResetType)
	assert.False(t, h.vm.Running(), "ForceOff kills QEMU")
	assert.Equal(t, redfish.OffPowerState, h.system(t).PowerState)

	// A QEMU that exits by itself (here told to quit, as a guest powering off would end it)
	// turns the system Off.
	h.reset(t, redfish.OnResetType)
	require.True(t, h.vm.Running())
	_, _ = h.vm.QMP("quit", nil)
	waitFor(t, 30*time.Second, "Redfish shows Off after QEMU exited", func() bool {
		return h.system(t).PowerState == redfish.OffPowerState
	})
	assert.False(t, h.vm.Running())
	assert.Equal(t, "Off", h.bmc.PowerState(h.system(t).ID))
}

func TestRedfishReportsTheVMsHardware(t *testing.T) {
	def := testDefinition("inventory", vm.UEFI)
	def.CPUs, def.MemoryMiB = 2, 20<<10 // two DIMMs: 16 GiB + 4 GiB, as QEMU's SMBIOS lists them
	h := startVMBehindBMC(t, def)
	s := h.system(t)
	assert.Equal(t, def.SMBIOS.UUID, s.UUID)
	assert.Equal(t, def.SMBIOS.Serial, s.SerialNumber)
	assert.Equal(t, def.SMBIOS.Manufacturer, s.Manufacturer)
	assert.Equal(t, def.SMBIOS.Product, s.Model)
	assert.Equal(t, "OVMF", s.BIOSVersion, "a definition without a BIOS version: the firmware's name")
	assert.Equal(t, s.BIOSVersion, h.vm.BIOSVersion(), "the VM publishes the BIOS version its BMC reports")
	assert.Equal(t, 1, s.ProcessorSummary.Count, "one socket")
	assert.InDelta(t, 20.0, s.MemorySummary.TotalSystemMemoryGiB, 0.001)

	procs, err := s.Processors()
	require.NoError(t, err)
	require.Len(t, procs, 1)
	assert.Equal(t, 2, procs[0].TotalCores)
	dimms, err := s.Memory()
	require.NoError(t, err)
	total := 0
	for _, d := range dimms {
		total += d.CapacityMiB
	}
	assert.Equal(t, def.MemoryMiB, total)
	assert.Len(t, dimms, 2)

	storages, err := s.Storage()
	require.NoError(t, err)
	var drives []*redfish.Drive
	for _, st := range storages {
		d, err := st.Drives()
		require.NoError(t, err)
		drives = append(drives, d...)
	}
	require.Len(t, drives, len(def.Disks))
	bySerial := map[string]*redfish.Drive{}
	for _, d := range drives {
		bySerial[d.SerialNumber] = d
	}
	for _, want := range def.Disks {
		d := bySerial[want.Serial]
		require.NotNil(t, d, "drive %s", want.Serial)
		assert.Equal(t, want.SizeBytes, d.CapacityBytes)
		switch want.Bus {
		case vm.NVMe:
			assert.Equal(t, "NVMe", string(d.Protocol))
		case vm.SATA:
			assert.Equal(t, "SATA", string(d.Protocol))
		}
	}
	nics, err := s.EthernetInterfaces()
	require.NoError(t, err)
	require.Len(t, nics, 1)
	assert.Equal(t, def.NICs[0].MAC, nics[0].MACAddress)
}

func TestPXEBootReachesAServerOnTheBridge(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			n := newNetwork(t)
			def := testDefinition("pxe-"+strings.ToLower(string(fw)), fw)
			m := newVM(t, def, n)
			// A DHCP server's socket, opened inside the namespace, hears the firmware's iPXE.
			conn, err := n.ListenUDP(":67")
			require.NoError(t, err)
			defer conn.Close()

			start := time.Now()
			require.NoError(t, m.Start(vm.BootNetwork))
			mac, err := net.ParseMAC(def.NICs[0].MAC)
			require.NoError(t, err)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(60*time.Second)))
			buf := make([]byte, 1500)
			for {
				size, _, err := conn.ReadFrom(buf)
				require.NoError(t, err, "no DHCPDISCOVER from %s", mac)
				// BOOTREQUEST with the NIC's MAC as the client hardware address.
				if size >= 240 && buf[0] == 1 && net.HardwareAddr(buf[28:34]).String() == mac.String() {
					break
				}
			}
			t.Logf("%s: DHCPDISCOVER from %s on the bridge %s after start", fw, mac, time.Since(start))
		})
	}
}
