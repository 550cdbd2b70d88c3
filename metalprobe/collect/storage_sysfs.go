package collect

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ghw reads a disk's serial number and model only from udev's database (/run/udev/data), and
// the probe's boot image has no udev. The kernel exposes the same identity in sysfs, so a
// disk that udev says nothing about gets it from there:
//
//   - serial: virtio-blk's /sys/block/vdX/serial; NVMe's controller (or subsystem)
//     /sys/block/nvmeXnY/device/serial; a SCSI disk's unit serial number VPD page,
//     /sys/block/sdX/device/vpd_pg80, which libata fills from ATA IDENTIFY for SATA disks,
//     as udev's ata_id and scsi_id do.
//   - model: /sys/block/X/device/model (SCSI, SATA, NVMe; virtio-blk has none).
//   - controller: a SCSI disk whose sysfs path runs through an ataN port is SATA, through
//     an end_device (SAS transport) SAS, through a USB device USB: what the udev bus path
//     otherwise says.

// fillFromSysfs completes a storage device that udev told nothing about.
func (c *collector) fillFromSysfs(dev *metalv1alpha1.StorageDevice) {
	if dev.SerialNumber == "" {
		dev.SerialNumber = c.sysfsDiskSerial(dev.Name)
	}
	if dev.Model == "" {
		dev.Model = c.readTrimmed("sys", "block", dev.Name, "device", "model")
	}
	if dev.Controller == "SCSI" && dev.BusPath == "" {
		if ctrl := c.sysfsSCSITransport(dev.Name); ctrl != "" {
			dev.Controller = ctrl
		}
	}
}

// hasUdevData says whether udev's database has an entry for the block device.
func (c *collector) hasUdevData(name string) bool {
	devNo := c.readTrimmed("sys", "block", name, "dev")
	return devNo != "" && c.exists("run", "udev", "data", "b"+devNo)
}

func (c *collector) sysfsDiskSerial(name string) string {
	for _, rel := range [][]string{{"serial"}, {"device", "serial"}} {
		if s := c.readTrimmed(append([]string{"sys", "block", name}, rel...)...); s != "" {
			return s
		}
	}
	page, err := os.ReadFile(c.path("sys", "block", name, "device", "vpd_pg80"))
	if err != nil {
		return ""
	}
	return parseVPDSerial(page)
}

// parseVPDSerial reads the product serial number from a SCSI Unit Serial Number VPD page
// (0x80): a 4-byte header whose bytes 2-3 are the length, then ASCII, space-padded.
func parseVPDSerial(page []byte) string {
	if len(page) < 4 || page[1] != 0x80 {
		return ""
	}
	n := int(binary.BigEndian.Uint16(page[2:4]))
	body := page[4:]
	if n < len(body) {
		body = body[:n]
	}
	body = bytes.TrimRight(body, "\x00")
	return strings.TrimSpace(string(body))
}

// sysfsSCSITransport names the transport of a SCSI disk from its device path in sysfs.
func (c *collector) sysfsSCSITransport(name string) string {
	target, err := os.Readlink(c.path("sys", "block", name))
	if err != nil {
		return ""
	}
	for _, elem := range strings.Split(filepath.ToSlash(target), "/") {
		switch {
		case isNumbered(elem, "ata"):
			return "SATA"
		case strings.HasPrefix(elem, "end_device-"):
			return "SAS"
		case strings.HasPrefix(elem, "usb"):
			return "USB"
		}
	}
	return ""
}

// isNumbered says whether elem is prefix followed by digits only (ata1, not ata_piix).
func isNumbered(elem, prefix string) bool {
	rest, ok := strings.CutPrefix(elem, prefix)
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
