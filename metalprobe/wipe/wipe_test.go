package wipe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

const mib = 1 << 20

// sizes of the test disks: empty, tiny, just under, at and just over 2 MiB, a multiple of the
// chunk, and sizes that are not.
var sizes = map[string]int64{
	"empty":    0,
	"tiny":     1000,
	"under2m":  2*MetadataBytes - 1,
	"exact2m":  2 * MetadataBytes,
	"over2m":   2*MetadataBytes + 1,
	"chunk":    ChunkBytes,
	"odd":      2*ChunkBytes + 12345,
	"sectored": 3*MetadataBytes + 512*7,
}

// disks makes one disk file per entry of sizes under a new root and returns the root and the
// inventory for them (sorted by name, non-removable, serial "SN-<name>").
func disks(t *testing.T, sizes map[string]int64) (string, []metalv1alpha1.StorageDevice) {
	t.Helper()
	root := t.TempDir()
	var inv []metalv1alpha1.StorageDevice
	for _, name := range sortedKeys(sizes) {
		require.NoError(t, fixtures.MakeDiskFiles(root, []string{name}, sizes[name]))
		inv = append(inv, metalv1alpha1.StorageDevice{Name: name, SerialNumber: "SN-" + name})
	}
	return root, inv
}

func sortedKeys(m map[string]int64) []string { return slices.Sorted(maps.Keys(m)) }

// checkBytes reads a disk file back and checks every byte: zero inside the ranges, the
// fixture pattern outside them. It reports the first wrong byte of each kind.
func checkBytes(t *testing.T, path string, size int64, zeroed [][2]int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, data, int(size), "%s: the wipe must not change the size", path)
	want := make([]byte, size)
	for off := range want {
		want[off] = fixtures.DiskPattern(int64(off))
	}
	for _, r := range zeroed {
		clear(want[r[0]:r[1]])
	}
	if bytes.Equal(data, want) {
		return
	}
	for off := range data {
		if data[off] != want[off] {
			t.Errorf("%s: byte %d is %#x, want %#x (zeroed ranges %v)", filepath.Base(path), off, data[off], want[off], zeroed)
			return
		}
	}
}

func TestMetadataZeroesBothEndsAndKeepsTheMiddle(t *testing.T) {
	root, inv := disks(t, sizes)
	for _, policy := range []metalv1alpha1.WipePolicy{metalv1alpha1.WipeMetadata} {
		t.Run(fmt.Sprintf("policy %q", policy), func(t *testing.T) {
			for name, size := range sizes {
				require.NoError(t, fixtures.MakeDiskFiles(root, []string{name}, size))
			}
			rep := Wipe(context.Background(), inv, Options{Root: root, Policy: policy})
			assert.Equal(t, metalv1alpha1.WipeMetadata, rep.Policy)
			assert.Nil(t, rep.ReportedAt)
			require.Len(t, rep.Disks, len(sizes))
			for i, d := range rep.Disks {
				assert.Equal(t, inv[i].Name, d.Name)
				assert.Equal(t, "SN-"+d.Name, d.SerialNumber)
				assert.Equal(t, MethodMetadata, d.Method, d.Name)
				assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
				size := sizes[d.Name]
				var want [][2]int64
				if size <= 2*MetadataBytes {
					want = [][2]int64{{0, size}}
				} else {
					want = [][2]int64{{0, MetadataBytes}, {size - MetadataBytes, size}}
				}
				assert.Equal(t, want, MetadataRanges(size))
				checkBytes(t, DevicePath(root, d.Name), size, want)
			}
		})
	}
}

func TestMetadataRangesAsDocumented(t *testing.T) {
	assert.Equal(t, [][2]int64{{0, 0}}, MetadataRanges(0))
	assert.Equal(t, [][2]int64{{0, 1000}}, MetadataRanges(1000))
	assert.Equal(t, [][2]int64{{0, 2 * mib}}, MetadataRanges(2*mib))
	assert.Equal(t, [][2]int64{{0, mib}, {mib + 1, 2*mib + 1}}, MetadataRanges(2*mib+1))
	const tb = int64(8_001_563_222_016)
	assert.Equal(t, [][2]int64{{0, mib}, {tb - mib, tb}}, MetadataRanges(tb))
}

func TestZeroWipesEveryByte(t *testing.T) {
	root, inv := disks(t, sizes)
	var calls int
	var last = map[string][2]int64{}
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeZero,
		Progress: func(disk string, done, total int64) {
			calls++
			prev := last[disk]
			assert.Greater(t, done, prev[0], "progress only goes forward")
			assert.LessOrEqual(t, done-prev[0], int64(ChunkBytes), "one write is at most a chunk")
			last[disk] = [2]int64{done, total}
		}})
	assert.Equal(t, metalv1alpha1.WipeZero, rep.Policy)
	require.Len(t, rep.Disks, len(sizes))
	for _, d := range rep.Disks {
		assert.Equal(t, MethodZero, d.Method)
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		size := sizes[d.Name]
		checkBytes(t, DevicePath(root, d.Name), size, [][2]int64{{0, size}})
		if size > 0 {
			assert.Equal(t, [2]int64{size, size}, last[d.Name], "%s: the last progress call says all is done", d.Name)
		}
	}
	assert.Equal(t, 9, calls, "one call per chunk written: none for empty, 3 for odd, 1 for each other disk")
}

// fakeEraser records its calls and returns err; with zero set it first writes zeros over the
// device (a device erase that works), with leave set it then puts one byte back at offset
// leave-1 (an erase that missed a spot).
type fakeEraser struct {
	err   error
	zero  bool
	leave int64
	calls []string
}

func (e *fakeEraser) SecureErase(_ context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	e.calls = append(e.calls, dev+" "+disk.SerialNumber)
	if e.zero {
		fi, err := os.Stat(dev)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(dev, make([]byte, fi.Size()), 0); err != nil {
			return "", err
		}
		if e.leave > 0 {
			f, err := os.OpenFile(dev, os.O_WRONLY, 0)
			if err != nil {
				return "", err
			}
			_, err = f.WriteAt([]byte{0x5a}, e.leave-1)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", err
			}
		}
	}
	if e.err != nil {
		return "", e.err
	}
	return "fake device erase", nil
}

func TestSecureWithoutEraserFailsEveryDiskAndWritesNothing(t *testing.T) {
	root, inv := disks(t, sizes)
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure})
	assert.Equal(t, metalv1alpha1.WipeSecure, rep.Policy, "the report says what was asked")
	require.Len(t, rep.Disks, len(sizes))
	for _, d := range rep.Disks {
		assert.Equal(t, MethodNone, d.Method, d.Name)
		assert.False(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		assert.Equal(t, "not wiped: "+d.Name+": no device-level secure erase for a regular file", d.Message)
		checkBytes(t, DevicePath(root, d.Name), sizes[d.Name], nil) // never zero-filled
	}
	assert.Len(t, Failed(rep), len(sizes))
}

func TestSecureUnsupportedFailsSaysWhyAndWritesNothing(t *testing.T) {
	const size = 3*mib + 5
	root, inv := disks(t, map[string]int64{"nvme0n1": size})
	for _, tc := range []struct {
		eraser SecureEraser
		want   string
	}{
		{HostEraser{}, "not wiped: nvme0n1: no device-level secure erase for a regular file"},
		{&fakeEraser{err: unsupported("not NVMe; BLKSECDISCARD: operation not supported")},
			"not wiped: nvme0n1: no device-level secure erase: not NVMe; BLKSECDISCARD: operation not supported"},
		{&fakeEraser{err: fmt.Errorf("%w: frozen", ErrSecureEraseUnsupported)}, "not wiped: nvme0n1: no device-level secure erase: frozen"},
	} {
		rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: tc.eraser})
		require.Len(t, rep.Disks, 1)
		d := rep.Disks[0]
		assert.Equal(t, MethodNone, d.Method)
		assert.False(t, d.Succeeded, d.Message)
		assert.Equal(t, tc.want, d.Message)
		checkBytes(t, DevicePath(root, "nvme0n1"), size, nil)
	}
}

func TestHostEraserRefusesWhatIsNotABlockDevice(t *testing.T) {
	root, _ := disks(t, map[string]int64{"sda": mib})
	disk := metalv1alpha1.StorageDevice{Name: "sda"}
	for dev, want := range map[string]string{
		DevicePath(root, "sda"):        "no device-level secure erase for a regular file",
		"/dev/null":                    "no device-level secure erase: /dev/null is not a block device",
		root:                           "no device-level secure erase: " + root + " is not a block device",
		filepath.Join(root, "missing"): "no device-level secure erase: stat " + filepath.Join(root, "missing") + ": no such file or directory",
	} {
		what, err := HostEraser{}.SecureErase(context.Background(), dev, disk)
		assert.Empty(t, what)
		require.ErrorIs(t, err, ErrSecureEraseUnsupported, dev)
		assert.ErrorContains(t, err, want)
	}
	checkBytes(t, DevicePath(root, "sda"), mib, nil)
}

func TestSecureSucceedsOnlyWhenTheEraserSucceededAndTheDeviceReadsBackZero(t *testing.T) {
	root, inv := disks(t, sizes)

	// An eraser that erases: success, and the message says what ran and what was read.
	ok := &fakeEraser{zero: true}
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: ok})
	require.Len(t, rep.Disks, len(sizes))
	for _, d := range rep.Disks {
		assert.Equal(t, MethodSecure, d.Method)
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		assert.Equal(t, fmt.Sprintf("fake device erase; read back all %d bytes: zeros", sizes[d.Name]), d.Message)
		checkBytes(t, DevicePath(root, d.Name), sizes[d.Name], [][2]int64{{0, sizes[d.Name]}})
	}
	require.Len(t, ok.calls, len(sizes))
	assert.Equal(t, DevicePath(root, "chunk")+" SN-chunk", ok.calls[0])

	// An eraser that says it erased but did not: the read-back fails the disk, and Wipe does
	// not zero behind its back.
	for name, size := range sizes {
		require.NoError(t, fixtures.MakeDiskFiles(root, []string{name}, size))
	}
	liar := &fakeEraser{}
	rep = Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: liar})
	for _, d := range rep.Disks {
		assert.Equal(t, MethodSecure, d.Method, d.Name)
		if sizes[d.Name] == 0 {
			assert.True(t, d.Succeeded, "an empty device has nothing to read back: %s", d.Message)
			continue
		}
		assert.False(t, d.Succeeded, d.Name)
		assert.Equal(t, d.Name+": fake device erase; failed verification: read back non-zero data at offset 0", d.Message)
		checkBytes(t, DevicePath(root, d.Name), sizes[d.Name], nil)
	}
	assert.Len(t, liar.calls, len(sizes))

	// An eraser that missed one byte, anywhere (these devices are read back in full).
	for _, leave := range []int64{1, MetadataBytes + 77, ChunkBytes} {
		t.Run(fmt.Sprintf("byte %d left", leave-1), func(t *testing.T) {
			root, inv := disks(t, map[string]int64{"chunk": ChunkBytes})
			rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: &fakeEraser{zero: true, leave: leave}})
			require.Len(t, rep.Disks, 1)
			assert.False(t, rep.Disks[0].Succeeded)
			assert.Equal(t, MethodSecure, rep.Disks[0].Method)
			assert.Contains(t, rep.Disks[0].Message, fmt.Sprintf("read back non-zero data at offset %d", leave-1))
		})
	}

	// An eraser that fails: the disk fails with its error, named, and nothing is written.
	root, inv = disks(t, map[string]int64{"sda": 3 * mib, "sdb": 3 * mib})
	failing := &fakeEraser{err: errors.New("sanitize aborted: status 0x2")}
	rep = Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: failing})
	require.Len(t, rep.Disks, 2)
	for _, d := range rep.Disks {
		assert.Equal(t, MethodSecure, d.Method)
		assert.False(t, d.Succeeded)
		assert.Equal(t, d.Name+": secure erase failed: sanitize aborted: status 0x2", d.Message)
	}
	assert.Len(t, failing.calls, 2, "a failed disk does not stop the next one")
	checkBytes(t, DevicePath(root, "sdb"), 3*mib, nil)
}

func TestMissingOrBadDeviceFailsAndTheOthersAreStillWiped(t *testing.T) {
	for _, policy := range []metalv1alpha1.WipePolicy{metalv1alpha1.WipeErase, metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure} {
		t.Run(string(policy), func(t *testing.T) {
			root, inv := disks(t, map[string]int64{"sda": 3 * mib, "sdc": mib})
			require.NoError(t, os.Mkdir(DevicePath(root, "sdd"), 0o755))
			inv = []metalv1alpha1.StorageDevice{
				inv[0],
				{Name: "sdb", SerialNumber: "SN-sdb"}, // no device file
				{Name: "../escape"},                   // not a kernel name
				{Name: "sdd"},                         // a directory
				inv[1],
			}
			eraser := &fakeEraser{zero: true}
			rep := Wipe(context.Background(), inv, Options{Root: root, Policy: policy, Eraser: eraser})
			require.Len(t, rep.Disks, 5)
			for _, i := range []int{1, 2, 3} {
				d := rep.Disks[i]
				assert.Equal(t, inv[i].Name, d.Name)
				assert.Equal(t, MethodNone, d.Method, d.Name)
				assert.False(t, d.Succeeded, d.Name)
				assert.Contains(t, d.Message, "not wiped", d.Name)
			}
			assert.Equal(t, "SN-sdb", rep.Disks[1].SerialNumber)
			assert.Contains(t, rep.Disks[1].Message, "no such file")
			assert.Contains(t, rep.Disks[2].Message, "not a kernel device name")
			assert.NoFileExists(t, DevicePath(root, "sdb"), "a missing device is never created")
			assert.NoFileExists(t, filepath.Join(root, "escape"))
			for _, i := range []int{0, 4} {
				assert.True(t, rep.Disks[i].Succeeded, "%s: %s", rep.Disks[i].Name, rep.Disks[i].Message)
			}
			if policy == metalv1alpha1.WipeSecure || policy == metalv1alpha1.WipeErase {
				assert.Len(t, eraser.calls, 2, "the eraser only sees devices that opened")
			}
			checkBytes(t, DevicePath(root, "sdc"), mib, [][2]int64{{0, mib}})
		})
	}
}

// TestRemovableDisksAreWiped: a removable device (an internal SD module, a USB stick) is wiped
// as every disk is; only optical drives (the probe's own virtual CD) and the devices an admin
// excluded are left alone, and not listed.
func TestRemovableDisksAreWiped(t *testing.T) {
	root, inv := disks(t, map[string]int64{"sda": 3 * mib, "sdf": 3 * mib, "sdg": 3 * mib, "sr0": 3 * mib})
	inv[1].Removable = true
	inv[2].BusPath = "pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0"
	excluded := []metalv1alpha1.WipeExclusion{{Path: metalv1alpha1.ByPathPrefix + inv[2].BusPath, Reason: "the vendor's firmware"}}
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeZero, Exclusions: excluded})
	require.Len(t, rep.Disks, 2)
	assert.Equal(t, "sda", rep.Disks[0].Name)
	assert.Equal(t, "sdf", rep.Disks[1].Name)
	checkBytes(t, DevicePath(root, "sda"), 3*mib, [][2]int64{{0, 3 * mib}})
	checkBytes(t, DevicePath(root, "sdf"), 3*mib, [][2]int64{{0, 3 * mib}})
	checkBytes(t, DevicePath(root, "sdg"), 3*mib, nil)
	checkBytes(t, DevicePath(root, "sr0"), 3*mib, nil)
	assert.Equal(t, "excluded: the vendor's firmware", Skip(inv[2], excluded))
	assert.Equal(t, "optical drive", Skip(inv[3], excluded))

	bySerial := []metalv1alpha1.WipeExclusion{{SerialNumber: "SN-sda", Reason: "r"}}
	rep = Wipe(context.Background(), inv[:1], Options{Root: root, Exclusions: bySerial})
	assert.Empty(t, rep.Disks)
}

func TestCancelMidZeroFailsThatDiskAndTheRest(t *testing.T) {
	const size = 3*ChunkBytes + 100
	root, inv := disks(t, map[string]int64{"sda": size, "sdb": size, "sdc": size})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep := Wipe(ctx, inv, Options{Root: root, Policy: metalv1alpha1.WipeZero,
		Progress: func(disk string, done, _ int64) {
			if disk == "sdb" && done == ChunkBytes {
				cancel() // after the first chunk of the second disk
			}
		}})
	require.Len(t, rep.Disks, 3)
	assert.True(t, rep.Disks[0].Succeeded, rep.Disks[0].Message)
	checkBytes(t, DevicePath(root, "sda"), size, [][2]int64{{0, size}})

	b := rep.Disks[1]
	assert.Equal(t, MethodZero, b.Method)
	assert.False(t, b.Succeeded)
	assert.Contains(t, b.Message, fmt.Sprintf("after zeroing %d of %d bytes", ChunkBytes, size))
	assert.Contains(t, b.Message, context.Canceled.Error())
	checkBytes(t, DevicePath(root, "sdb"), size, [][2]int64{{0, ChunkBytes}})

	c := rep.Disks[2]
	assert.Equal(t, MethodNone, c.Method)
	assert.False(t, c.Succeeded)
	assert.Contains(t, c.Message, "not wiped: context canceled")
	checkBytes(t, DevicePath(root, "sdc"), size, nil)
}

func TestUnknownPolicyWipesNothing(t *testing.T) {
	root, inv := disks(t, map[string]int64{"sda": 3 * mib})
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: "shred"})
	assert.Equal(t, metalv1alpha1.WipePolicy("shred"), rep.Policy)
	require.Len(t, rep.Disks, 1)
	assert.Equal(t, MethodNone, rep.Disks[0].Method)
	assert.False(t, rep.Disks[0].Succeeded)
	assert.Contains(t, rep.Disks[0].Message, `unknown wipe policy "shred"`)
	checkBytes(t, DevicePath(root, "sda"), 3*mib, nil)
}

func TestDevicePathAndFailed(t *testing.T) {
	assert.Equal(t, "/dev/sda", DevicePath("", "sda"))
	assert.Equal(t, "/dev/nvme0n1", DevicePath("/", "nvme0n1"))
	assert.Equal(t, "/tmp/x/dev/vda", DevicePath("/tmp/x", "vda"))

	assert.Nil(t, Failed(nil))
	rep := &metalv1alpha1.WipeReport{Disks: []metalv1alpha1.DiskWipe{{Name: "a", Succeeded: true}, {Name: "b"}}}
	assert.Equal(t, []metalv1alpha1.DiskWipe{{Name: "b"}}, Failed(rep))
}
