package configdrive

import (
	"fmt"
	"io"
	"os"
)

// disk is an open disk: a block device or a disk-image file.
type disk struct {
	f       *os.File
	path    string
	size    int64  // bytes, Seek(0, io.SeekEnd)
	ss      int64  // logical sector size
	sectors uint64 // size / ss
	isBlock bool
}

func openDisk(f *os.File, path string) (*disk, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	d := &disk{f: f, path: path, ss: 512, isBlock: fi.Mode()&os.ModeDevice != 0}
	switch {
	case d.isBlock:
		ss, err := logicalSectorSize(f)
		if err != nil {
			return nil, fmt.Errorf("logical sector size of %s: %w", path, err)
		}
		d.ss = int64(ss)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is neither a block device nor a regular file", path)
	}
	if d.ss < 512 || d.ss&(d.ss-1) != 0 {
		return nil, fmt.Errorf("%s has a logical sector size of %d bytes", path, d.ss)
	}
	if d.size, err = f.Seek(0, io.SeekEnd); err != nil {
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	d.sectors = uint64(d.size / d.ss)
	return d, nil
}

func (d *disk) readAt(n int64, off int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := d.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("reading %d bytes at byte %d of %s: %w", n, off, d.path, err)
	}
	return b, nil
}

func (d *disk) writeAt(b []byte, off int64) error {
	if _, err := d.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("writing %d bytes at byte %d of %s: %w", len(b), off, d.path, err)
	}
	return nil
}

func (d *disk) sync() error {
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", d.path, err)
	}
	return nil
}
