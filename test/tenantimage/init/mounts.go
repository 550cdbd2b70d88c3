package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountFilesystems mounts /proc (the command line), /sys (the block devices) and devtmpfs on
// /dev (their nodes). The initramfs is the root filesystem.
func mountFilesystems() error {
	mounts := []struct{ source, target, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
	}
	var errs []error
	for _, m := range mounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("creating %s: %w", m.target, err))
			continue
		}
		err := unix.Mount(m.source, m.target, m.fstype, unix.MS_NOSUID, m.data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mounting %s on %s: %w", m.fstype, m.target, err))
		}
	}
	return errors.Join(errs...)
}
