package cli

import (
	"bytes"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// storage-1u has five fixed disks and a removable USB stick, sdf: all six are wiped.
var storageDisks = []string{"sda", "sdb", "sdc", "sdd", "sde", "sdf"}

const (
	storageUUID = "00000000-0000-0000-0000-ac1f6b2d4e80"
	diskSize    = 2*wipe.ChunkBytes + 3*wipe.MetadataBytes/2 + 123 // over 2 MiB, not a multiple of the chunk
)

// wipeRoot copies storage-1u into a temporary directory and gives every disk, sdf included, a
// patterned device file.
func wipeRoot(t *testing.T) string {
	t.Helper()
	root, err := fixtures.CopyRoot("storage-1u", t.TempDir())
	require.NoError(t, err)
	require.NoError(t, fixtures.MakeDiskFiles(root, storageDisks, diskSize))
	return root
}

// checkDisk reads a device file back: zero inside the ranges, the fixture pattern elsewhere.
func checkDisk(t *testing.T, root, name string, zeroed ...[2]int64) {
	t.Helper()
	data, err := os.ReadFile(wipe.DevicePath(root, name))
	require.NoError(t, err)
	require.Len(t, data, diskSize)
	want := make([]byte, diskSize)
	for off := range want {
		want[off] = fixtures.DiskPattern(int64(off))
	}
	for _, r := range zeroed {
		clear(want[r[0]:r[1]])
	}
	if !bytes.Equal(data, want) {
		for off := range data {
			if data[off] != want[off] {
				t.Errorf("%s: byte %d is %#x, want %#x", name, off, data[off], want[off])
				return
			}
		}
	}
}

func requireWipe(t *testing.T, rep report.Report, policy metalv1alpha1.WipePolicy) []metalv1alpha1.DiskWipe {
	t.Helper()
	require.NotNil(t, rep.Wipe, "a wipe run reports its wipe")
	assert.Equal(t, policy, rep.Wipe.Policy)
	assert.Nil(t, rep.Wipe.ReportedAt, "the registry stamps it")
	require.Len(t, rep.Wipe.Disks, len(storageDisks), "one entry per disk, the removable one too")
	exp, err := fixtures.LoadExpected("storage-1u")
	require.NoError(t, err)
	for i, d := range rep.Wipe.Disks {
		assert.Equal(t, storageDisks[i], d.Name)
		assert.Equal(t, exp.Disks[i].Name, d.Name)
		assert.Equal(t, exp.Disks[i].SerialNumber, d.SerialNumber)
	}
	return rep.Wipe.Disks
}

func TestWipeDryRunWithFlags(t *testing.T) {
	root := wipeRoot(t)
	r := runProbe(t, "--root", root, "--dry-run", "--mode", "wipe", "--wipe-policy", "zero")
	require.Equal(t, exitOK, r.code, r.stderr)
	rep := decodeStrict(t, []byte(r.stdout))
	assert.Len(t, rep.Inventory.Storage, 6, "the inventory is collected as in discovery")
	for _, d := range requireWipe(t, rep, metalv1alpha1.WipeZero) {
		assert.Equal(t, wipe.MethodZero, d.Method)
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		checkDisk(t, root, d.Name, [2]int64{0, diskSize})
		assert.Contains(t, r.stderr, d.Name+" wiped (zero)")
	}
}

func TestWipeDryRunWithIgnitionDefaultsToErase(t *testing.T) {
	root := wipeRoot(t)
	ign := writeFile(t, "ignition.json", `{"mode": "wipe", "systemUUID": "`+storageUUID+`"}`)
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	rep := decodeStrict(t, []byte(r.stdout))
	for _, d := range requireWipe(t, rep, metalv1alpha1.WipeErase) {
		// No device erase under --root: the whole disk file is zeroed and read back.
		assert.Equal(t, wipe.MethodZero, d.Method)
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		assert.Contains(t, d.Message, "; read back all ")
		checkDisk(t, root, d.Name, [2]int64{0, diskSize})
		assert.Contains(t, r.stderr, d.Name+" wiped (zero)")
	}
	assert.Contains(t, r.stderr, "wiping disks (policy erase)")

	// metadata, asked for: the ends only.
	require.NoError(t, fixtures.MakeDiskFiles(root, storageDisks, diskSize))
	r = runProbe(t, "--root", root, "--dry-run", "--ignition", ign, "--wipe-policy", "metadata")
	require.Equal(t, exitOK, r.code, r.stderr)
	for _, d := range requireWipe(t, decodeStrict(t, []byte(r.stdout)), metalv1alpha1.WipeMetadata) {
		assert.Equal(t, wipe.MethodMetadata, d.Method)
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		checkDisk(t, root, d.Name, [2]int64{0, wipe.MetadataBytes}, [2]int64{diskSize - wipe.MetadataBytes, diskSize})
	}

	// The flag overrides the ignition's policy. Secure is the device's own erase: a disk
	// without one (a fixture's file) fails, named, and is not zero-filled instead.
	require.NoError(t, fixtures.MakeDiskFiles(root, storageDisks, diskSize))
	r = runProbe(t, "--root", root, "--dry-run", "--ignition", ign, "--wipe-policy", "secure")
	require.Equal(t, exitFailure, r.code, r.stderr)
	for _, d := range requireWipe(t, decodeStrict(t, []byte(r.stdout)), metalv1alpha1.WipeSecure) {
		assert.Equal(t, wipe.MethodNone, d.Method, "no device erase under --root")
		assert.False(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		assert.Contains(t, d.Message, d.Name+": no device-level secure erase")
		checkDisk(t, root, d.Name)
	}
}

// TestWipeLeavesWhatTheIgnitionExcludes: spec.wipeExclusions reach the probe in its ignition;
// the device they name (here the removable one, by serial) is not touched and not listed.
func TestWipeLeavesWhatTheIgnitionExcludes(t *testing.T) {
	root := wipeRoot(t)
	ign := writeFile(t, "ignition.json", `{"mode": "wipe", "wipePolicy": "zero", "systemUUID": "`+storageUUID+`",
		"wipeExclusions": [{"serialNumber": "4C530001230512113245", "reason": "holds the hypervisor"}]}`)
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	rep := decodeStrict(t, []byte(r.stdout))
	require.NotNil(t, rep.Wipe)
	require.Len(t, rep.Wipe.Disks, 5)
	for _, d := range rep.Wipe.Disks {
		assert.NotEqual(t, "sdf", d.Name)
		checkDisk(t, root, d.Name, [2]int64{0, diskSize})
	}
	checkDisk(t, root, "sdf")
	assert.Contains(t, r.stderr, "not wiping sdf: excluded: holds the hypervisor")
}

func TestWipeMissingDiskExitsOneAndStillReports(t *testing.T) {
	root := wipeRoot(t)
	require.NoError(t, os.Remove(wipe.DevicePath(root, "sdc")))
	r := runProbe(t, "--root", root, "--dry-run", "--mode", "wipe", "--wipe-policy", "zero")
	assert.Equal(t, exitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "1 of 6 disks were not wiped")
	assert.Contains(t, r.stderr, "sdc FAILED (none): not wiped: opening device")
	rep := decodeStrict(t, []byte(r.stdout))
	for _, d := range requireWipe(t, rep, metalv1alpha1.WipeZero) {
		if d.Name == "sdc" {
			assert.False(t, d.Succeeded)
			assert.Equal(t, wipe.MethodNone, d.Method)
			assert.Contains(t, d.Message, "no such file")
			continue
		}
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		checkDisk(t, root, d.Name, [2]int64{0, diskSize})
	}
	assert.NoFileExists(t, wipe.DevicePath(root, "sdc"), "a missing device is never created")
}

func TestWipeSendsTheReportEvenWhenADiskFails(t *testing.T) {
	reg := &registry{}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	root := wipeRoot(t)
	ign := writeFile(t, "ignition.json", `{"registryURL": "`+srv.URL+`", "token": "`+token+`", "mode": "wipe", "wipePolicy": "zero", "systemUUID": "`+storageUUID+`"}`)

	r := runProbe(t, "--root", root, "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout)

	require.NoError(t, os.Remove(wipe.DevicePath(root, "sde")))
	r = runProbe(t, "--root", root, "--ignition", ign)
	assert.Equal(t, ExitReportedFailure, r.code, "delivered, so not to be run again: %s", r.stderr)
	assert.Contains(t, r.stderr, "delivered to "+srv.URL, "the operator learns of the failure")

	require.Len(t, reg.received, 2)
	for _, d := range requireWipe(t, reg.received[0], metalv1alpha1.WipeZero) {
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
	}
	failed := wipe.Failed(reg.received[1].Wipe)
	require.Len(t, failed, 1)
	assert.Equal(t, "sde", failed[0].Name)
}

func TestWipeRefusesAnotherSystemsIgnition(t *testing.T) {
	root := wipeRoot(t)
	ign := writeFile(t, "ignition.json", `{"mode": "wipe", "wipePolicy": "zero", "systemUUID": "00000000-0000-0000-0000-000000000001"}`)
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", ign)
	assert.Equal(t, exitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not wiping any disk")
	rep := decodeStrict(t, []byte(r.stdout))
	for _, d := range requireWipe(t, rep, metalv1alpha1.WipeZero) {
		assert.False(t, d.Succeeded)
		assert.Equal(t, wipe.MethodNone, d.Method)
		assert.Contains(t, d.Message, "ignition is for system 00000000-0000-0000-0000-000000000001")
		checkDisk(t, root, d.Name)
	}
}

func TestWipeWithoutDisksFails(t *testing.T) {
	root, err := fixtures.CopyRoot("small-vm", t.TempDir())
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "sys", "block", "vda")))
	r := runProbe(t, "--root", root, "--dry-run", "--mode", "wipe")
	assert.Equal(t, exitFailure, r.code, r.stderr)
	rep := decodeStrict(t, []byte(r.stdout))
	assert.Nil(t, rep.Wipe, "an empty wipe report would pass for a clean server")
	assert.Contains(t, rep.Warnings, "wipe: no disk to wipe in the inventory; nothing was wiped")
}

func TestWipeProgressIsLoggedInSteps(t *testing.T) {
	var buf bytes.Buffer
	progress := progressLogger(&buf)
	const total = 10 * progressMinBytes
	for done := int64(0); done < total; done += total / 40 {
		progress("sda", done+total/40, total)
	}
	progress("sdb", 1, 2) // too small to log
	lines := bytes.Count(buf.Bytes(), []byte("\n"))
	assert.Equal(t, 10, lines, buf.String())
	assert.Contains(t, buf.String(), "wiping sda: 100%")
	assert.NotContains(t, buf.String(), "sdb")
}
