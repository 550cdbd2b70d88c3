package install

import (
	"os"

	"golang.org/x/sys/unix"
)

// isBlockDevice says whether fi is a block device (a disk), not a regular file standing in for one.
func isBlockDevice(fi os.FileInfo) bool {
	return fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// dropCache drops the cached pages of an fsynced device (or file), so that reads reach the
// disk: POSIX_FADV_DONTNEED over the whole file and, for a block device, BLKFLSBUF, which
// also drops the device's buffer cache.
func dropCache(f *os.File, block bool) error {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return err
	}
	if block {
		if err := unix.IoctlSetInt(int(f.Fd()), unix.BLKFLSBUF, 0); err != nil {
			return err
		}
	}
	return nil
}
