package image

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"github.com/u-root/u-root/pkg/cpio"
)

// File is one entry of the initramfs: a regular file, a directory or a character device.
type File struct {
	// Name is the path inside the image, without a leading slash ("bin/metalprobe").
	Name string
	// Mode holds the permission bits; the type comes from which of Data, Dir, CharDev is set.
	Mode    uint64
	Data    []byte
	Dir     bool
	CharDev *[2]uint64 // major, minor
}

// WriteInitramfs writes files as a gzip-compressed newc cpio archive, reproducibly: entries
// sorted by name (so a directory comes before what it holds), each parent directory present,
// inode numbers by position, modification times 0, owner root, and a gzip header without a
// name or time. The same files always give the same bytes.
func WriteInitramfs(w io.Writer, files []File) error {
	records, err := records(files)
	if err != nil {
		return err
	}
	zw, err := gzip.NewWriterLevel(w, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("starting gzip: %w", err)
	}
	cw := cpio.Newc.Writer(zw)
	for _, r := range records {
		if err := cw.WriteRecord(r); err != nil {
			return fmt.Errorf("writing %s to the initramfs: %w", r.Name, err)
		}
	}
	if err := cpio.WriteTrailer(cw); err != nil {
		return fmt.Errorf("ending the initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compressing the initramfs: %w", err)
	}
	return nil
}

// records turns files into cpio records in archive order, adding missing parent directories.
func records(files []File) ([]cpio.Record, error) {
	byName := map[string]File{}
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean("/"+f.Name), "/")
		if name == "" {
			return nil, fmt.Errorf("initramfs entry %q has no name", f.Name)
		}
		if prev, dup := byName[name]; dup && !(prev.Dir && f.Dir) {
			return nil, fmt.Errorf("initramfs entry %s appears twice", name)
		}
		f.Name = name
		byName[name] = f
		for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
			if _, ok := byName[dir]; !ok {
				byName[dir] = File{Name: dir, Dir: true, Mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(byName))
	for name, f := range byName {
		if f.Dir && f.Data != nil {
			return nil, fmt.Errorf("initramfs entry %s is both a directory and a file", name)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]cpio.Record, 0, len(names))
	for i, name := range names {
		f := byName[name]
		info := cpio.Info{Name: name, Ino: uint64(i + 1), NLink: 1, Mode: f.Mode & 0o7777}
		var rec cpio.Record
		switch {
		case f.Dir:
			info.Mode |= cpio.S_IFDIR
			info.NLink = 2
			rec = cpio.Record{ReaderAt: bytes.NewReader(nil), Info: info}
		case f.CharDev != nil:
			info.Mode |= cpio.S_IFCHR
			info.Rmajor, info.Rminor = f.CharDev[0], f.CharDev[1]
			rec = cpio.Record{ReaderAt: bytes.NewReader(nil), Info: info}
		default:
			info.Mode |= cpio.S_IFREG
			rec = cpio.StaticRecord(f.Data, info)
		}
		out = append(out, rec)
	}
	return out, nil
}
