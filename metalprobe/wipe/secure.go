package wipe

import (
	"bytes"
	"cmp"
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ErrSecureEraseUnsupported is what a SecureEraser returns (wrapped, with what was tried) when
// the device has no device-level erase it can run. Nothing has been written to the device;
// Wipe reports the disk not wiped, with Method "none".
var ErrSecureEraseUnsupported = errors.New("no device-level secure erase")

// errRegularFile is the secure policy's answer for a regular file (a fixture's stand-in disk):
// it has no device to erase itself.
var errRegularFile = fmt.Errorf("%w for a regular file", ErrSecureEraseUnsupported)

// unsupportedError is ErrSecureEraseUnsupported with the reason (what was tried).
type unsupportedError struct{ why string }

func (e *unsupportedError) Error() string { return ErrSecureEraseUnsupported.Error() + ": " + e.why }
func (e *unsupportedError) Is(target error) bool {
	return target == ErrSecureEraseUnsupported
}

// unsupported is ErrSecureEraseUnsupported because of why.
func unsupported(format string, args ...any) error {
	return &unsupportedError{why: fmt.Sprintf(format, args...)}
}

// whyUnsupported is the reason an ErrSecureEraseUnsupported carries, or its whole text.
func whyUnsupported(err error) string {
	var u *unsupportedError
	if errors.As(err, &u) {
		return u.why
	}
	return err.Error()
}

// SecureEraser runs a device-level erase on dev, the device's path (DevicePath), for the
// inventory's disk, and returns what it ran ("NVMe Format NVM, Secure Erase Settings 1 ...").
// It returns an error wrapping ErrSecureEraseUnsupported, before writing anything, when the
// device supports no erase it can run; any other error means an erase was attempted and
// failed. Wipe verifies a successful erase by reading the device back.
type SecureEraser interface {
	SecureErase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error)
}

// HostEraser is the SecureEraser for real hosts. It runs the first of these that the device
// supports; nothing else is ever tried, and nothing is zero-filled:
//
//  1. On an NVMe namespace (a block device named nvme<C>n<N>), through the NVMe driver's
//     admin passthrough (ioctl NVME_IOCTL_ADMIN_CMD on the block device, as nvme-cli does;
//     the namespace id from NVME_IOCTL_ID). Identify Controller (CNS 1) gives OACS, SANICAP and
//     FNA, Identify Namespace (CNS 0) the current format (FLBAS, DPS).
//     a. Sanitize (admin opcode 84h), when SANICAP advertises it: Block Erase when
//     supported, else Crypto Erase (Overwrite is never chosen: it takes hours). Sanitize acts
//     on the whole NVM subsystem, every namespace, and runs in the background: the Sanitize
//     Status log page (81h) is polled until it completes or fails. A Sanitize the controller
//     rejects outright changed nothing, and Format NVM is tried next.
//     b. Format NVM (admin opcode 80h), when OACS bit 1 advertises it, with Secure Erase
//     Settings 1 (user data erase) on the namespace, keeping its current format: CDW10 carries
//     FLBAS's LBA format (bits 3:0, and its upper bits 6:5 in 13:12), metadata setting and the
//     DPS protection information, so the namespace's size and block size do not change. When
//     FNA says a (secure) format applies to every namespace the message says so, and a
//     controller that refuses the single namespace ("Invalid Namespace or Format") is asked
//     again with NSID FFFFFFFFh.
//  2. Any other block device: the kernel's secure discard, ioctl BLKSECDISCARD over the
//     whole device [0, size). Drivers offer it where the device has a secure erase of its own
//     (eMMC's secure erase/trim, virtio-blk's secure-erase feature); most (SCSI, SATA, NVMe)
//     do not and answer EOPNOTSUPP.
//
// ATA SECURITY ERASE UNIT (through SG_IO) is not implemented: it needs a user password set
// first, and a drive the BIOS left "frozen" (the usual case) refuses it until a suspend/resume
// cycle, which a probe cannot do unattended. SCSI SANITIZE (through SG_IO) is not implemented
// either. A SATA or SAS disk therefore fails the secure policy unless its driver offers
// BLKSECDISCARD, and the erase policy zero-fills it.
//
// QEMU 7.2's emulated NVMe controller (-device nvme) advertises Format NVM (OACS bit 1) and no
// Sanitize (SANICAP 0); it ignores the Secure Erase Settings field but implements the format
// by writing zeros over the namespace (write-zeroes with unmap), and its namespaces read
// deallocated blocks as zeros (DLFEAT), so the read-back verification passes. virtio-blk in
// QEMU 7.2 offers no secure erase, so /dev/vdX fails the policy.
//
// The NVMe admin ioctl cannot be interrupted: a Format runs to its end (up to
// nvmeFormatTimeout) even when the wipe is cancelled. A cancelled Sanitize stops being polled
// and fails the disk; the controller carries on with it.
type HostEraser struct{}

// SecureErase implements SecureEraser (see the type's comment; hostErase is per platform).
func (HostEraser) SecureErase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	fi, err := os.Stat(dev)
	if err != nil {
		return "", unsupported("%v", err)
	}
	switch mode := fi.Mode(); {
	case mode.IsRegular():
		return "", errRegularFile
	case mode&os.ModeDevice == 0 || mode&os.ModeCharDevice != 0:
		return "", unsupported("%s is not a block device (%s)", dev, mode.Type())
	}
	return hostErase(ctx, dev, disk)
}

// secure applies the secure policy to a disk whose device opened: the eraser's device-level
// erase, then the read-back.
func (w *wiper) secure(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice, res metalv1alpha1.DiskWipe) metalv1alpha1.DiskWipe {
	what, err := w.deviceErase(ctx, dev, disk)
	if errors.Is(err, ErrSecureEraseUnsupported) {
		res.Method = MethodNone
		res.Message = fmt.Sprintf("not wiped: %s: %v", disk.Name, err)
		return res
	}
	res.Method = MethodSecure
	if err != nil {
		res.Message = fmt.Sprintf("%s: secure erase failed: %v", disk.Name, err)
		return res
	}
	checked, err := verifyZeros(ctx, dev, w.rand())
	if err != nil {
		res.Message = fmt.Sprintf("%s: %s; failed verification: %v", disk.Name, what, err)
		return res
	}
	res.Succeeded = true
	res.Message = what + "; " + checked
	return res
}

// deviceErase runs the eraser on dev and returns what it ran; an error wrapping
// ErrSecureEraseUnsupported when there is none to run (nothing was written).
func (w *wiper) deviceErase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	if w.opts.Eraser == nil {
		if fi, err := os.Stat(dev); err == nil && fi.Mode().IsRegular() {
			return "", errRegularFile
		}
		return "", unsupported("no secure eraser is configured")
	}
	what, err := w.opts.Eraser.SecureErase(ctx, dev, disk)
	if err == nil && what == "" {
		what = "erased by the device's secure erase"
	}
	return what, err
}

// Read-back verification after a device-level erase (secure and erase) and after the erase
// policy's zero-fill. A device up to VerifyWholeBytes is read in full. A larger one is read in
// windows of VerifyWindowBytes, each aligned to its size: the first and last MetadataBytes
// (where partition tables and signatures live), VerifySpreadWindows evenly spaced between them
// (the first right after the first MiB, the last ending at the last MiB), and
// VerifyRandomWindows at offsets drawn at random for each read-back (from a seed the probe
// takes from crypto/rand), anywhere on the device. Whatever the size, that is at most
// 2 MiB + (1024 + 1024) × 64 KiB = 130 MiB per disk: on an 8 TB disk one window every 7.8 GB,
// and 1024 more that a device cannot predict.
const (
	// VerifyWholeBytes is the largest device read back in full.
	VerifyWholeBytes = 256 << 20
	// VerifySpreadWindows is how many evenly spaced windows are read between the first and
	// last MetadataBytes of a larger device.
	VerifySpreadWindows = 1024
	// VerifyRandomWindows is how many windows are read at random offsets of a larger device.
	VerifyRandomWindows = 1024
	// VerifyWindowBytes is the size of one window, aligned to it.
	VerifyWindowBytes = 64 << 10
)

// VerifyRanges are the [start, end) byte ranges read back from a device of size bytes (see
// VerifyWholeBytes), sorted, overlapping windows merged; rnd draws the random windows.
func VerifyRanges(size int64, rnd *rand.Rand) [][2]int64 {
	if size <= VerifyWholeBytes {
		return [][2]int64{{0, size}}
	}
	ranges := make([][2]int64, 0, VerifySpreadWindows+VerifyRandomWindows+2)
	ranges = append(ranges, [2]int64{0, MetadataBytes}, [2]int64{size - MetadataBytes, size})
	span := size - 2*MetadataBytes - VerifyWindowBytes // the last window ends at size-M at most
	for i := int64(0); i < VerifySpreadWindows; i++ {
		off := MetadataBytes + span*i/(VerifySpreadWindows-1)
		off -= off % VerifyWindowBytes
		ranges = append(ranges, [2]int64{off, off + VerifyWindowBytes})
	}
	windows := size / VerifyWindowBytes // whole aligned windows on the device
	for range VerifyRandomWindows {
		off := rnd.Int64N(windows) * VerifyWindowBytes
		ranges = append(ranges, [2]int64{off, off + VerifyWindowBytes})
	}
	slices.SortFunc(ranges, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	merged := ranges[:1]
	for _, r := range ranges[1:] {
		if last := &merged[len(merged)-1]; r[0] <= last[1] {
			last[1] = max(last[1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

// rand is a source for one read-back's random windows: Options.VerifySeed when set (tests),
// else a seed from crypto/rand, so that a device cannot know where it will be read.
func (w *wiper) rand() *rand.Rand {
	if s := w.opts.VerifySeed; s != nil {
		return rand.New(rand.NewPCG(s[0], s[1]))
	}
	var seed [32]byte
	_, _ = crand.Read(seed[:]) // never fails (Go 1.24+)
	return rand.New(rand.NewChaCha8(seed))
}

// verifyZeros reads VerifyRanges of dev back, past the page cache, and fails at the first byte
// that is not zero. It returns what it read, for the report.
func verifyZeros(ctx context.Context, dev string, rnd *rand.Rand) (string, error) {
	f, err := os.Open(dev)
	if err != nil {
		return "", fmt.Errorf("opening %s to read it back: %w", dev, err)
	}
	defer func() { _ = f.Close() }()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("finding the size of %s: %w", dev, err)
	}
	if err := dropCache(f); err != nil {
		return "", fmt.Errorf("dropping the page cache of %s before reading it back: %w", dev, err)
	}
	buf := make([]byte, 1<<20)
	zeros := make([]byte, len(buf))
	ranges := VerifyRanges(size, rnd)
	var read int64
	for _, r := range ranges {
		for off := r[0]; off < r[1]; {
			if err := ctx.Err(); err != nil {
				return "", fmt.Errorf("reading back: interrupted: %w", err)
			}
			n := min(r[1]-off, int64(len(buf)))
			got, err := f.ReadAt(buf[:n], off)
			if int64(got) != n {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return "", fmt.Errorf("reading back at offset %d: %w", off+int64(got), err)
			}
			if !bytes.Equal(buf[:n], zeros[:n]) {
				return "", fmt.Errorf("read back non-zero data at offset %d", off+int64(firstNonZero(buf[:n])))
			}
			off += n
			read += n
		}
	}
	if size <= VerifyWholeBytes {
		return fmt.Sprintf("read back all %d bytes: zeros", size), nil
	}
	return fmt.Sprintf("read back %d of %d bytes (the first and last MiB, %d evenly spaced and %d random windows of %d KiB): zeros",
		read, size, VerifySpreadWindows, VerifyRandomWindows, VerifyWindowBytes>>10), nil
}

// firstNonZero is the index of b's first non-zero byte, or len(b).
func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return len(b)
}

// joinReasons joins what was tried, in order.
func joinReasons(reasons []string) string { return strings.Join(reasons, "; ") }
