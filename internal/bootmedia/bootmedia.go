// Package bootmedia makes the probe's per-boot ISO for virtual-media boots: the template ISO
// that metalprobe/image builds (probe.iso, bootable on BIOS through isolinux and on UEFI
// through GRUB, with the probe's kernel and initramfs) carries a zero-filled embed area, the
// file /ignition.img that both boot loaders load as a second initrd. A boot's ISO is the
// template with that area holding a gzip newc cpio of the boot's ignition and boot URL
// (EmbedIgnitionPath, EmbedBootURLPath): nothing is written to disk, and a BMC's range reads
// see the same bytes for the whole boot.
//
// The kernel accepts the padded area as an initrd because the initramfs format allows NUL
// bytes between and after archives (Documentation/driver-api/early-userspace/buffer-format.rst):
// the embed's archive adds its files to the probe's root filesystem, and the zeros after it are
// skipped.
package bootmedia

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// Files of the template, in the probe image's directory (bin/probe).
const (
	// ISOFile is the template ISO.
	ISOFile = "probe.iso"
	// ManifestFile describes it (Manifest, as JSON).
	ManifestFile = "probe-iso.json"
)

// DefaultEmbedSize is the size of the template's embed area, /ignition.img:
// ignition.MaxIgnitionBytes, the largest ignition the probe accepts, plus 64 KiB for the cpio
// headers, the boot URL and gzip's worst case on incompressible input (5 bytes per 16 KiB
// block and its framing).
const DefaultEmbedSize = ignition.MaxIgnitionBytes + 64<<10

// Paths in the embedded initrd (relative, as in a cpio archive), which the probe's /init reads:
// ignition.MediaIgnitionFile and ignition.MediaBootURLFile.
var (
	EmbedIgnitionPath = strings.TrimPrefix(ignition.MediaIgnitionFile, "/")
	EmbedBootURLPath  = strings.TrimPrefix(ignition.MediaBootURLFile, "/")
)

// Manifest is probe-iso.json: where the embed area lies in the template.
type Manifest struct {
	// Size of probe.iso in bytes, and its SHA256 (hex).
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// EmbedOffset and EmbedSize locate /ignition.img's bytes in probe.iso (zeros in the template).
	EmbedOffset int64 `json:"embedOffset"`
	EmbedSize   int64 `json:"embedSize"`
}

// Template is a loaded probe.iso and its manifest. It is never changed after LoadTemplate, so
// one Template serves every boot, concurrently; each Open has its own file.
type Template struct {
	Manifest Manifest
	path     string
}

// ErrTooLarge is returned by Embed when a boot's files do not fit the embed area.
var ErrTooLarge = errors.New("does not fit the ISO's embed area")

// LoadTemplate opens dir's probe.iso and checks it against probe-iso.json: its size, its
// SHA256, an embed area inside the file, and zeros in that area (a boot's ISO made from a
// template that already held an embed would carry two). It reads the whole file once, to hash
// it; Open reads only what is asked for.
func LoadTemplate(dir string) (*Template, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("reading the probe ISO's manifest (make probe-image): %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", ManifestFile, err)
	}
	if m.EmbedSize <= 0 || m.EmbedOffset < 0 || m.EmbedOffset > m.Size-m.EmbedSize {
		return nil, fmt.Errorf("%s: embed area [%d, +%d) is not inside the %d-byte ISO", ManifestFile, m.EmbedOffset, m.EmbedSize, m.Size)
	}
	p := filepath.Join(dir, ISOFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("opening the probe ISO (make probe-image): %w", err)
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if fi.Size() != m.Size {
		return nil, fmt.Errorf("%s is %d bytes, %s says %d: rebuild it (make probe-image)", p, fi.Size(), ManifestFile, m.Size)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); sum != m.SHA256 {
		return nil, fmt.Errorf("%s has SHA256 %s, %s says %s: rebuild it (make probe-image)", p, sum, ManifestFile, m.SHA256)
	}
	area := make([]byte, m.EmbedSize)
	if _, err := f.ReadAt(area, m.EmbedOffset); err != nil {
		return nil, fmt.Errorf("reading the embed area of %s: %w", p, err)
	}
	if !allZero(area) {
		return nil, fmt.Errorf("%s: the embed area at %d is not zero-filled: not a template", p, m.EmbedOffset)
	}
	return &Template{Manifest: m, path: p}, nil
}

// Embed renders a boot's embed: a gzip newc cpio of the ignition (mode 0600) and the boot URL
// (mode 0644, the URL alone, no newline), with their directory, zero-padded to the embed
// area's size. The archive is reproducible (fixed inode numbers, times 0, owner root, a gzip
// header without name or time), so the same boot always gets the same bytes. It returns an
// error wrapping ErrTooLarge when the archive does not fit.
func (t *Template) Embed(ign []byte, bootURL string) ([]byte, error) {
	return renderEmbed(ign, bootURL, t.Manifest.EmbedSize)
}

func renderEmbed(ign []byte, bootURL string, size int64) ([]byte, error) {
	files := map[string]struct {
		mode uint64
		data []byte
	}{
		EmbedIgnitionPath: {0o600, ign},
		EmbedBootURLPath:  {0o644, []byte(bootURL)},
	}
	// Parent directories first, then the files, in name order.
	var names []string
	seen := map[string]bool{}
	for _, name := range []string{EmbedBootURLPath, EmbedIgnitionPath} {
		var dirs []string
		for dir := path.Dir(name); dir != "." && !seen[dir]; dir = path.Dir(dir) {
			seen[dir] = true
			dirs = append([]string{dir}, dirs...)
		}
		names = append(names, dirs...)
	}
	dirCount := len(names)
	names = append(names, EmbedBootURLPath, EmbedIgnitionPath)

	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	cw := cpio.Newc.Writer(zw)
	for i, name := range names {
		info := cpio.Info{Name: name, Ino: uint64(i + 1), NLink: 1}
		var rec cpio.Record
		if i < dirCount {
			info.Mode = cpio.S_IFDIR | 0o755
			info.NLink = 2
			rec = cpio.Record{ReaderAt: bytes.NewReader(nil), Info: info}
		} else {
			f := files[name]
			info.Mode = cpio.S_IFREG | f.mode
			rec = cpio.StaticRecord(f.data, info)
		}
		if err := cw.WriteRecord(rec); err != nil {
			return nil, fmt.Errorf("writing %s to the embed: %w", name, err)
		}
	}
	if err := cpio.WriteTrailer(cw); err != nil {
		return nil, fmt.Errorf("ending the embed's archive: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("compressing the embed: %w", err)
	}
	if int64(buf.Len()) > size {
		return nil, fmt.Errorf("the ignition (%d bytes) and boot URL compress to %d bytes, the area holds %d: %w", len(ign), buf.Len(), size, ErrTooLarge)
	}
	out := make([]byte, size)
	copy(out, buf.Bytes())
	return out, nil
}

// Open is the boot's ISO: the template with embed (Embed's result) in its area, Size() bytes,
// for http.ServeContent. Reads outside the area come from the template's file, reads inside it
// from embed: the ISO is never copied. The result is also an io.ReaderAt. It is not safe for
// concurrent use (it has one position): open one per request. Close releases the template's
// file. Open fails when probe.iso no longer has the loaded size (it was rebuilt: load again).
func (t *Template) Open(embed []byte) (io.ReadSeekCloser, error) {
	if int64(len(embed)) != t.Manifest.EmbedSize {
		return nil, fmt.Errorf("an embed of %d bytes for an area of %d (use Template.Embed)", len(embed), t.Manifest.EmbedSize)
	}
	f, err := os.Open(t.path)
	if err != nil {
		return nil, fmt.Errorf("opening the probe ISO: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("opening the probe ISO: %w", err)
	}
	if fi.Size() != t.Manifest.Size {
		_ = f.Close()
		return nil, fmt.Errorf("%s is %d bytes now, %d when loaded: it was rebuilt; load it again", t.path, fi.Size(), t.Manifest.Size)
	}
	return &overlay{file: f, size: t.Manifest.Size, embedOffset: t.Manifest.EmbedOffset, embed: embed}, nil
}

// Size is the ISO's size in bytes.
func (t *Template) Size() int64 { return t.Manifest.Size }

// overlay reads the template's file with embed in place of [embedOffset, +len(embed)).
type overlay struct {
	file        *os.File
	size        int64
	embedOffset int64
	embed       []byte
	pos         int64
}

func (o *overlay) Read(p []byte) (int, error) {
	n, err := o.ReadAt(p, o.pos)
	o.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// ReadAt reads len(p) bytes at off, splitting the read at the embed area's boundaries.
func (o *overlay) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("bootmedia: negative offset")
	}
	n := 0
	for n < len(p) {
		at := off + int64(n)
		if at >= o.size {
			return n, io.EOF
		}
		want := p[n:]
		if rest := o.size - at; int64(len(want)) > rest {
			want = want[:rest]
		}
		embedEnd := o.embedOffset + int64(len(o.embed))
		switch {
		case at >= o.embedOffset && at < embedEnd:
			n += copy(want, o.embed[at-o.embedOffset:])
		default:
			if at < o.embedOffset && int64(len(want)) > o.embedOffset-at {
				want = want[:o.embedOffset-at]
			}
			m, err := o.file.ReadAt(want, at)
			n += m
			if err != nil && !(err == io.EOF && m == len(want)) {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF // the file is shorter than its manifest says
				}
				return n, err
			}
		}
	}
	return n, nil
}

func (o *overlay) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = o.pos + offset
	case io.SeekEnd:
		abs = o.size + offset
	default:
		return 0, errors.New("bootmedia: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("bootmedia: negative position")
	}
	o.pos = abs
	return abs, nil
}

func (o *overlay) Close() error { return o.file.Close() }

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
