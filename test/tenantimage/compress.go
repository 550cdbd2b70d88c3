package tenantimage

// The disk is served compressed three ways, each of which the install code reads (it is smaller
// than the disk.raw only by the zeros: the kernel and the initramfs are compressed already). Each
// compressor is deterministic for a given library version (go.sum pins them, the source
// digest names them): gzip without a name or time, zstd single-threaded, xz with a fixed
// configuration.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"github.com/ulikunitz/xz/lzma"
)

// compressAll compresses the disk into disk.raw.gz, .zst and .xz, in parallel.
func compressAll(disk []byte) ([]output, error) {
	compressors := []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{{DiskGzFile, gzipBytes}, {DiskZstFile, zstdBytes}, {DiskXzFile, xzBytes}}
	out := make([]output, len(compressors))
	errs := make([]error, len(compressors))
	var wg sync.WaitGroup
	for i, c := range compressors {
		wg.Go(func() {
			data, err := c.fn(disk)
			if err != nil {
				errs[i] = fmt.Errorf("compressing %s: %w", c.name, err)
			}
			out[i] = output{c.name, data}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

func gzipBytes(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression) // the header has no name and time 0
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(data); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func zstdBytes(data []byte) ([]byte, error) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedBetterCompression), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer func() { _ = enc.Close() }()
	return enc.EncodeAll(data, nil), nil
}

func xzBytes(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	// A 256 KiB dictionary: the disk is mostly zeros and already compressed files (the kernel,
	// the gzip initramfs), which a larger one does not shrink (8 MiB: 0.02 % smaller) but
	// makes six times slower (16 s instead of 2.5 s).
	xw, err := xz.WriterConfig{DictCap: 256 << 10, Matcher: lzma.HashTable4, CheckSum: xz.CRC64}.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := xw.Write(data); err != nil {
		return nil, err
	}
	if err := xw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
