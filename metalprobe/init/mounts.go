package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountFilesystems mounts what the probe reads (/proc, /sys: ghw, the kernel command line)
// and writes (/run: the ignition, /tmp), and devtmpfs on /dev so the disks have nodes. The
// initramfs is the root filesystem, so these are the only mounts.
func mountFilesystems() error {
	mounts := []struct{ source, target, fstype, data string }{
		{"proc", "/proc", "proc", ""},
		{"sysfs", "/sys", "sysfs", ""},
		{"devtmpfs", "/dev", "devtmpfs", "mode=0755"},
		{"tmpfs", "/run", "tmpfs", "mode=0755"},
		{"tmpfs", "/tmp", "tmpfs", "mode=1777"},
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
