//go:build linux && (amd64 || arm64)

package wipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// hostErase runs HostEraser's erases on a block device.
func hostErase(ctx context.Context, dev string, disk metalv1alpha1.StorageDevice) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", unsupported("not started: %v", err)
	}
	// Read-write: BLKSECDISCARD wants a descriptor open for writing (EBADF otherwise).
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return "", unsupported("opening %s: %v", dev, err)
	}
	defer func() { _ = f.Close() }()
	fd := int(f.Fd())
	// Nothing cached may be written back over the erased device afterwards.
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("flushing %s before the erase: %w", dev, err)
	}
	if err := unix.IoctlSetInt(fd, unix.BLKFLSBUF, 0); err != nil {
		return "", fmt.Errorf("flushing %s before the erase: BLKFLSBUF: %w", dev, err)
	}

	var tried []string
	if name := filepath.Base(dev); nvmeNamespaceName.MatchString(name) {
		what, err := nvmeErase(ctx, nvmeDevice{fd: fd})
		if err == nil || !errors.Is(err, ErrSecureEraseUnsupported) {
			return what, err
		}
		tried = append(tried, whyUnsupported(err))
	} else {
		tried = append(tried, "not NVMe")
	}

	var size uint64
	if err := ioctlPtr(fd, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err != nil {
		return "", unsupported("%s; BLKGETSIZE64: %v", joinReasons(tried), err)
	}
	rng := [2]uint64{0, size}
	err = ioctlPtr(fd, unix.BLKSECDISCARD, unsafe.Pointer(&rng))
	switch {
	case err == nil:
		return fmt.Sprintf("BLKSECDISCARD (the kernel's secure discard) over all %d bytes", size), nil
	case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOTTY):
		tried = append(tried, "BLKSECDISCARD: "+err.Error())
		return "", unsupported("%s", joinReasons(tried))
	}
	return "", fmt.Errorf("BLKSECDISCARD over all %d bytes: %w", size, err)
}

// ioctlPtr is ioctl(fd, req, p) for a pointer argument.
func ioctlPtr(fd int, req uint, p unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}

// nvmeDevice is an NVMe namespace's block device: admin commands go through the driver's
// passthrough ioctl (CAP_SYS_ADMIN).
type nvmeDevice struct{ fd int }

func (d nvmeDevice) NamespaceID() (uint32, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), nvmeIoctlID, 0)
	if errno != 0 {
		return 0, errno
	}
	return uint32(r), nil
}

func (d nvmeDevice) Admin(cmd *nvmeAdminCmd, data []byte) error {
	// The kernel reads and writes data through the address in cmd: the buffer must not move
	// or be freed while the ioctl runs.
	var pin runtime.Pinner
	defer pin.Unpin()
	cmd.Addr, cmd.DataLen = 0, 0
	if len(data) > 0 {
		pin.Pin(&data[0])
		cmd.Addr = uint64(uintptr(unsafe.Pointer(&data[0])))
		cmd.DataLen = uint32(len(data))
	}
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(d.fd), nvmeIoctlAdminCmd, uintptr(unsafe.Pointer(cmd)))
	if errno != 0 {
		return fmt.Errorf("NVME_IOCTL_ADMIN_CMD (opcode 0x%02x): %w", cmd.Opcode, errno)
	}
	if r != 0 {
		return nvmeStatus(r)
	}
	return nil
}

// dropCache makes the next reads of f reach the device: fsync, POSIX_FADV_DONTNEED over the
// whole file and, on a block device, BLKFLSBUF (which also drops the buffer cache).
func dropCache(f *os.File) error {
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	fd := int(f.Fd())
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise DONTNEED: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeDevice != 0 && fi.Mode()&os.ModeCharDevice == 0 {
		if err := unix.IoctlSetInt(fd, unix.BLKFLSBUF, 0); err != nil {
			return fmt.Errorf("BLKFLSBUF: %w", err)
		}
	}
	return nil
}
