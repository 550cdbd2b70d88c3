// Package install is metalprobe's provision mode: it writes a claim's OS image to one disk of
// the server, verifies it, adds a config drive carrying the claim's user data, and says in an
// InstallReport what it did or why it did not.
//
// # The image
//
// Install.Image is either an http(s):// URL or an oci:// reference.
//
//   - http(s)://: one GET (Accept-Encoding: identity, so that the bytes hashed are the file's).
//     Connecting and receiving the response headers are bounded by HeaderTimeout per request,
//     the body is not bounded as a whole, only by StallTimeout without any byte arriving.
//     Connection errors, 5xx and 429 answers are retried (HTTPAttempts requests in all, with a
//     doubling wait) as long as no byte of the body has been used; once the body streams, a
//     broken connection fails the install. Any other status (404, 403, …) fails at once with
//     ImageUnreachable naming the URL (its query string, which may hold a signature, is left
//     out of every message) and the status.
//   - oci://registry/repository:tag or oci://registry/repository@sha256:…: the manifest is pulled
//     with go-containerregistry (remote.Image, anonymous) and must list exactly one layer, the
//     disk image; its compressed blob (layer.Compressed, that is the blob as stored) is streamed.
//     go-containerregistry verifies the blob's size and digest against the manifest when the
//     stream ends, and this package computes the digest itself as well: a blob that does not
//     match fails the install with ChecksumMismatch. When Install.ImageChecksum is given it must
//     equal the layer's digest, which is checked before anything is written. The layer's media
//     type is not interpreted (the format is found from the bytes, as for http); the
//     recommended ones are application/vnd.ironfleet.disk.image.raw for an uncompressed image
//     and application/vnd.ironfleet.disk.image.raw+gzip, +zstd or +xz for a compressed one. The
//     registry is reached over HTTPS; go-containerregistry falls back to plain HTTP only for
//     hosts it considers local (loopback, localhost, RFC 1918 addresses, *.local), after trying
//     HTTPS first, and references to a loopback registry are marked insecure explicitly.
//
// Install.ImageChecksum (sha256:<hex> or sha512:<hex>) is compared with the digest of the
// image as served, the compressed bytes, computed while they stream. A mismatch is only known
// when the stream has ended, so it fails the install after the image was written, and the disk
// is wiped again (see Failures).
//
// # Formats
//
// The served stream's first bytes say what it is: gzip (1f 8b), zstd (28 b5 2f fd, or a
// skippable frame as pzstd writes), or xz (fd 37 7a 58 5a 00) are decompressed while streaming
// (klauspost/compress's gzip, which is several times faster than the standard library's, and
// its zstd; ulikunitz/xz, the one pure-Go xz decoder); anything else is taken as uncompressed.
// The decompressed start is then checked for formats that are not raw disk images: qcow2,
// VMDK, VHDX, VDI, VHD, ISO 9660, a tar archive, bzip2 or zip, or a second layer of
// compression. Those fail with ImageFormatUnsupported before any byte is written, with a
// message saying what the image is and how to convert it (qemu-img convert -O raw). Everything
// else is written as it is.
//
// The image is never held in memory: it is read in ChunkBytes pieces and each is written
// before the next is read. Buffered writes and the kernel's writeback already overlap the
// network and the disk, so there is no reader goroutine.
//
// # The disk
//
// SelectDisk chooses it from the inventory: with RootDeviceHints, the one non-removable disk
// that matches every hint given (Metal3's semantics); without, the smallest non-removable disk
// that holds the image (when the raw size is known before writing: an uncompressed image whose
// size was served).
//
// # Writing
//
// The disk is opened as <Root>/dev/<name> (wipe.DevicePath), write only and never created; a
// block device is opened O_EXCL, so a disk that is mounted or held by another process is
// refused. Its first and last MiB are zeroed first (wipe.MetadataRanges), so that no GPT
// backup or config drive of an earlier install survives at the end of a disk larger than the
// image. The image is then written from byte 0; writing past the end of the device fails with
// ImageTooLarge. The bytes written are hashed (sha256), the device is fsynced, its page cache
// dropped (fadvise DONTNEED; BLKFLSBUF on a block device) and the bytes read back and hashed
// again: a difference fails with VerifyFailed. Then configdrive.Write adds the config drive
// partition (a failure is ConfigDriveFailed), configdrive.Read reads it back and the user data
// must be the same bytes, and the device is fsynced again.
//
// Under a fixture root the disks are regular files of the disk's size; everything is done the
// same way except the block-device ioctls.
//
// # Failures
//
// Run never panics (a panic is reported as WriteFailed). Every failure has a reason
// (metalv1alpha1.InstallReason*) and a message. Once the first byte was written to the disk,
// a failure wipes the disk again with Options.WipePolicy (erase when empty) through
// metalprobe/wipe, and the report's WipedAfterFailure says whether that worked. A cancelled
// context (the probe was signalled) fails with InstallInterrupted; the disk is then wiped with
// the metadata policy, which takes a moment, whatever WipePolicy says.
package install

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// ChunkBytes is the size of one read from the image and one write to the disk.
const ChunkBytes = 4 << 20

// Media types of disk-image OCI artifacts (the layer's type is documentation: the format is
// found from the bytes).
const (
	MediaTypeRaw     = "application/vnd.ironfleet.disk.image.raw"
	MediaTypeRawGzip = MediaTypeRaw + "+gzip"
	MediaTypeRawZstd = MediaTypeRaw + "+zstd"
	MediaTypeRawXz   = MediaTypeRaw + "+xz"
	MediaTypeConfig  = "application/vnd.ironfleet.disk.image.config.v1+json"
)

// Progress is told how many bytes of the raw image have been written, and how many there are
// in all (0 when that is not known before the end: a compressed image, or no Content-Length).
// It is called from Run's goroutine at most every ProgressInterval, or when another tenth of
// the total is written, and once at the end of the image.
type Progress func(written, total int64)

// ProgressInterval is the least time between two Progress calls (when the total is unknown or
// the tenths come faster).
const ProgressInterval = 2 * time.Second

// Options say what to install where.
type Options struct {
	// Root is the directory whose dev/ holds the disks: "" or "/" on a real host, a fixture
	// tree in tests and in the lab.
	Root string
	// Install is the image, its checksum, the hints and the config drive's meta data.
	Install ignition.Install
	// UserData is the config drive's openstack/latest/user_data, byte for byte: the claim's
	// ignition, which the caller fetched from the registry. Nil writes none.
	UserData []byte
	// Disks is the inventory's storage; the disk is chosen among them.
	Disks []metalv1alpha1.StorageDevice
	// WipePolicy is how the chosen disk is wiped again after a failed install; empty means
	// erase (metalv1alpha1.DefaultWipePolicy).
	WipePolicy metalv1alpha1.WipePolicy
	// Eraser runs the device-level erase when WipePolicy is secure or erase (wipe.HostEraser
	// on a real host, nil under a fixture root).
	Eraser wipe.SecureEraser
	// HTTPClient fetches the image (http and oci). Its Timeout, if any, is not used: the
	// download is bounded by HeaderTimeout and StallTimeout instead. Nil means
	// http.DefaultClient's transport.
	HTTPClient *http.Client
	// Progress, when set, follows the write.
	Progress Progress
	// Log, when set, receives one line per step ("install: …").
	Log io.Writer
}

// Error is a failed install: Reason is one of the metalv1alpha1.InstallReason* constants.
type Error struct {
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Reason + ": " + e.Message }

func newError(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// maxMessageBytes is the API's bound on InstallReport.Message and Image.
const maxMessageBytes = 2048

// Run installs opts.Install on one of opts.Disks and reports what it did. It never panics and
// always returns a report.
func Run(ctx context.Context, opts Options) (rep *metalv1alpha1.InstallReport) {
	rep = &metalv1alpha1.InstallReport{Image: clip(opts.Install.Image, maxMessageBytes), ImageChecksum: opts.Install.ImageChecksum}
	in := &installer{opts: opts, rep: rep}
	defer func() {
		if r := recover(); r != nil {
			in.finishAfterPanic(ctx, r)
		}
	}()
	in.finish(ctx, in.run(ctx))
	return rep
}

type installer struct {
	opts Options
	rep  *metalv1alpha1.InstallReport
	disk metalv1alpha1.StorageDevice
	// touched is set once anything may have been written to the disk.
	touched bool
}

func (in *installer) logf(format string, args ...any) {
	if in.opts.Log != nil {
		_, _ = fmt.Fprintf(in.opts.Log, "install: "+format+"\n", args...)
	}
}

// finish fills the report's outcome and, after a failure that touched the disk, wipes it again.
func (in *installer) finish(ctx context.Context, err error) {
	if err == nil {
		in.rep.Succeeded = true
		in.rep.Reason = metalv1alpha1.InstallReasonInstalled
		in.rep.Message = clip(fmt.Sprintf("wrote %d bytes to %s, verified %s; config drive on %s", in.rep.Bytes, in.rep.Disk, in.rep.WrittenDigest, in.rep.ConfigDrive), maxMessageBytes)
		in.logf("installed: %s", in.rep.Message)
		return
	}
	var ie *Error
	if !errors.As(err, &ie) {
		ie = &Error{Reason: metalv1alpha1.InstallReasonWriteFailed, Message: err.Error()}
	}
	if ctx.Err() != nil && ie.Reason != metalv1alpha1.InstallReasonInstallInterrupted {
		// Whatever broke last, the probe was stopped: say so, and keep what broke.
		ie = newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted (%v): %s", context.Cause(ctx), ie.Message)
	}
	in.rep.Succeeded = false
	in.rep.Reason = ie.Reason
	msg := ie.Message
	if in.touched {
		in.logf("failed (%s): %s", ie.Reason, msg)
		msg += "; " + in.wipeAgain(ctx, ie.Reason == metalv1alpha1.InstallReasonInstallInterrupted)
	}
	in.rep.Message = clip(msg, maxMessageBytes)
	in.logf("FAILED (%s): %s", ie.Reason, in.rep.Message)
}

func (in *installer) finishAfterPanic(ctx context.Context, r any) {
	defer func() {
		if r2 := recover(); r2 != nil {
			in.rep.Succeeded = false
			in.rep.Reason = metalv1alpha1.InstallReasonWriteFailed
			in.rep.Message = clip(fmt.Sprintf("internal error: %v (and again while cleaning up: %v)", r, r2), maxMessageBytes)
		}
	}()
	in.finish(ctx, newError(metalv1alpha1.InstallReasonWriteFailed, "internal error: %v", r))
}

// wipeAgain wipes the chosen disk after a failure and says how that went, for the message.
func (in *installer) wipeAgain(ctx context.Context, interrupted bool) string {
	policy := in.opts.WipePolicy
	if policy == "" {
		policy = metalv1alpha1.DefaultWipePolicy
	}
	how := string(policy)
	if interrupted {
		// The probe is being stopped: clear the partition tables, which takes a moment and must
		// not be cut short, rather than start a long zeroing.
		ctx = context.WithoutCancel(ctx)
		if policy != metalv1alpha1.WipeMetadata {
			how = fmt.Sprintf("metadata instead of %s: interrupted", policy)
			policy = metalv1alpha1.WipeMetadata
		}
	}
	disk := in.disk
	in.logf("wiping %s again (%s)", disk.Name, how)
	res := wipe.Wipe(ctx, []metalv1alpha1.StorageDevice{disk}, wipe.Options{Root: in.opts.Root, Policy: policy, Eraser: in.opts.Eraser})
	if len(res.Disks) != 1 || !res.Disks[0].Succeeded {
		why := "no result"
		if len(res.Disks) == 1 {
			why = res.Disks[0].Message
		}
		in.logf("wiping %s again FAILED: %s", disk.Name, why)
		return fmt.Sprintf("wiping %s again (%s) failed: %s", disk.Name, how, why)
	}
	in.rep.WipedAfterFailure = true
	in.logf("wiped %s again (%s): %s", disk.Name, how, res.Disks[0].Message)
	return fmt.Sprintf("%s was wiped again (%s)", disk.Name, how)
}

// clip shortens s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
