// Package wipe erases a released server's disks before the server goes back to the pool, and
// says, disk by disk, what was done.
//
// Every non-removable disk of the inventory is opened as <Root>/dev/<name> (DevicePath), write
// only and never created: a missing device is a failure, not a new file. Its size is where
// Seek(0, io.SeekEnd) lands, which works for block devices and for the regular files that
// stand in for them under a fixture root. Removable disks (USB sticks, card readers, virtual
// media) are skipped and not listed in the report.
//
// # Policies
//
// For a device of N bytes, with M = MetadataBytes (1 MiB = 1048576 bytes):
//
//   - metadata (the default when Options.Policy is empty): zeros over the byte ranges
//     [0, M) and [N-M, N) when N > 2M, and over the whole device [0, N) when N <= 2M. Nothing
//     else is written. On the whole device this clears the partition tables (MBR in sector 0,
//     GPT primary header and entries in the first 34 sectors, GPT backup in the last 33
//     sectors, with 4 KiB sectors too) and the signatures placed in those ranges: filesystem
//     superblocks (ext2/3/4, XFS, btrfs's primary at 64 KiB, NTFS, FAT, swap), LVM2 PV labels
//     and the default metadata area, mdadm superblocks (0.90 and 1.0 within the last 128 KiB,
//     1.1 at 0, 1.2 at 4 KiB), and ZFS labels (L0/L1 in the first 512 KiB, L2/L3 in the last
//     768 KiB). It does NOT clear: signatures inside partitions that start after the first
//     MiB (the usual layout puts partition 1 at 1 MiB, so its filesystem superblock survives
//     and reappears if the same partition table is written again), btrfs's mirror
//     superblocks at 64 MiB and 256 GiB, or any data. It makes the disk look blank to
//     installers and to udev; it is not a sanitisation. Use zero or secure for that.
//   - zero: zeros over the whole device, [0, N), written in ChunkBytes pieces; the context is
//     checked between pieces, so a cancelled wipe stops within one piece.
//   - secure: Options.Eraser.SecureErase (the device's own erase). When Eraser is nil or
//     returns ErrSecureEraseUnsupported, the whole device is zeroed as for zero and the disk
//     is reported with Method "zero-fallback" and a Message saying why secure erase was not
//     used. Any other error from the eraser fails the disk (it is not zeroed instead: a
//     half-run device erase must be looked at, not papered over).
//
// Every write is checked (a short write fails the disk) and the device is fsynced before it is
// closed; a failed sync or close fails the disk too.
//
// # Report
//
// Wipe returns one DiskWipe per non-removable disk, in inventory order. Method is the policy
// applied ("metadata", "zero", "secure"), "zero-fallback", or "none" when nothing could be
// done (the device could not be opened, its name is not a plain kernel name, the context was
// already done, or the policy is unknown). A failure is recorded and the next disk is still
// wiped. The report's Policy is the policy asked for, with "" reported as "metadata", the
// policy actually applied. ReportedAt is left nil: the registry stamps it.
package wipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// MetadataBytes is how much is zeroed at each end of a device by the metadata policy.
const MetadataBytes = 1 << 20

// ChunkBytes is the size of one write when zeroing a whole device.
const ChunkBytes = 4 << 20

// Methods reported in DiskWipe.Method.
const (
	MethodMetadata     = string(metalv1alpha1.WipeMetadata)
	MethodZero         = string(metalv1alpha1.WipeZero)
	MethodSecure       = string(metalv1alpha1.WipeSecure)
	MethodZeroFallback = "zero-fallback"
	MethodNone         = "none"
)

// ErrSecureEraseUnsupported is what a SecureEraser returns (possibly wrapped, with the reason)
// when it cannot erase a device; Wipe then zeroes the device instead.
var ErrSecureEraseUnsupported = errors.New("secure erase is not supported")

// SecureEraser runs a device's own secure erase on dev, the device's path (DevicePath), for the
// inventory's disk. It may return ErrSecureEraseUnsupported.
type SecureEraser interface {
	SecureErase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) error
}

// HostEraser is the SecureEraser for real hosts. For now it never erases: it always returns
// ErrSecureEraseUnsupported, so the secure policy zeroes each device and says so.
//
// Follow-up: NVMe sanitize / format with secure erase settings and ATA SECURITY ERASE UNIT,
// each only when the device says it supports it and (for ATA) is not frozen. This iteration
// deliberately does not shell out to nvme-cli or hdparm.
type HostEraser struct{}

// SecureErase implements SecureEraser.
func (HostEraser) SecureErase(context.Context, string, metalv1alpha1.StorageDevice) error {
	return fmt.Errorf("%w by this metalprobe build (device-native erase is not implemented yet)", ErrSecureEraseUnsupported)
}

// Progress is told, after each write, how many of the bytes to zero on a disk are done.
type Progress func(disk string, done, total int64)

// Options say where the devices are and how to wipe them.
type Options struct {
	// Root is the directory whose dev/ holds the devices: "" or "/" on a real host, a fixture
	// tree (see fixtures.MakeDiskFiles) in tests and in the lab.
	Root string
	// Policy is metadata, zero or secure; empty means metadata.
	Policy metalv1alpha1.WipePolicy
	// Eraser runs device-native secure erase for the secure policy; nil means none available.
	Eraser SecureEraser
	// Progress, when set, is called after every write (from Wipe's goroutine).
	Progress Progress
}

// DevicePath is the device file of a disk: filepath.Join(root, "dev", name), root "" meaning "/".
func DevicePath(root, name string) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "dev", name)
}

// Wipe wipes every non-removable disk of disks as opts.Policy says and reports each one. It
// never stops early on a failed disk; a done ctx fails the disk being wiped and every one after.
func Wipe(ctx context.Context, disks []metalv1alpha1.StorageDevice, opts Options) *metalv1alpha1.WipeReport {
	policy := opts.Policy
	if policy == "" {
		policy = metalv1alpha1.WipeMetadata
	}
	rep := &metalv1alpha1.WipeReport{Policy: policy}
	w := &wiper{opts: opts, policy: policy}
	for _, disk := range disks {
		if disk.Removable {
			continue
		}
		rep.Disks = append(rep.Disks, w.wipe(ctx, disk))
	}
	return rep
}

// Failed returns the disks of a report that were not wiped as asked.
func Failed(rep *metalv1alpha1.WipeReport) []metalv1alpha1.DiskWipe {
	if rep == nil {
		return nil
	}
	var failed []metalv1alpha1.DiskWipe
	for _, d := range rep.Disks {
		if !d.Succeeded {
			failed = append(failed, d)
		}
	}
	return failed
}

type wiper struct {
	opts   Options
	policy metalv1alpha1.WipePolicy
	zeros  []byte // ChunkBytes of zeros, allocated on first use
}

func (w *wiper) wipe(ctx context.Context, disk metalv1alpha1.StorageDevice) metalv1alpha1.DiskWipe {
	res := metalv1alpha1.DiskWipe{Name: disk.Name, SerialNumber: disk.SerialNumber, Method: MethodNone}
	switch w.policy {
	case metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure:
	default:
		res.Message = fmt.Sprintf("not wiped: unknown wipe policy %q (want metadata, zero or secure)", w.policy)
		return res
	}
	if err := ctx.Err(); err != nil {
		res.Message = "not wiped: " + err.Error()
		return res
	}
	if !plainName(disk.Name) {
		res.Message = fmt.Sprintf("not wiped: %q is not a kernel device name", disk.Name)
		return res
	}
	dev := DevicePath(w.opts.Root, disk.Name)
	// Write only, never O_CREATE: a device that is not there must fail, not become a file.
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		res.Message = "not wiped: opening device: " + err.Error()
		return res
	}
	res.Method = string(w.policy)
	msg, err := w.apply(ctx, f, dev, disk, &res)
	if err == nil {
		if err = f.Sync(); err != nil {
			err = fmt.Errorf("syncing %s: %w", dev, err)
		}
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", dev, cerr)
	}
	if err != nil {
		res.Message = joinMessage(msg, "failed: "+err.Error())
		return res
	}
	res.Succeeded = true
	res.Message = msg
	return res
}

// apply runs the policy on an open device. It sets res.Method when secure erase falls back to
// zero, and returns a message for the report (what was done, or why secure erase fell back).
func (w *wiper) apply(ctx context.Context, f *os.File, dev string, disk metalv1alpha1.StorageDevice, res *metalv1alpha1.DiskWipe) (string, error) {
	var fallback string
	if w.policy == metalv1alpha1.WipeSecure {
		why := "no secure eraser is available"
		if w.opts.Eraser != nil {
			err := w.opts.Eraser.SecureErase(ctx, dev, disk)
			if err == nil {
				return "erased by the device's secure erase", nil
			}
			if !errors.Is(err, ErrSecureEraseUnsupported) {
				return "", fmt.Errorf("secure erase: %w", err)
			}
			why = err.Error()
		}
		res.Method = MethodZeroFallback
		fallback = "secure erase unavailable (" + why + "); zeroed the whole device instead"
	}

	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fallback, fmt.Errorf("finding the size of %s: %w", dev, err)
	}
	ranges := [][2]int64{{0, size}}
	if w.policy == metalv1alpha1.WipeMetadata {
		ranges = MetadataRanges(size)
	}
	var total, done int64
	for _, r := range ranges {
		total += r[1] - r[0]
	}
	for _, r := range ranges {
		if err := w.zero(ctx, f, disk.Name, r[0], r[1], &done, total); err != nil {
			return fallback, fmt.Errorf("after zeroing %d of %d bytes: %w", done, total, err)
		}
	}
	if fallback != "" {
		return fallback, nil
	}
	return describe(ranges, size), nil
}

// MetadataRanges are the [start, end) byte ranges the metadata policy zeroes on a device of
// size bytes: the first and last MetadataBytes, or the whole device when it is no larger than
// twice that.
func MetadataRanges(size int64) [][2]int64 {
	if size <= 2*MetadataBytes {
		return [][2]int64{{0, size}}
	}
	return [][2]int64{{0, MetadataBytes}, {size - MetadataBytes, size}}
}

// zero writes zeros over [start, end) in ChunkBytes pieces, checking ctx before each.
func (w *wiper) zero(ctx context.Context, f *os.File, name string, start, end int64, done *int64, total int64) error {
	if w.zeros == nil {
		w.zeros = make([]byte, ChunkBytes)
	}
	for off := start; off < end; {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		n := min(end-off, ChunkBytes)
		wrote, err := f.WriteAt(w.zeros[:n], off)
		if err != nil {
			return fmt.Errorf("writing at byte %d: %w", off+int64(wrote), err)
		}
		if int64(wrote) != n {
			return fmt.Errorf("writing at byte %d: %w", off+int64(wrote), io.ErrShortWrite)
		}
		off += n
		*done += n
		if w.opts.Progress != nil {
			w.opts.Progress(name, *done, total)
		}
	}
	return nil
}

func describe(ranges [][2]int64, size int64) string {
	if len(ranges) == 1 {
		return fmt.Sprintf("zeroed all %d bytes", size)
	}
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = fmt.Sprintf("[%d, %d)", r[0], r[1])
	}
	return fmt.Sprintf("zeroed bytes %s of %d", strings.Join(parts, " and "), size)
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// plainName accepts a kernel device name: not empty, not "." or "..", no path separator.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}
