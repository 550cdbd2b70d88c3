package install

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// writer writes the image to one device and reads it back.
type writer struct {
	in       *installer
	dev      string
	block    bool // dev is a block device (not a fixture's regular file)
	written  int64
	progress *progressGate
}

// write zeroes the device's first and last MiB, then streams the image onto it from byte 0.
// It returns the sha256 of the bytes written.
func (w *writer) write(ctx context.Context, img *image, src *source) (string, error) {
	fi, err := os.Stat(w.dev)
	if err != nil {
		return "", newError(metalv1alpha1.InstallReasonWriteFailed, "opening %s: %v", w.dev, err)
	}
	w.block = isBlockDevice(fi)
	flags := os.O_WRONLY // never O_CREATE: a device that is not there must fail, not become a file
	if w.block {
		flags |= os.O_EXCL // refused while mounted or held (EBUSY)
	}
	f, err := os.OpenFile(w.dev, flags, 0)
	if err != nil {
		if errors.Is(err, syscall.EBUSY) {
			return "", newError(metalv1alpha1.InstallReasonWriteFailed, "%s is in use (mounted, or held by another process): %v", w.dev, err)
		}
		return "", newError(metalv1alpha1.InstallReasonWriteFailed, "opening %s: %v", w.dev, err)
	}
	defer func() { _ = f.Close() }()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", newError(metalv1alpha1.InstallReasonWriteFailed, "finding the size of %s: %v", w.dev, err)
	}
	w.in.logf("writing to %s (%d bytes, serial %q)", w.dev, size, w.in.disk.SerialNumber)
	if img.rawSize > size {
		return "", newError(metalv1alpha1.InstallReasonImageTooLarge, "the image is %d bytes, larger than %s (%d bytes)", img.rawSize, w.in.disk.Name, size)
	}
	total := max(img.rawSize, 0)

	buf := make([]byte, ChunkBytes)
	w.in.touched = true
	// Clear the old partition tables and what an earlier install left at the end of the disk.
	clear(buf)
	for _, r := range wipe.MetadataRanges(size) {
		for off := r[0]; off < r[1]; {
			n := min(r[1]-off, int64(len(buf)))
			if err := writeAt(f, buf[:n], off); err != nil {
				return "", newError(metalv1alpha1.InstallReasonWriteFailed, "clearing %s: %v", w.dev, err)
			}
			off += n
		}
	}

	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return "", newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted after writing %d bytes: %v", w.written, context.Cause(ctx))
		}
		n, rerr := fill(img, buf)
		if n > 0 {
			if w.written+int64(n) > size {
				return "", newError(metalv1alpha1.InstallReasonImageTooLarge, "the image is larger than %s (%d bytes): more than %d bytes", w.in.disk.Name, size, w.written+int64(n))
			}
			if err := writeAt(f, buf[:n], w.written); err != nil {
				return "", newError(metalv1alpha1.InstallReasonWriteFailed, "writing %s: %v", w.dev, err)
			}
			h.Write(buf[:n])
			w.written += int64(n)
			w.progress.update(w.written, total, false)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return "", streamFailure(ctx, src, img.compression, rerr)
		}
	}
	if w.written == 0 {
		return "", newError(metalv1alpha1.InstallReasonFormatUnsupported, "%s holds no data once decompressed", src.desc)
	}
	w.progress.update(w.written, total, true)
	// Trailing bytes (after the compressed stream, say) are served bytes too: the checksum
	// covers them.
	if err := src.drain(ctx); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", newError(metalv1alpha1.InstallReasonWriteFailed, "syncing %s: %v", w.dev, err)
	}
	if err := f.Close(); err != nil {
		return "", newError(metalv1alpha1.InstallReasonWriteFailed, "closing %s: %v", w.dev, err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// verify reads the written bytes back from the device, past its page cache, and returns their
// sha256.
func (w *writer) verify(ctx context.Context) (string, error) {
	if err := w.syncAndDrop(); err != nil {
		return "", newError(metalv1alpha1.InstallReasonVerifyFailed, "dropping the cache of %s: %v", w.dev, err)
	}
	f, err := os.Open(w.dev)
	if err != nil {
		return "", newError(metalv1alpha1.InstallReasonVerifyFailed, "opening %s to read it back: %v", w.dev, err)
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	buf := make([]byte, ChunkBytes)
	for off := int64(0); off < w.written; {
		if err := ctx.Err(); err != nil {
			return "", newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while reading %s back: %v", w.dev, context.Cause(ctx))
		}
		n := int(min(int64(len(buf)), w.written-off))
		got, err := f.ReadAt(buf[:n], off)
		h.Write(buf[:got])
		off += int64(got)
		if err != nil && !(err == io.EOF && got == n) {
			return "", newError(metalv1alpha1.InstallReasonVerifyFailed, "reading %s back at byte %d of %d: %v", w.dev, off, w.written, err)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// syncAndDrop fsyncs the device and drops its cached pages, so that the next reads reach it.
func (w *writer) syncAndDrop() error {
	f, err := os.Open(w.dev)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Sync(); err != nil {
		return err
	}
	if err := dropCache(f, w.block); err != nil {
		w.in.logf("warning: could not drop the page cache of %s (the read-back may come from memory): %v", w.dev, err)
	}
	return nil
}

// fill reads into buf until it is full or the stream ends; err is io.EOF only at the end of
// the stream (a truncated stream's io.ErrUnexpectedEOF stays an error).
func fill(r io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func writeAt(f *os.File, b []byte, off int64) error {
	n, err := f.WriteAt(b, off)
	if err != nil {
		return fmt.Errorf("at byte %d: %w", off+int64(n), err)
	}
	if n != len(b) {
		return fmt.Errorf("at byte %d: %w", off+int64(n), io.ErrShortWrite)
	}
	return nil
}

// progressGate calls a Progress at most every ProgressInterval or tenth of the total, and at
// the end.
type progressGate struct {
	fn          Progress
	now         func() time.Time
	last        time.Time // of the last call, or of the start
	nextStep    int64     // the next tenth of the total that is reported when reached
	lastWritten int64     // at the last call; -1 before the first
}

func newProgressGate(fn Progress) *progressGate {
	return &progressGate{fn: fn, now: time.Now, last: time.Now(), nextStep: 1, lastWritten: -1}
}

func (g *progressGate) update(written, total int64, final bool) {
	if g.fn == nil || written == g.lastWritten {
		return
	}
	now := g.now()
	step := total > 0 && written*10 >= g.nextStep*total
	if !final && !step && now.Sub(g.last) < ProgressInterval {
		return
	}
	if total > 0 {
		g.nextStep = written*10/total + 1
	}
	g.last, g.lastWritten = now, written
	g.fn(written, total)
}
