package configdrive

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func logicalSectorSize(f *os.File) (int, error) {
	return unix.IoctlGetInt(int(f.Fd()), unix.BLKSSZGET)
}

// rereadPartitions tells the kernel about the disk's new partition table: BLKRRPART, or, when a
// partition of the disk is in use (EBUSY), BLKPG_ADD_PARTITION of partition p alone.
// ENOTTY and EINVAL (not a disk the kernel partitions) are no error.
func rereadPartitions(f *os.File, p part) error {
	err := unix.IoctlSetInt(int(f.Fd()), unix.BLKRRPART, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOTTY), errors.Is(err, unix.EINVAL):
		return nil
	case !errors.Is(err, unix.EBUSY):
		return err
	}
	ss, err := logicalSectorSize(f)
	if err != nil {
		return err
	}
	return addPartition(f, p.number, int64(p.start)*int64(ss), int64(p.end-p.start)*int64(ss))
}

// addPartition tells the kernel that the disk has partition n at [start, start+length) bytes.
func addPartition(f *os.File, n int, start, length int64) error {
	bp := unix.BlkpgPartition{Start: start, Length: length, Pno: int32(n)}
	arg := unix.BlkpgIoctlArg{
		Op:      unix.BLKPG_ADD_PARTITION,
		Datalen: int32(unsafe.Sizeof(bp)),
		Data:    (*byte)(unsafe.Pointer(&bp)),
	}
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.BLKPG, uintptr(unsafe.Pointer(&arg))); errno != 0 {
		return errno
	}
	return nil
}
