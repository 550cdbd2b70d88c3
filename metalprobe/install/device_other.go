//go:build !linux

package install

import "os"

// isBlockDevice says whether fi is a block device; outside Linux only regular files are used.
func isBlockDevice(fi os.FileInfo) bool {
	return fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0
}

// dropCache is a no-op outside Linux, where the probe does not run on real disks.
func dropCache(*os.File, bool) error { return nil }
