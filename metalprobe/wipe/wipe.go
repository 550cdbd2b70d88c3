// Package wipe erases a released server's disks before the server goes back to the pool, and
// says, disk by disk, what was done.
//
// Every disk of the inventory is opened as <Root>/dev/<name> (DevicePath), write only and never
// created: a missing device is a failure, not a new file. Its size is where Seek(0,
// io.SeekEnd) lands, which works for block devices and for the regular files that stand in for
// them under a fixture root. Removable disks (an internal SD module, a USB stick) are disks
// like the others: a tenant's data on them must go too. Skipped, and not listed in the report
// (Skip), are only optical drives (sr<N>: the probe's own virtual-media CD among them,
// read-only to the host) and the devices an admin excluded (Options.Exclusions, the Server's
// spec.wipeExclusions). A drive with no medium (an empty card reader) fails to open and is
// reported so. The operator judges the report against its own record of the server's disks,
// requiring all but these and those recorded with no medium (metalv1alpha1.NoDataOn), so a
// disk skipped for any other reason fails the wipe.
//
// # Policies
//
// For a device of N bytes, with M = MetadataBytes (1 MiB = 1048576 bytes):
//
//   - erase (the default when Options.Policy is empty): nothing readable is left. The device's
//     own erase where it has one (Options.Eraser, as the secure policy runs it), read back
//     (VerifyRanges): Method "secure". Where it has none (Eraser nil, a regular file, a device
//     that supports none: ATA SECURITY ERASE UNIT and SCSI SANITIZE are not implemented, see
//     HostEraser), where it failed, or where it read back data, zeros over the whole device as
//     the zero policy writes them, then read back: Method "zero". The Message says which ran,
//     why, and what was read back; a zero-fill or read-back that fails fails the disk.
//   - metadata (an explicit opt-in: it leaves the data readable): zeros over the byte ranges
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
//     installers and to udev; it is not a sanitisation. Use erase, zero or secure for that.
//   - zero: zeros over the whole device, [0, N), written in ChunkBytes pieces; the context is
//     checked between pieces, so a cancelled wipe stops within one piece.
//   - secure: a device-level erase, verified by reading the device back, or a failure that
//     names the disk. Nothing is ever zero-filled by this policy: a zero-fill is the zero
//     policy, and it is never reported as secure. Options.Eraser.SecureErase erases the device
//     (HostEraser on a real host: NVMe Sanitize or Format NVM with Secure Erase Settings,
//     else the kernel's BLKSECDISCARD; see HostEraser). When it succeeds the device is read
//     back (VerifyRanges, after fsync, POSIX_FADV_DONTNEED and, on a block device, BLKFLSBUF,
//     so that the reads reach the device and not the page cache): every byte read must be
//     zero, else the disk fails with "read back non-zero data at offset N".
//
// The secure policy's outcomes, per disk:
//
//   - Method "secure", Succeeded: the device erased itself and read back as zeros. The
//     Message says which erase ran and what was read back.
//   - Method "none", not Succeeded: no device-level erase exists for it (Eraser nil, a
//     regular file, a device that supports none of the above). Nothing was written. The
//     Message names the disk and says what was tried: "not wiped: vda: no device-level
//     secure erase: not NVMe; BLKSECDISCARD: operation not supported".
//   - Method "secure", not Succeeded: the erase was attempted and failed (or was interrupted),
//     or it "succeeded" but the read-back found data or could not read. The Message names the
//     disk and the failure.
//
// Every write is checked (a short write fails the disk) and the device is fsynced before it is
// closed; a failed sync or close fails the disk too.
//
// # Report
//
// Wipe returns one DiskWipe per disk it does not Skip, in inventory order. Method is the policy
// applied ("metadata", "zero", "secure"), or "none" when nothing could be done (the device
// could not be opened, its name is not a plain kernel name, the context was already done, the
// policy is unknown, or secure was asked for and the device has no device-level erase); the
// erase policy reports "secure" or "zero", whichever ran.
// "zero-fallback" is never reported any more (older probes reported it for a secure wipe that
// zero-filled instead; the API keeps the value so that their reports still parse). A failure
// is recorded and the next disk is still wiped. The report's Policy is the policy asked for,
// with "" reported as "erase", the policy actually applied. ReportedAt is left nil: the
// registry stamps it.
package wipe

import (
	"context"
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
	MethodMetadata = string(metalv1alpha1.WipeMetadata)
	MethodZero     = string(metalv1alpha1.WipeZero)
	MethodSecure   = string(metalv1alpha1.WipeSecure)
	MethodNone     = "none"
)

// Progress is told, after each write, how many of the bytes to zero on a disk are done.
type Progress func(disk string, done, total int64)

// Options say where the devices are and how to wipe them.
type Options struct {
	// Root is the directory whose dev/ holds the devices: "" or "/" on a real host, a fixture
	// tree (see fixtures.MakeDiskFiles) in tests and in the lab.
	Root string
	// Policy is erase, metadata, zero or secure; empty means erase
	// (metalv1alpha1.DefaultWipePolicy).
	Policy metalv1alpha1.WipePolicy
	// Eraser runs the device-level erase of the secure and erase policies (HostEraser on a
	// real host); nil means none is available: the secure policy then fails every disk, the
	// erase policy zero-fills it.
	Eraser SecureEraser
	// VerifySeed, when set, seeds the read-back's random windows (tests); nil draws a seed
	// from crypto/rand for every read-back.
	VerifySeed *[2]uint64
	// Progress, when set, is called after every write (from Wipe's goroutine).
	Progress Progress
	// Exclusions are devices not to wipe, each with an admin's reason (spec.wipeExclusions).
	Exclusions []metalv1alpha1.WipeExclusion
}

// Skip says why a disk is not wiped, or "" when it is: it is an optical drive, or excluded.
func Skip(disk metalv1alpha1.StorageDevice, exclusions []metalv1alpha1.WipeExclusion) string {
	if metalv1alpha1.OpticalDrive(disk) {
		return "optical drive"
	}
	if ex := metalv1alpha1.ExclusionOf(exclusions, disk); ex != nil {
		return "excluded: " + ex.Reason
	}
	return ""
}

// DevicePath is the device file of a disk: filepath.Join(root, "dev", name), root "" meaning "/".
func DevicePath(root, name string) string {
	if root == "" {
		root = "/"
	}
	return filepath.Join(root, "dev", name)
}

// Wipe wipes every disk of disks that it does not Skip as opts.Policy says and reports each one.
// It never stops early on a failed disk; a done ctx fails the disk being wiped and every one
// after.
func Wipe(ctx context.Context, disks []metalv1alpha1.StorageDevice, opts Options) *metalv1alpha1.WipeReport {
	policy := opts.Policy
	if policy == "" {
		policy = metalv1alpha1.DefaultWipePolicy
	}
	rep := &metalv1alpha1.WipeReport{Policy: policy}
	w := &wiper{opts: opts, policy: policy}
	for _, disk := range disks {
		if Skip(disk, opts.Exclusions) != "" {
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
	case metalv1alpha1.WipeErase, metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure:
	default:
		res.Message = fmt.Sprintf("not wiped: unknown wipe policy %q (want erase, metadata, zero or secure)", w.policy)
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
	if w.policy == metalv1alpha1.WipeSecure || w.policy == metalv1alpha1.WipeErase {
		// The device was there and writable; the eraser opens it as it needs.
		if err := f.Close(); err != nil {
			res.Message = "not wiped: closing device: " + err.Error()
			return res
		}
		if w.policy == metalv1alpha1.WipeErase {
			return w.erase(ctx, dev, disk, res)
		}
		return w.secure(ctx, dev, disk, res)
	}
	res.Method = string(w.policy)
	msg, err := w.apply(ctx, f, dev, disk)
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

// apply runs the metadata or zero policy on an open device and returns a message for the
// report (what was zeroed).
func (w *wiper) apply(ctx context.Context, f *os.File, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("finding the size of %s: %w", dev, err)
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
			return "", fmt.Errorf("after zeroing %d of %d bytes: %w", done, total, err)
		}
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
