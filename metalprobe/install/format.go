package install

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// sniffBytes is how much of a stream the format checks look at: ISO 9660's identifier is at
// 0x8001.
const sniffBytes = 0x8001 + 5

// Compressions the image may be served with.
const (
	compressionGzip = "gzip"
	compressionZstd = "zstd"
	compressionXZ   = "xz"
)

// compressionOf says which supported compression a stream starting with head uses ("" for
// none).
func compressionOf(head []byte) string {
	switch {
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return compressionGzip
	case bytes.HasPrefix(head, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return compressionZstd
	case len(head) >= 4 && head[0]&0xf0 == 0x50 && bytes.Equal(head[1:4], []byte{0x2a, 0x4d, 0x18}):
		return compressionZstd // a skippable frame first, as pzstd writes
	case bytes.HasPrefix(head, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}):
		return compressionXZ
	}
	return ""
}

const convertHint = "convert it to raw (qemu-img convert -O raw)"

// unsupportedFormat says what a (decompressed) stream starting with head is when it is not a raw
// disk image, and how to make one of it; "" when it may be one.
func unsupportedFormat(head []byte) string {
	at := func(off int, magic string) bool {
		return len(head) >= off+len(magic) && string(head[off:off+len(magic)]) == magic
	}
	switch {
	case at(0, "QFI\xfb"):
		return "a qcow2 image, not a raw disk image: " + convertHint
	case at(0, "KDMV"), at(0, "# Disk DescriptorFile"):
		return "a VMDK image, not a raw disk image: " + convertHint
	case at(0, "vhdxfile"):
		return "a VHDX image, not a raw disk image: " + convertHint
	case at(0x40, "\x7f\x10\xda\xbe"):
		return "a VDI image, not a raw disk image: " + convertHint
	case at(0, "conectix"):
		return "a VHD image, not a raw disk image: " + convertHint
	case at(0x8001, "CD001"):
		return "an ISO 9660 CD image (an installer, not an installed disk), not a raw disk image: install it in a VM and " + convertHint + " that VM's disk"
	case at(257, "ustar"):
		return "a tar archive (a container image layer?), not a raw disk image: push the disk image itself, or " + convertHint
	case at(0, "BZh") && len(head) > 3 && head[3] >= '1' && head[3] <= '9':
		return "bzip2-compressed, which is not supported: recompress it with gzip, zstd or xz"
	case at(0, "PK\x03\x04"):
		return "a zip archive, not a raw disk image: unpack it and serve the raw image (gzip, zstd or xz compression are fine)"
	case compressionOf(head) != "":
		return fmt.Sprintf("compressed twice (%s inside), not a raw disk image: compress the raw image once", compressionOf(head))
	}
	return ""
}

// image is the raw image's bytes, decompressed when the source is compressed.
type image struct {
	io.Reader
	compression string // "" for none
	rawSize     int64  // the raw image's size when known before writing, else -1
	closers     []func()
}

func (img *image) Close() {
	for _, c := range img.closers {
		c()
	}
}

// openImage checks the source's format and returns the raw image stream. Nothing it refuses
// has been written anywhere.
func openImage(ctx context.Context, src *source) (*image, error) {
	served := bufio.NewReaderSize(src, 64<<10)
	head, err := peek(served, sniffBytes)
	if err != nil {
		return nil, streamFailure(ctx, src, "", err)
	}
	img := &image{rawSize: -1}
	var raw io.Reader = served
	switch img.compression = compressionOf(head); img.compression {
	case compressionGzip:
		zr, err := gzip.NewReader(served)
		if err != nil {
			return nil, streamFailure(ctx, src, img.compression, err)
		}
		img.closers = append(img.closers, func() { _ = zr.Close() })
		raw = zr
	case compressionZstd:
		// One decoder, no read-ahead goroutine: the source (and its hash) is read from this
		// goroutine only, and a single zstd stream decodes faster than disks write.
		zr, err := zstd.NewReader(served, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, streamFailure(ctx, src, img.compression, err)
		}
		img.closers = append(img.closers, zr.Close)
		raw = zr
	case compressionXZ:
		xr, err := xz.NewReader(served)
		if err != nil {
			return nil, streamFailure(ctx, src, img.compression, err)
		}
		raw = xr
	default:
		img.rawSize = src.size
	}
	if img.compression != "" {
		br := bufio.NewReaderSize(raw, 64<<10)
		if head, err = peek(br, sniffBytes); err != nil {
			return nil, streamFailure(ctx, src, img.compression, err)
		}
		raw = br
	}
	if len(head) == 0 {
		return nil, newError(metalv1alpha1.InstallReasonFormatUnsupported, "%s is empty", src.desc)
	}
	if what := unsupportedFormat(head); what != "" {
		if img.compression != "" {
			what = img.compression + "-compressed " + what
		}
		return nil, newError(metalv1alpha1.InstallReasonFormatUnsupported, "%s is %s", src.desc, what)
	}
	img.Reader = raw
	return img, nil
}

// peek returns up to n bytes from the start of r without consuming them; a stream shorter than
// n is not an error.
func peek(r *bufio.Reader, n int) ([]byte, error) {
	b, err := r.Peek(n)
	if err == io.EOF || err == bufio.ErrBufferFull {
		err = nil
	}
	return b, err
}

// streamFailure explains a failed read of the image: the probe was stopped, the download
// broke, the served bytes are not what the checksum says (read to their end to know it), or
// they are not the compressed data they start like.
func streamFailure(ctx context.Context, src *source, compression string, err error) *Error {
	if ctx.Err() != nil {
		return newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted while reading %s: %v", src.desc, context.Cause(ctx))
	}
	if src.err != nil {
		return src.err
	}
	if compression == "" {
		return newError(metalv1alpha1.InstallReasonImageUnreachable, "reading %s after %d bytes: %v", src.desc, src.read, err)
	}
	// The decompressor refused the data. Damaged in transit or at rest, it does not match the
	// checksum either, which says more: read the rest to know.
	if derr := src.drain(ctx); derr != nil {
		return derr
	}
	if cerr := src.check(); cerr != nil {
		return cerr
	}
	return newError(metalv1alpha1.InstallReasonFormatUnsupported, "%s is not valid %s data (%d bytes served): %v", src.desc, compression, src.read, err)
}
