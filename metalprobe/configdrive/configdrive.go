// Package configdrive writes an OpenStack config drive onto a disk that already holds an OS
// image, so that a cloud image (cloud-init's ConfigDrive datasource, Ignition's OpenStack
// platform, Afterburn) boots with the user's ignition or cloud-config.
//
// The config drive is what `mkisofs -R -V config-2` makes of
//
//	openstack/latest/meta_data.json
//	openstack/latest/user_data        (only when Files.UserData != nil)
//	openstack/2012-08-10/meta_data.json
//	openstack/2012-08-10/user_data
//
// an ISO9660 filesystem with Rock Ridge names and the volume identifier config-2, which the
// consumers find by label (/dev/disk/by-label/config-2). It is written into a new partition
// that Write adds after the last partition of the image's partition table (MBR or GPT), as
// Ironic does for whole-disk images. The 2012-08-10 copy is for cloud-init releases that
// predate "latest"; modern cloud-init picks the newest version directory it knows and
// Ignition reads latest, and both copies hold the same bytes.
//
// An existing config-2 partition (an ISO9660 or FAT filesystem labelled config-2, or a GPT
// partition named config-2) is reused: Write replaces its content in place instead of adding
// a second one, and fails if the new content does not fit in it.
package configdrive

import (
	"errors"
	"fmt"
	"os"
)

// Label is the config drive's volume label.
const Label = "config-2"

// Files is the content of a config drive.
type Files struct {
	InstanceID, Hostname string
	// Server is the name of the Ironfleet Server, meta_data.json's meta.server; "" writes no
	// meta.server.
	Server   string
	UserData []byte // nil: no user_data file
}

// Result says where Write put the config drive.
type Result struct {
	Partition   int   // 1-based partition number added
	Start, Size int64 // bytes
}

// Bounds of the partition Write adds, and of its alignment.
const (
	// Align is the alignment of the partition's start and the granularity of its size.
	Align = 1 << 20
	// MinPartitionSize and MaxPartitionSize bound the partition Write adds.
	MinPartitionSize = 1 << 20
	MaxPartitionSize = 64 << 20
)

// ErrNoPartitionTable is the error (errors.Is) of Write and Read on a disk without an MBR or
// GPT partition table.
var ErrNoPartitionTable = errors.New("no partition table")

// ErrSectorSize is the error (errors.Is) of Write on a disk with logical sectors larger than
// 2048 bytes (4Kn): Linux's iso9660 driver refuses such a device ("ISOFS: unsupported/invalid
// hardware sector size"), so neither cloud-init nor Ignition could read the config drive.
var ErrSectorSize = errors.New("config drive unreadable on this disk")

// Write adds a partition holding a config drive after the last partition of the partition
// table (MBR or GPT) already on the disk (block device or regular disk-image file) at path.
//
// The partition starts at the first 1 MiB boundary after the end of the last partition and is
// the ISO's size rounded up to 1 MiB (at least 1 MiB, at most 64 MiB); its bytes past the ISO
// are zeroed, so no stale filesystem signature is left in it. On an MBR disk it is a primary
// partition of type 0x83 in the first free entry; nothing else of the MBR changes. On a GPT
// disk it is a "Linux filesystem data" partition named config-2 in the first free entry, and
// the GPT is rewritten for the size of the device: the backup header and entries move to its
// end, the last usable LBA follows, the protective MBR's 0xEE entry covers the device, and the
// stale backup header the image left at its own end is zeroed; every other byte of the
// headers and of the existing entries (disk GUID, partition GUIDs, types, names, attributes,
// LBAs) is kept.
//
// If the disk already holds a config-2 partition, its content is replaced in place (see the
// package documentation) and Result describes that partition.
//
// A disk with 4096-byte logical sectors is refused (ErrSectorSize) before anything is written.
//
// Write writes nothing outside the partition except the partition table structures, and
// fsyncs the disk. On a block device it then asks the kernel to re-read the partition table
// (BLKRRPART); when the kernel refuses because a partition of the disk is in use (EBUSY), it
// adds the new partition alone (BLKPG); a failure of both is ignored, because the table on
// the disk is right and the installed OS reads it when it boots.
func Write(path string, f Files) (Result, error) {
	if err := checkFiles(f); err != nil {
		return Result{}, err
	}
	iso, err := buildISO(f)
	if err != nil {
		return Result{}, fmt.Errorf("building the config drive: %w", err)
	}
	dev, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return Result{}, err
	}
	var res Result
	d, werr := openDisk(dev, path)
	switch {
	case werr != nil:
	case d.ss > isoBlock:
		werr = fmt.Errorf("%w: %s has %d-byte logical sectors, and Linux does not mount an ISO9660 filesystem on a device with sectors larger than %d bytes",
			ErrSectorSize, path, d.ss, isoBlock)
	default:
		res, werr = writeDisk(d, iso)
	}
	if cerr := dev.Close(); werr == nil && cerr != nil {
		werr = fmt.Errorf("closing %s: %w", path, cerr)
	}
	if werr != nil {
		return Result{}, werr
	}
	return res, nil
}

// Read finds the config-2 partition on the disk at path and returns its files.
//
// The partition is the one whose ISO9660 volume identifier is config-2 or, on GPT, whose name
// is config-2; it must hold an ISO9660 filesystem. Files are read from openstack/latest by
// their Rock Ridge names. UserData is nil when there is no user_data file.
func Read(path string) (Files, error) {
	dev, err := os.Open(path)
	if err != nil {
		return Files{}, err
	}
	defer dev.Close()
	d, err := openDisk(dev, path)
	if err != nil {
		return Files{}, err
	}
	lay, err := readLayout(d)
	if err != nil {
		return Files{}, err
	}
	p, found, err := findConfigDrive(d, lay)
	if err != nil {
		return Files{}, err
	}
	if !found {
		return Files{}, fmt.Errorf("no %s partition on %s", Label, path)
	}
	start, size := int64(p.start)*d.ss, int64(p.end-p.start)*d.ss
	if p.fs != fsISO {
		return Files{}, fmt.Errorf("%s partition %d of %s does not hold an ISO9660 filesystem", Label, p.number, path)
	}
	f, err := readISO(dev, start, size)
	if err != nil {
		return Files{}, fmt.Errorf("reading the %s partition %d of %s: %w", Label, p.number, path, err)
	}
	return f, nil
}

// PartitionDevice names partition n of a disk: ("vda",2) → "vda2", ("nvme0n1",2) →
// "nvme0n1p2" (names ending in a digit get "p"). A /dev/ prefix is kept.
func PartitionDevice(disk string, n int) string {
	if disk != "" && disk[len(disk)-1] >= '0' && disk[len(disk)-1] <= '9' {
		return fmt.Sprintf("%sp%d", disk, n)
	}
	return fmt.Sprintf("%s%d", disk, n)
}
