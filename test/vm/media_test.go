package vm_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/vm"
)

// makeISO writes a small ISO9660 image holding one file, named label, into dir. It has no El
// Torito catalogue, so firmware finds nothing to boot on it and goes on to the next device.
func makeISO(t *testing.T, dir, label string) string {
	t.Helper()
	ws := t.TempDir() // Finalize removes the workspace
	require.NoError(t, os.WriteFile(filepath.Join(ws, "README.TXT"), []byte("medium "+label+"\n"), 0o644))
	path := filepath.Join(dir, label+".iso")
	out, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer out.Close()
	fs, err := iso9660.Create(file.New(out, false), 0, 0, 2048, ws)
	require.NoError(t, err)
	require.NoError(t, fs.Finalize(iso9660.FinalizeOptions{VolumeIdentifier: strings.ToUpper(label)}))
	return path
}

// cdState is the CD drive as QMP query-block reports it: the medium's file ("" when empty),
// whether it is read-only, and whether the tray is open.
type cdState struct {
	File     string
	ReadOnly bool
	TrayOpen bool
}

func queryCD(t *testing.T, m *vm.VM) cdState {
	t.Helper()
	raw, err := m.QMP("query-block", nil)
	require.NoError(t, err)
	var blocks []struct {
		QDev     string `json:"qdev"`
		TrayOpen bool   `json:"tray_open"`
		Inserted *struct {
			File string `json:"file"`
			RO   bool   `json:"ro"`
			Drv  string `json:"drv"`
		} `json:"inserted"`
	}
	require.NoError(t, json.Unmarshal(raw, &blocks))
	for _, b := range blocks {
		if b.QDev != "cd0" {
			continue
		}
		s := cdState{TrayOpen: b.TrayOpen}
		if b.Inserted != nil {
			assert.Equal(t, "raw", b.Inserted.Drv)
			s.File, s.ReadOnly = b.Inserted.File, b.Inserted.RO
		}
		return s
	}
	t.Fatalf("no block device with qdev cd0 in %s", raw)
	return cdState{}
}

// cdDefinition is testDefinition with a CD drive and no NIC, so it needs no Network.
func cdDefinition(name string, fw vm.Firmware) vm.Definition {
	def := testDefinition(name, fw)
	def.NICs = nil
	def.CDROM = true
	return def
}

func TestCDROMMediaChangeOnARunningVM(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			dir := t.TempDir()
			isoA, isoB := makeISO(t, dir, "alpha"), makeISO(t, dir, "bravo")
			m := newVM(t, cdDefinition("cd-"+strings.ToLower(string(fw)), fw), nil)

			assert.ErrorContains(t, m.Start(vm.BootCD), "needs a medium", "a CD boot with an empty drive")
			assert.False(t, m.Running())

			require.NoError(t, m.InsertMedia(isoA), "a VM that is off takes the medium at its next start")
			assert.Equal(t, isoA, m.Media())
			require.NoError(t, m.Start(vm.BootCD))
			assert.Equal(t, cdState{File: isoA, ReadOnly: true}, queryCD(t, m))

			// The ISO boots nothing, so the firmware tries the CD first and goes on to the disks.
			switch fw {
			case vm.BIOS:
				waitFor(t, 60*time.Second, "SeaBIOS tries the CD, then the hard disk", func() bool {
					data, _ := os.ReadFile(m.ConsoleLog())
					cd := strings.Index(string(data), "Booting from DVD/CD")
					return cd >= 0 && strings.Contains(string(data)[cd:], "Booting from Hard Disk")
				})
			case vm.UEFI:
				waitFor(t, 120*time.Second, "OVMF tries the DVD-ROM first", func() bool {
					lines, _ := vm.ReadConsole(m.ConsoleLog())
					for _, l := range lines {
						if strings.Contains(l, "BdsDxe: failed to load Boot") {
							return strings.Contains(l, "DVD-ROM")
						}
					}
					return false
				})
			}

			require.NoError(t, m.InsertMedia(isoB), "a change while running")
			assert.Equal(t, cdState{File: isoB, ReadOnly: true}, queryCD(t, m))
			require.NoError(t, m.EjectMedia())
			assert.Equal(t, "", m.Media())
			assert.Equal(t, cdState{TrayOpen: true}, queryCD(t, m))
			require.NoError(t, m.EjectMedia(), "ejecting an empty drive does nothing")
			require.NoError(t, m.InsertMedia(isoA))
			assert.Equal(t, cdState{File: isoA, ReadOnly: true}, queryCD(t, m), "the tray closes on the new medium")

			// The medium stays in the drive across a power cycle to another boot device.
			require.NoError(t, m.Reset(vm.BootDisk))
			assert.Equal(t, vm.BootDisk, m.BootDevice())
			assert.Equal(t, cdState{File: isoA, ReadOnly: true}, queryCD(t, m))
			require.NoError(t, m.EjectMedia())
			require.NoError(t, m.Kill())
			require.NoError(t, m.Start(vm.BootDisk))
			assert.Equal(t, cdState{}, queryCD(t, m), "an empty drive after a restart")

			assert.ErrorContains(t, m.InsertMedia(filepath.Join(dir, "missing.iso")), "no such file")
		})
	}
}

func TestMediaControlsNeedACDROM(t *testing.T) {
	requireQEMU(t)
	def := testDefinition("nocd", vm.BIOS)
	def.NICs = nil
	m := newVM(t, def, nil)
	assert.ErrorIs(t, m.InsertMedia("/dev/null"), vm.ErrNoCDROM)
	assert.ErrorIs(t, m.EjectMedia(), vm.ErrNoCDROM)
	assert.ErrorContains(t, m.Start(vm.BootCD), "CD/DVD drive")
}

// probeISO is the probe's bootable ISO the image builder makes (make probe-image), in
// IRONFLEET_PROBE_DIR as the lab finds it, else in the repository's bin/probe.
func probeISO() string {
	dir := os.Getenv("IRONFLEET_PROBE_DIR")
	if dir == "" {
		dir = "../../bin/probe" // go test runs in the package's directory
	}
	return filepath.Join(dir, "probe.iso")
}

// requireProbeISO fails in CI (CI set) when the probe's ISO is missing, since make test builds
// it first (make probe-image), and skips elsewhere: a plain go test need not build images.
func requireProbeISO(t *testing.T) {
	t.Helper()
	_, err := os.Stat(probeISO())
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("the probe's ISO is missing in CI (%v): make test builds it with make probe-image", err)
	}
	t.Skipf("no probe ISO to boot (%v): make probe-image builds it", err)
}

// TestCDBootsTheProbeISO boots a boot's probe ISO (the template ISO with an embed: a
// discovery ignition with a static address, reporting to a registry on the VM's network) from
// its BMC's virtual media, on both firmwares, and the probe reports the machine the VM is:
// its SMBIOS identity, and the BIOS version of the definition, which QEMU publishes as type 0
// in place of the firmware's own (SeaBIOS and OVMF both take it). On UEFI a BIOS update at
// the BMC then reaches the host: the restart that boots the probe again (on the same device,
// which would be a reset in place) starts a new QEMU, keeping the disks, variable store and
// medium, and the next report reads the new version. The template ISO is built elsewhere
// (make probe-image, which make test runs first): without it the test fails in CI and skips
// outside it.
func TestCDBootsTheProbeISO(t *testing.T) {
	requireProbeISO(t)
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			def := cdDefinition("probe-cd-"+strings.ToLower(string(fw)), fw)
			def.MemoryMiB = 512
			def.NICs = testDefinition(def.Name, fw).NICs
			def.SMBIOS.BIOSVersion = "2.3.5"
			h := startVMBehindBMC(t, def)
			id := h.system(t).ID
			var mu sync.Mutex
			var boots []bmcsim.PowerAction
			h.bmc.OnPowerAction(func(a bmcsim.PowerAction) {
				if a.Boot != "" {
					mu.Lock()
					boots = append(boots, a)
					mu.Unlock()
				}
			})
			reg := startProbeRegistry(t, h.network)
			isoDir := t.TempDir()
			probeBootISO(t, isoDir, "boot.iso", def, h.network, reg)
			require.NoError(t, h.virtualCD(t).InsertMedia(serveISOs(t, isoDir)+"/boot.iso", true, true))
			h.bootOnceFromCD(t)
			if fw == vm.UEFI {
				reg.HoldNextReport() // the probe stays on until the restart below
			}
			start := time.Now()
			h.reset(t, redfish.OnResetType)
			require.Equal(t, vm.BootCD, h.vm.BootDevice())
			first := waitForReport(t, reg, start, 5*time.Minute)
			t.Logf("%s: power-on to the probe's report %s", fw, first.At.Sub(start).Round(100*time.Millisecond))
			require.True(t, consoleHas(h.vm, ignition.MediaConsoleLine), "/init booted the ISO's embed")
			inv := first.Inventory
			require.NotNil(t, inv.DMI)
			assert.Equal(t, strings.ToLower(def.SMBIOS.UUID), first.SystemUUID)
			assert.Equal(t, def.SMBIOS.Serial, inv.DMI.System.SerialNumber)
			assert.Equal(t, def.SMBIOS.Manufacturer, inv.DMI.System.Manufacturer)
			assert.Equal(t, def.SMBIOS.Product, inv.DMI.System.ProductName)
			assert.Equal(t, metalv1alpha1.DMIBIOS{
				Vendor:  map[vm.Firmware]string{vm.BIOS: "SeaBIOS", vm.UEFI: "EFI Development Kit II / OVMF"}[fw],
				Version: "2.3.5",
				Date:    map[vm.Firmware]string{vm.BIOS: "04/01/2014", vm.UEFI: "02/06/2015"}[fw],
			}, inv.DMI.BIOS, "the definition's version, with the firmware's own vendor and date")
			assert.Equal(t, "2.3.5", h.system(t).BIOSVersion, "the BMC reports the version the host reads")

			if fw == vm.UEFI {
				// A BIOS update that takes effect at the next boot, which is a restart of the
				// running host from the same CD.
				pid := h.vm.PID()
				h.bmc.SetBIOSVersion(id, "2.4.1")
				h.bootOnceFromCD(t)
				restart := time.Now()
				h.reset(t, redfish.ForceRestartResetType)
				reg.release()
				mu.Lock()
				last := boots[len(boots)-1]
				mu.Unlock()
				require.Equal(t, "2.4.1", last.BIOSVersion, "the BMC's restart carries the version the host boots: %+v", last)
				assert.NotEqual(t, pid, h.vm.PID(), "a new BIOS version needs a new QEMU")
				assert.Equal(t, "2.4.1", h.vm.BIOSVersion())
				assert.Equal(t, vm.BootCD, h.vm.BootDevice())
				second := waitForReport(t, reg, restart, 5*time.Minute)
				t.Logf("%s: restart with the new BIOS version to the probe's report %s", fw, second.At.Sub(restart).Round(100*time.Millisecond))
				require.NotNil(t, second.Inventory.DMI)
				assert.Equal(t, "2.4.1", second.Inventory.DMI.BIOS.Version, "the probe reads the new version in-band")
				assert.Equal(t, "2.4.1", h.system(t).BIOSVersion)
			}
			// The probe powers off once its report is delivered, and the BMC sees it.
			waitFor(t, time.Minute, "the system Off after the probe powered off", func() bool { return h.bmc.PowerState(id) == "Off" })
			t.Logf("%s: the whole boot %s", fw, time.Since(start).Round(100*time.Millisecond))
		})
	}
}
