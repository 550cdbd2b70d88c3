package wipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

func seeded(a, b uint64) *rand.Rand { return rand.New(rand.NewPCG(a, b)) }

// TestVerifyRangesCoverTheWholeDevice: a device up to VerifyWholeBytes is read in full; a larger
// one in sorted, aligned, disjoint windows inside it, from its first MiB to its last, no two
// evenly spaced windows further apart than a 1023rd of the device, a bounded amount whatever
// its size, and random windows that change from one read-back to the next.
func TestVerifyRangesCoverTheWholeDevice(t *testing.T) {
	assert.Equal(t, [][2]int64{{0, 0}}, VerifyRanges(0, seeded(1, 1)))
	assert.Equal(t, [][2]int64{{0, VerifyWholeBytes}}, VerifyRanges(VerifyWholeBytes, seeded(1, 1)))
	const bound = 2*MetadataBytes + (VerifySpreadWindows+VerifyRandomWindows)*VerifyWindowBytes
	for _, size := range []int64{VerifyWholeBytes + 512, 1 << 40, 8_001_563_222_016, 30_720_000_000_000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			r := VerifyRanges(size, seeded(7, uint64(size)))
			first, last := r[0], r[len(r)-1]
			assert.True(t, first[0] == 0 && first[1] >= MetadataBytes, "the first MiB first: %v", first)
			assert.True(t, last[1] == size && last[0] <= size-MetadataBytes, "the last MiB last: %v", last)
			var total int64
			for i, w := range r {
				assert.Less(t, w[0], w[1])
				assert.GreaterOrEqual(t, w[0], int64(0))
				assert.LessOrEqual(t, w[1], size)
				if i > 0 {
					assert.Less(t, r[i-1][1], w[0], "sorted, disjoint and merged")
				}
				if w[1] != size {
					assert.Zero(t, w[0]%VerifyWindowBytes, "aligned")
				}
				total += w[1] - w[0]
			}
			assert.LessOrEqual(t, total, int64(bound), "a bounded read whatever the size")
			assert.Greater(t, total, int64(bound)/2)

			// The spread: every stretch of the device as long as the step between two evenly
			// spaced windows (plus one window, for the alignment) holds a window.
			step := (size-2*MetadataBytes)/(VerifySpreadWindows-1) + 2*VerifyWindowBytes
			for i := 1; i < len(r); i++ {
				assert.LessOrEqual(t, r[i][0]-r[i-1][1], step, "gap before %v", r[i])
			}
			// Random windows: another read-back reads elsewhere, and on a large device every
			// sixteenth of it gets some of them.
			other := VerifyRanges(size, seeded(8, uint64(size)))
			assert.NotEqual(t, r, other, "the random windows change with the seed")
			if size > 1<<40 {
				spread, sixteenths := spreadOffsets(size), map[int64]bool{}
				for _, w := range r {
					if !spread[w[0]] && w[1]-w[0] == VerifyWindowBytes {
						sixteenths[w[0]*16/size] = true
					}
				}
				assert.Len(t, sixteenths, 16)
			}
		})
	}
}

// spreadOffsets are the starts of the evenly spaced windows of a device of size bytes.
func spreadOffsets(size int64) map[int64]bool {
	spread := map[int64]bool{}
	for i := int64(0); i < VerifySpreadWindows; i++ {
		off := MetadataBytes + (size-2*MetadataBytes-VerifyWindowBytes)*i/(VerifySpreadWindows-1)
		spread[off-off%VerifyWindowBytes] = true
	}
	return spread
}

// sparseDevice is a device file of size bytes that reads as zeros.
func sparseDevice(t *testing.T, name string, size int64) (root, path string) {
	t.Helper()
	root = t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	path = DevicePath(root, name)
	require.NoError(t, os.WriteFile(path, nil, 0o644))
	require.NoError(t, os.Truncate(path, size))
	return root, path
}

func poke(t *testing.T, path string, off int64, b byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{b}, off)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// TestReadBackFailsOnANonZeroByteInAnyWindow: on a 4 GiB device, one non-zero byte at the start,
// middle or end of any kind of window (the first and last MiB, an evenly spaced one, a random
// one) fails the read-back, naming its offset; a byte no window reads is not seen.
func TestReadBackFailsOnANonZeroByteInAnyWindow(t *testing.T) {
	const size = 4 << 30
	_, path := sparseDevice(t, "sda", size)
	ctx := context.Background()
	msg, err := verifyZeros(ctx, path, seeded(3, 4))
	require.NoError(t, err)
	r := VerifyRanges(size, seeded(3, 4))
	var read int64
	for _, w := range r {
		read += w[1] - w[0]
	}
	assert.Equal(t, fmt.Sprintf("read back %d of %d bytes (the first and last MiB, 1024 evenly spaced and 1024 random windows of 64 KiB): zeros", read, size), msg)

	spread := spreadOffsets(size)
	var windows [][2]int64 // one of each kind
	windows = append(windows, r[0], r[len(r)-1], r[len(r)/2])
	for _, w := range r[1 : len(r)-1] {
		if !spread[w[0]] && w[1]-w[0] == VerifyWindowBytes {
			windows = append(windows, w) // a random window
			break
		}
	}
	require.Len(t, windows, 4)
	for _, w := range windows {
		for _, off := range []int64{w[0], (w[0] + w[1]) / 2, w[1] - 1} {
			poke(t, path, off, 0x5a)
			_, err := verifyZeros(ctx, path, seeded(3, 4))
			assert.EqualError(t, err, fmt.Sprintf("read back non-zero data at offset %d", off))
			poke(t, path, off, 0)
		}
	}
	// Between windows nothing is read: it is a sample, not a proof; the next read-back's random
	// windows are elsewhere.
	poke(t, path, r[1][1]+1, 0x5a)
	_, err = verifyZeros(ctx, path, seeded(3, 4))
	assert.NoError(t, err)
}

// TestEraseIsTheDefault: an empty policy is erase, and is reported as such.
func TestEraseIsTheDefault(t *testing.T) {
	root, inv := disks(t, map[string]int64{"sda": 3 * mib})
	rep := Wipe(context.Background(), inv, Options{Root: root})
	assert.Equal(t, metalv1alpha1.WipeErase, rep.Policy)
	require.Len(t, rep.Disks, 1)
	assert.Equal(t, MethodZero, rep.Disks[0].Method)
	assert.True(t, rep.Disks[0].Succeeded, rep.Disks[0].Message)
	checkBytes(t, DevicePath(root, "sda"), 3*mib, [][2]int64{{0, 3 * mib}})
}

// TestEraseZeroFillsAndReadsBackWhereTheDeviceHasNoErase: fixture disk files (regular files,
// no eraser) are zero-filled whole and read back, reported as zero with why.
func TestEraseZeroFillsAndReadsBackWhereTheDeviceHasNoErase(t *testing.T) {
	root, inv := disks(t, sizes)
	for _, eraser := range []SecureEraser{nil, HostEraser{}} {
		for name, size := range sizes {
			require.NoError(t, fixtures.MakeDiskFiles(root, []string{name}, size))
		}
		rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeErase, Eraser: eraser})
		assert.Equal(t, metalv1alpha1.WipeErase, rep.Policy)
		require.Len(t, rep.Disks, len(sizes))
		for _, d := range rep.Disks {
			size := sizes[d.Name]
			assert.Equal(t, MethodZero, d.Method, d.Name)
			assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
			assert.Equal(t, fmt.Sprintf("no device-level secure erase for a regular file; zeroed all %d bytes; read back all %d bytes: zeros", size, size), d.Message)
			checkBytes(t, DevicePath(root, d.Name), size, [][2]int64{{0, size}})
		}
	}
}

// TestEraseUsesTheDevicesOwnEraseAndFallsBackToZeros: a device erase that works and reads back
// zero is the method (secure); one that is not supported, fails, or leaves data is followed by
// a zero-fill, read back, reported as zero with the reason.
func TestEraseUsesTheDevicesOwnEraseAndFallsBackToZeros(t *testing.T) {
	const size = 3*mib + 5
	for _, tc := range []struct {
		name   string
		eraser *fakeEraser
		method string
		why    string
	}{
		{"erases", &fakeEraser{zero: true}, MethodSecure, "fake device erase"},
		{"unsupported", &fakeEraser{err: unsupported("not NVMe; BLKSECDISCARD: operation not supported")}, MethodZero,
			"no device-level secure erase: not NVMe; BLKSECDISCARD: operation not supported; zeroed all 3145733 bytes"},
		{"fails", &fakeEraser{err: errors.New("sanitize aborted: status 0x2")}, MethodZero,
			"the device's erase failed: sanitize aborted: status 0x2; zeroed all 3145733 bytes"},
		{"lies", &fakeEraser{}, MethodZero,
			"the device's erase failed: fake device erase, but read back non-zero data at offset 0; zeroed all 3145733 bytes"},
		{"misses a byte", &fakeEraser{zero: true, leave: 2 * mib}, MethodZero,
			fmt.Sprintf("the device's erase failed: fake device erase, but read back non-zero data at offset %d; zeroed all 3145733 bytes", 2*mib-1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, inv := disks(t, map[string]int64{"nvme0n1": size})
			rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeErase, Eraser: tc.eraser})
			require.Len(t, rep.Disks, 1)
			d := rep.Disks[0]
			assert.Equal(t, tc.method, d.Method)
			assert.True(t, d.Succeeded, d.Message)
			assert.Equal(t, tc.why+"; read back all 3145733 bytes: zeros", d.Message)
			assert.Len(t, tc.eraser.calls, 1)
			checkBytes(t, DevicePath(root, "nvme0n1"), size, [][2]int64{{0, size}})
		})
	}
}

// TestEraseOfALargeDeviceReadsBackSamples: a device larger than VerifyWholeBytes erased by
// itself is read back in windows, and data in one of them sends it to the zero-fill.
func TestEraseOfALargeDeviceReadsBackSamples(t *testing.T) {
	const size = VerifyWholeBytes + 64*mib
	root, path := sparseDevice(t, "nvme0n1", size)
	inv := []metalv1alpha1.StorageDevice{{Name: "nvme0n1"}}
	seed := &[2]uint64{5, 6}
	rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeErase, Eraser: &fakeEraser{}, VerifySeed: seed})
	require.Len(t, rep.Disks, 1)
	d := rep.Disks[0]
	assert.Equal(t, MethodSecure, d.Method)
	assert.True(t, d.Succeeded, d.Message)
	assert.True(t, strings.HasPrefix(d.Message, "fake device erase; read back "), d.Message)
	assert.Contains(t, d.Message, fmt.Sprintf(" of %d bytes (the first and last MiB, 1024 evenly spaced and 1024 random windows of 64 KiB): zeros", size))

	w := VerifyRanges(size, seeded(seed[0], seed[1]))[5]
	poke(t, path, w[0]+3, 1)
	rep = Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeErase, Eraser: &fakeEraser{}, VerifySeed: seed})
	d = rep.Disks[0]
	assert.Equal(t, MethodZero, d.Method)
	assert.True(t, d.Succeeded, d.Message)
	assert.Contains(t, d.Message, fmt.Sprintf("the device's erase failed: fake device erase, but read back non-zero data at offset %d; zeroed all %d bytes; read back ", w[0]+3, size))
	assert.Equal(t, int64(-1), firstNonZeroByte(t, path), "zeroed whole")
}

// firstNonZeroByte is the offset of a file's first non-zero byte, or -1; read in chunks.
func firstNonZeroByte(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 4*mib)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		if i := firstNonZero(buf[:n]); i < n {
			return off + int64(i)
		}
		if err != nil {
			require.ErrorIs(t, err, io.EOF)
			return -1
		}
		off += int64(n)
	}
}

// TestSecureReadsBackSamplesOfALargeDevice: the secure policy's read-back is the same sampled
// one, and a failed one fails the disk (the secure policy never zero-fills).
func TestSecureReadsBackSamplesOfALargeDevice(t *testing.T) {
	const size = 1 << 30
	root, path := sparseDevice(t, "nvme0n1", size)
	inv := []metalv1alpha1.StorageDevice{{Name: "nvme0n1"}}
	seed := &[2]uint64{9, 9}
	wipe := func() metalv1alpha1.DiskWipe {
		rep := Wipe(context.Background(), inv, Options{Root: root, Policy: metalv1alpha1.WipeSecure, Eraser: &fakeEraser{}, VerifySeed: seed})
		require.Len(t, rep.Disks, 1)
		return rep.Disks[0]
	}
	d := wipe()
	assert.True(t, d.Succeeded, d.Message)
	assert.Contains(t, d.Message, "fake device erase; read back ")
	window := VerifyRanges(size, seeded(seed[0], seed[1]))[100]
	for _, off := range []int64{7, size - 1, window[0] + 4000} {
		poke(t, path, off, 1)
		d = wipe()
		assert.False(t, d.Succeeded)
		assert.Equal(t, MethodSecure, d.Method)
		assert.Equal(t, "nvme0n1: fake device erase; failed verification: read back non-zero data at offset "+fmt.Sprint(off), d.Message)
		poke(t, path, off, 0)
	}
}
