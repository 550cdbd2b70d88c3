// Package earlyboot is what a Go /init does first in an initramfs, before its own work: mount
// the kernel's filesystems and load, in the order the image's builder wrote, the kernel modules
// this machine needs: those of its PCI devices, those for every machine, and their dependencies.
// The probe's /init (metalprobe/init) and the tenant test image's (test/tenantimage/init) both
// use it. Both are main packages, hence this package; it imports nothing beyond the standard
// library and golang.org/x/sys/unix, which both already link, so that neither /init grows.
package earlyboot

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Mount is one filesystem to mount: mount(2)'s source, target, type and data.
type Mount struct{ Source, Target, FSType, Data string }

// MountAll creates each target and mounts it nosuid. The initramfs is the root filesystem, so
// these are the only mounts. One already mounted (EBUSY) is fine; a failure does not stop the
// rest (whatever did mount may be enough), and every failure is returned, joined.
func MountAll(mounts []Mount) error {
	var errs []error
	for _, m := range mounts {
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			errs = append(errs, fmt.Errorf("creating %s: %w", m.Target, err))
			continue
		}
		err := unix.Mount(m.Source, m.Target, m.FSType, unix.MS_NOSUID, m.Data)
		if err != nil && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("mounting %s on %s: %w", m.FSType, m.Target, err))
		}
	}
	return errors.Join(errs...)
}
