package collect

import (
	"context"
	"errors"
	"math"
	"os"
	"strings"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/block"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// storage fills one StorageDevice per block device (ghw: /sys/block, and /run/udev/data for
// model, serial, WWN and bus path; without udev data, serial, model and controller come from
// sysfs, see storage_sysfs.go) and TotalStorage.
//
// Devices the kernel calls virtual (their /sys/block link points into /sys/devices/virtual:
// loop, ram, zram, dm-*, md*) are left out, as virtual NICs are: they are not hardware, and a
// dm or md device would count its disks twice. TotalStorage sums the rest except removable
// media.
func (c *collector) storage(_ context.Context, rep *report.Report) error {
	info, err := ghw.Block(c.ghwOptions()...)
	if err != nil {
		return err
	}
	inv := &rep.Inventory
	var total int64
	for _, d := range info.Disks {
		if d == nil || c.virtualBlockDevice(d.Name) {
			continue
		}
		dev := storageDevice(d)
		if !c.hasUdevData(d.Name) {
			c.fillFromSysfs(&dev)
		}
		inv.Storage = append(inv.Storage, dev)
		if !dev.Removable && dev.Size != nil {
			total += dev.Size.Value()
		}
	}
	if len(inv.Storage) == 0 {
		return errors.New("no block devices found in /sys/block")
	}
	inv.TotalStorage = bytesQuantity(total)
	return nil
}

func storageDevice(d *block.Disk) metalv1alpha1.StorageDevice {
	dev := metalv1alpha1.StorageDevice{
		Name:         d.Name,
		Model:        known(d.Model),
		Vendor:       known(d.Vendor),
		SerialNumber: known(d.SerialNumber),
		WWN:          known(d.WWN),
		Type:         driveType(d),
		Rotational:   d.DriveType == block.DriveTypeHDD,
		Removable:    d.IsRemovable,
		Controller:   controller(d),
		BusPath:      known(d.BusPath),
	}
	if d.SizeBytes > 0 && d.SizeBytes <= math.MaxInt64 {
		dev.Size = bytesQuantity(int64(d.SizeBytes))
	}
	return dev
}

// driveType is the API's HDD, SSD, NVMe or Unknown. ghw types a device by its name (sd, vd,
// nvme, ...) corrected by queue/rotational; an NVMe controller makes it NVMe. Optical, floppy
// and virtual drives have no API type and are Unknown (their controller still says what they
// hang off).
func driveType(d *block.Disk) string {
	if d.StorageController == block.StorageControllerNVMe {
		return "NVMe"
	}
	switch d.DriveType {
	case block.DriveTypeHDD:
		return "HDD"
	case block.DriveTypeSSD:
		return "SSD"
	}
	return "Unknown"
}

// controller names the bus: ghw's controller (SCSI, NVMe, virtio, IDE, MMC), with SCSI made
// precise from the udev bus path, since SATA, SAS and USB disks all show up as SCSI disks.
func controller(d *block.Disk) string {
	name := known(d.StorageController.String())
	if d.StorageController == block.StorageControllerSCSI {
		path := known(d.BusPath)
		switch {
		case strings.Contains(path, "-ata-"):
			return "SATA"
		case strings.Contains(path, "-sas-"):
			return "SAS"
		case strings.Contains(path, "-usb-"):
			return "USB"
		}
	}
	return name
}

// virtualBlockDevice says whether /sys/block/<name> links into /sys/devices/virtual.
func (c *collector) virtualBlockDevice(name string) bool {
	target, err := os.Readlink(c.path("sys", "block", name))
	return err == nil && strings.Contains(target, "devices/virtual/")
}
