package main

// The config drive is found the way cloud-init and Ignition find it, by its label, but read
// without udev or blkid: /init reads the ISO9660 primary volume descriptor of every block
// device itself, and mounts the one labelled config-2 with the kernel's isofs (Rock Ridge,
// which carries the lowercase names), as a real operating system does.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// The ISO9660 primary volume descriptor: the first volume descriptor, at sector 16 of 2048
// bytes; type 1, "CD001", version 1; the volume identifier is bytes 40 to 71, padded with
// spaces (ECMA-119 8.4).
const (
	isoDescriptorOffset = 16 * 2048
	isoVolumeIDStart    = 40
	isoVolumeIDEnd      = 72
)

// isoVolumeID returns the volume identifier of the ISO9660 filesystem on r, and false when r
// holds none.
func isoVolumeID(r io.ReaderAt) (string, bool) {
	var pvd [isoVolumeIDEnd]byte
	if _, err := r.ReadAt(pvd[:], isoDescriptorOffset); err != nil {
		return "", false
	}
	if pvd[0] != 1 || string(pvd[1:6]) != "CD001" || pvd[6] != 1 {
		return "", false
	}
	return strings.TrimRight(string(pvd[isoVolumeIDStart:isoVolumeIDEnd]), " \x00"), true
}

var errNoConfigDrive = errors.New("no config drive")

// drivePoll is how often findConfigDrive looks again while devices appear.
const drivePoll = 250 * time.Millisecond

// findConfigDrive returns the name of the block device (in sysBlock, /sys/class/block) whose
// node in devDir holds an ISO9660 filesystem labelled config-2: partitions first, then whole
// devices (a CD-ROM), each in name order. It looks again until ctx ends, since drivers and
// partition scans may still be running, and then returns errNoConfigDrive.
func findConfigDrive(ctx context.Context, sysBlock, devDir string) (string, error) {
	for {
		for _, name := range blockDevices(sysBlock) {
			f, err := os.Open(filepath.Join(devDir, name))
			if err != nil {
				continue // the node may not be there yet, or the device has no medium
			}
			label, ok := isoVolumeID(f)
			_ = f.Close()
			if ok && label == contract.ConfigDriveLabel {
				return name, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", errNoConfigDrive
		case <-time.After(drivePoll):
		}
	}
}

// blockDevices lists sysBlock's devices, partitions (they have a "partition" attribute) first,
// each group by name; RAM and loop devices are left out.
func blockDevices(sysBlock string) []string {
	parts, disks := partitionsAndDisks(sysBlock)
	return append(parts, disks...)
}

// partitionsAndDisks lists sysBlock's partitions and its whole devices, each by name; RAM and
// loop devices are left out.
func partitionsAndDisks(sysBlock string) (parts, disks []string) {
	entries, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		if _, err := os.Stat(filepath.Join(sysBlock, name, "partition")); err == nil {
			parts = append(parts, name)
		} else {
			disks = append(disks, name)
		}
	}
	slices.Sort(parts)
	slices.Sort(disks)
	return parts, disks
}

// configDrive is what /init read from the drive.
type configDrive struct {
	userData    []byte          // nil when the drive has no user_data
	metaData    json.RawMessage // nil when missing or not JSON
	metaDataErr error
}

// readConfigDrive mounts dev read-only on dir with isofs, reads the user_data and
// meta_data.json, and unmounts it.
func readConfigDrive(dev, dir string) (*configDrive, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	flags := uintptr(unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if err := unix.Mount(dev, dir, "iso9660", flags, ""); err != nil {
		return nil, fmt.Errorf("mounting %s (iso9660) on %s: %w", dev, dir, err)
	}
	defer func() { _ = unix.Unmount(dir, 0) }()
	return readConfigFiles(dir)
}

// readConfigFiles reads the user_data and meta_data.json under root.
func readConfigFiles(root string) (*configDrive, error) {
	d := &configDrive{}
	userData, err := os.ReadFile(filepath.Join(root, contract.UserDataPath))
	switch {
	case err == nil:
		if userData == nil {
			userData = []byte{}
		}
		d.userData = userData
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("reading %s: %w", contract.UserDataPath, err)
	}
	metaData, err := os.ReadFile(filepath.Join(root, contract.MetaDataPath))
	switch {
	case err != nil:
		d.metaDataErr = err
	case !json.Valid(metaData):
		d.metaDataErr = errors.New("not JSON")
	default:
		d.metaData = json.RawMessage(metaData)
	}
	return d, nil
}
