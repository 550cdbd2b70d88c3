package vm_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/vm"
)

// serveISOs serves the files of dir on loopback, as the boot service serves ISOs to BMCs.
func serveISOs(t *testing.T, dir string) string {
	t.Helper()
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv.URL
}

// virtualCD finds the system's virtual CD/DVD as a Redfish client does: under the system,
// else under its managers.
func (h *vmBehindBMC) virtualCD(t *testing.T) *redfish.VirtualMedia {
	t.Helper()
	sys := h.system(t)
	media, err := sys.VirtualMedia()
	require.NoError(t, err)
	if len(media) == 0 {
		managers, err := sys.ManagedBy()
		require.NoError(t, err)
		for _, m := range managers {
			more, err := m.VirtualMedia()
			require.NoError(t, err)
			media = append(media, more...)
		}
	}
	for _, m := range media {
		if slices.Contains(m.MediaTypes, redfish.CDMediaType) || slices.Contains(m.MediaTypes, redfish.DVDMediaType) {
			return m
		}
	}
	t.Fatalf("the system has no virtual CD/DVD among %d virtual media", len(media))
	return nil
}

// bootOnceFromCD sets a one-time Cd boot override, as the operator's virtual-media boot does.
func (h *vmBehindBMC) bootOnceFromCD(t *testing.T) {
	t.Helper()
	require.NoError(t, h.system(t).SetBoot(redfish.Boot{
		BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}))
}

func TestRedfishVirtualMediaIsTheVMsCD(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			isoDir := t.TempDir()
			makeISO(t, isoDir, "alpha")
			makeISO(t, isoDir, "bravo")
			base := serveISOs(t, isoDir)
			h := startVMBehindBMC(t, cdDefinition("vmedia-"+strings.ToLower(string(fw)), fw))
			id := h.system(t).ID
			sameFile := func(bmcPath string) func() bool {
				return func() bool {
					if bmcPath == "" {
						return false
					}
					st := queryCD(t, h.vm)
					a, errA := os.Stat(st.File)
					b, errB := os.Stat(bmcPath)
					return errA == nil && errB == nil && os.SameFile(a, b) && st.ReadOnly && !st.TrayOpen
				}
			}

			// Insert, boot once from the CD and power on, without waiting in between: the binding
			// applies them in order, so QEMU starts with the medium and boots it first.
			cd := h.virtualCD(t)
			require.NoError(t, cd.InsertMedia(base+"/alpha.iso", true, true))
			media := h.bmc.Media(id)
			require.True(t, media.Inserted, "the BMC has the medium once InsertMedia is answered")
			require.NotEmpty(t, media.Path)
			h.bootOnceFromCD(t)
			h.reset(t, redfish.OnResetType)
			assert.Equal(t, vm.BootCD, h.vm.BootDevice())
			assert.True(t, sameFile(media.Path)(), "QEMU started with the BMC's copy of alpha.iso: %+v", queryCD(t, h.vm))
			firstPID := h.vm.PID()
			switch fw {
			case vm.BIOS:
				waitFor(t, 60*time.Second, "SeaBIOS tries the CD first", func() bool { return consoleHas(h.vm, "Booting from DVD/CD") })
			case vm.UEFI:
				waitFor(t, 120*time.Second, "OVMF tries the DVD-ROM first", func() bool {
					lines, _ := vm.ReadConsole(h.vm.ConsoleLog())
					for _, l := range lines {
						if strings.Contains(l, "BdsDxe: failed to load Boot") {
							return strings.Contains(l, "DVD-ROM")
						}
					}
					return false
				})
			}

			// Media changes reach the running VM through QMP, without restarting it.
			require.NoError(t, h.virtualCD(t).EjectMedia())
			waitFor(t, 30*time.Second, "the VM's drive is empty", func() bool {
				return queryCD(t, h.vm) == cdState{TrayOpen: true}
			})
			require.NoError(t, h.virtualCD(t).InsertMedia(base+"/bravo.iso", true, true))
			media = h.bmc.Media(id)
			require.True(t, media.Inserted)
			waitFor(t, 30*time.Second, "bravo.iso in the VM's drive", sameFile(media.Path))
			assert.Equal(t, firstPID, h.vm.PID(), "a media change is no power cycle")

			// Ejected, a Cd boot falls through to the disk, as firmware does without a medium.
			require.NoError(t, h.virtualCD(t).EjectMedia())
			waitFor(t, 30*time.Second, "the VM's drive is empty", func() bool { return h.vm.Media() == "" })
			h.bootOnceFromCD(t)
			h.reset(t, redfish.ForceRestartResetType)
			assert.Equal(t, vm.BootDisk, h.vm.BootDevice())
			assert.Equal(t, cdState{}, queryCD(t, h.vm))

			// A VM that is off starts with the medium inserted meanwhile.
			h.reset(t, redfish.ForceOffResetType)
			require.NoError(t, h.virtualCD(t).InsertMedia(base+"/alpha.iso", true, true))
			media = h.bmc.Media(id)
			h.bootOnceFromCD(t)
			h.reset(t, redfish.OnResetType)
			assert.Equal(t, vm.BootCD, h.vm.BootDevice())
			assert.True(t, sameFile(media.Path)(), "%+v", queryCD(t, h.vm))
		})
	}
}

// TestAttachTakesTheMediaAlreadyInserted attaches a VM to a BMC whose system already has a
// medium: the VM's drive gets it before the first power action. It uses a profile whose
// virtual CD is the Manager's (HPE's slot "2"), without its quirks, which are the Redfish
// client's business.
func TestAttachTakesTheMediaAlreadyInserted(t *testing.T) {
	isoDir := t.TempDir()
	makeISO(t, isoDir, "alpha")
	base := serveISOs(t, isoDir)
	h := startVMBehindBMC(t, cdDefinition("preinserted", vm.BIOS), func(o *bmcsim.Options) {
		o.Profile, o.Quirks = bmcsim.ProfileHPE, &bmcsim.Quirks{}
	})
	id := h.system(t).ID
	cd := h.virtualCD(t)
	assert.Contains(t, cd.ODataID, "/Managers/", "the Manager's slot")
	require.NoError(t, cd.InsertMedia(base+"/alpha.iso", true, true))
	waitFor(t, 30*time.Second, "the VM has the medium", func() bool { return h.vm.Media() != "" })
	require.NoError(t, h.binding.Close())

	// A second binding of the same VM starts from the BMC's media: eject it from the VM first.
	require.NoError(t, h.vm.EjectMedia())
	b, err := vm.Attach(h.bmc, id, h.vm)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	waitFor(t, 30*time.Second, "the media found at Attach", func() bool { return b.MediaApplied() >= 1 })
	want, err := filepath.Abs(h.bmc.Media(id).Path)
	require.NoError(t, err)
	assert.Equal(t, want, h.vm.Media())
	assert.Empty(t, b.Errors())

	// It boots from it.
	require.NoError(t, h.system(t).SetBoot(redfish.Boot{
		BootSourceOverrideTarget: redfish.CdBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
	}))
	before := b.Applied()
	require.NoError(t, h.system(t).Reset(redfish.OnResetType))
	waitFor(t, 60*time.Second, "the VM carried out On", func() bool { return b.Applied() > before })
	assert.Equal(t, vm.BootCD, h.vm.BootDevice())
	assert.Equal(t, cdState{File: want, ReadOnly: true}, queryCD(t, h.vm))
	assert.Empty(t, b.Errors())
}

// TestMediaTheBMCRemovedMeanwhile covers changes that overtake the binding's queue: the BMC
// removes its copy of a medium when it is ejected or replaced, possibly before the binding
// has got to an earlier power action or insert.
func TestMediaTheBMCRemovedMeanwhile(t *testing.T) {
	isoDir := t.TempDir()
	makeISO(t, isoDir, "alpha")
	base := serveISOs(t, isoDir)
	h := startVMBehindBMC(t, cdDefinition("vanished", vm.BIOS))
	id := h.system(t).ID

	// Insert and eject right behind a power-on: however far the binding has got, the VM ends
	// up running with an empty drive, and nothing failed.
	before := h.binding.MediaApplied()
	require.NoError(t, h.system(t).Reset(redfish.OnResetType))
	cd := h.virtualCD(t)
	require.NoError(t, cd.InsertMedia(base+"/alpha.iso", true, true))
	require.NoError(t, cd.EjectMedia())
	waitFor(t, 60*time.Second, "the power-on, the insert and the eject carried out", func() bool {
		return h.binding.Applied() >= 1 && h.binding.MediaApplied() >= before+2
	})
	require.True(t, h.vm.Running())
	assert.Equal(t, "", h.vm.Media())
	assert.Equal(t, "", queryCD(t, h.vm).File, "no medium in QEMU's drive")
	assert.Empty(t, h.binding.Errors())

	// A medium whose file is gone when the VM powers on (the BMC removed it for an eject still
	// in the queue) is not booted: the Cd override falls through to the disk.
	h.reset(t, redfish.ForceOffResetType)
	require.NoError(t, h.virtualCD(t).InsertMedia(base+"/alpha.iso", true, true))
	waitFor(t, 30*time.Second, "the VM has the medium", func() bool { return h.vm.Media() != "" })
	require.NoError(t, os.Remove(h.bmc.Media(id).Path))
	h.bootOnceFromCD(t)
	h.reset(t, redfish.OnResetType)
	assert.Equal(t, vm.BootDisk, h.vm.BootDevice())
	assert.Equal(t, "", h.vm.Media())
	assert.Empty(t, h.binding.Errors())
}
