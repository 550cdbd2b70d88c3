package vm

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
)

// Firmware is what the machine boots with.
type Firmware string

// The firmwares a VM can have: SeaBIOS on the i440fx "pc" machine, or OVMF on q35.
const (
	BIOS Firmware = "BIOS"
	UEFI Firmware = "UEFI"
)

// DiskBus is how a disk is attached, which decides how the guest (and Redfish) sees it.
type DiskBus string

// The disk buses a VM can have.
const (
	Virtio DiskBus = "virtio" // virtio-blk-pci: /dev/vdX
	NVMe   DiskBus = "nvme"   // an NVMe controller per disk: /dev/nvmeXn1
	SATA   DiskBus = "sata"   // a port of one AHCI controller: /dev/sdX
)

// NICModel is the emulated network card. Both carry QEMU's iPXE option ROM.
type NICModel string

// The NIC models a VM can have.
const (
	VirtioNet NICModel = "virtio"
	E1000     NICModel = "e1000"
)

// Disk is one disk, backed by a sparse raw file the VM creates.
type Disk struct {
	Bus       DiskBus
	SizeBytes int64
	Serial    string // what the guest and the BMC report; at most 20 characters
}

// NIC is one network card, attached to a tap of the VM's Network.
type NIC struct {
	Model NICModel
	MAC   string // "52:54:00:12:34:56"
	// FirmwarePXE leaves out QEMU's iPXE option ROM: the firmware's own network stack boots
	// (OVMF's PXE over its virtio-net driver), as on most servers, and loads iPXE over TFTP.
	FirmwarePXE bool
}

// SMBIOS is the identity the firmware publishes (SMBIOS type 1), which the guest reads back
// and which the BMC reports, so both sides name the same machine; and the firmware's own
// (SMBIOS type 0: /sys/class/dmi/id/bios_*, the probe's dmi.bios), which a BMC's firmware
// update changes.
//
// BIOSVersion empty: the firmware publishes its own type 0 (SeaBIOS: vendor "SeaBIOS", its
// package version, 04/01/2014; Debian 12's OVMF: "EFI Development Kit II / OVMF", "0.0.0",
// 02/06/2015). Set, QEMU publishes a type 0 of its own, which both firmwares take instead of
// theirs, whole: BIOSVendor and BIOSDate left empty are the firmware's own (ownBIOS), so
// only the version changes. QEMU builds the tables once, when it starts: a guest sees a new
// version only after a new QEMU process (VM.SetBIOSVersion, VM.Reset).
type SMBIOS struct {
	Manufacturer, Product, Serial, UUID string
	BIOSVendor, BIOSVersion             string
	BIOSDate                            string // MM/DD/YYYY, as SMBIOS spells it
}

// Definition is a machine's hardware. It is plain data: Args renders it, SystemSpec turns it
// into the BMC's view of the same machine.
type Definition struct {
	Name      string // also names QEMU's -name and the VM's files
	Firmware  Firmware
	SMBIOS    SMBIOS
	CPUs      int
	MemoryMiB int
	Disks     []Disk
	NICs      []NIC
	// CDROM gives the machine a CD/DVD drive, empty until a medium is inserted (VM.InsertMedia,
	// or Layout.CDROMFile at start), which the BMC's virtual media fills.
	CDROM bool
	// SecureBoot (UEFI only) enforces UEFI Secure Boot: Debian's OVMF build with Microsoft's
	// keys enrolled and Secure Boot on (SecureBootOVMFCode, SecureBootOVMFVars), on a q35 with
	// SMM, as servers ship: only loaders signed by Microsoft's UEFI CA run, such as shim.
	SecureBoot bool
	// HTTPBoot (UEFI only) makes the firmware boot from the network by UEFI HTTP boot alone:
	// OVMF's PXE is turned off (its fw_cfg knobs opt/org.tianocore/IPv4PXESupport and
	// IPv6PXESupport), so it asks DHCP as an HTTPClient and loads what the URL it gets names,
	// with no TFTP.
	HTTPBoot bool
}

// maxSATAPorts is the port count of QEMU's AHCI controller.
const maxSATAPorts = 6

// maxDeviceSerial is the longest serial virtio-blk (VIRTIO_BLK_ID_BYTES), NVMe and ATA carry.
const maxDeviceSerial = 20

var (
	namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	uuidPattern = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	datePattern = regexp.MustCompile(`^(0[1-9]|1[0-2])/(0[1-9]|[12][0-9]|3[01])/[0-9]{4}$`)
)

// Validate reports every problem of a definition at once, before any file or process exists.
func (d Definition) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if !namePattern.MatchString(d.Name) {
		bad("name %q must match %s", d.Name, namePattern)
	}
	if d.Firmware != BIOS && d.Firmware != UEFI {
		bad("firmware %q must be %s or %s", d.Firmware, BIOS, UEFI)
	}
	if d.SecureBoot && d.Firmware != UEFI {
		bad("Secure Boot needs UEFI firmware, not %s", d.Firmware)
	}
	if d.HTTPBoot && d.Firmware != UEFI {
		bad("HTTP boot needs UEFI firmware, not %s", d.Firmware)
	}
	if d.SMBIOS.UUID != "" && !uuidPattern.MatchString(d.SMBIOS.UUID) {
		bad("SMBIOS UUID %q is not a UUID", d.SMBIOS.UUID)
	}
	if d.SMBIOS.BIOSVersion == "" && (d.SMBIOS.BIOSVendor != "" || d.SMBIOS.BIOSDate != "") {
		bad("SMBIOS BIOS vendor or date without a BIOS version: QEMU's type 0 would replace the firmware's with an empty version")
	}
	if d.SMBIOS.BIOSDate != "" && !datePattern.MatchString(d.SMBIOS.BIOSDate) {
		bad("SMBIOS BIOS date %q must be MM/DD/YYYY", d.SMBIOS.BIOSDate)
	}
	if d.CPUs < 1 || d.CPUs > 64 {
		bad("CPUs %d must be 1 to 64", d.CPUs)
	}
	if d.MemoryMiB < 32 {
		bad("memory %d MiB is below 32 MiB, too little for the firmware", d.MemoryMiB)
	}
	sata := 0
	for i, disk := range d.Disks {
		switch disk.Bus {
		case Virtio, NVMe:
		case SATA:
			sata++
		default:
			bad("disk %d: bus %q must be virtio, nvme or sata", i, disk.Bus)
		}
		if disk.SizeBytes < 512 || disk.SizeBytes%512 != 0 {
			bad("disk %d: size %d must be a positive multiple of 512 bytes", i, disk.SizeBytes)
		}
		if disk.Serial == "" || len(disk.Serial) > maxDeviceSerial || strings.ContainsAny(disk.Serial, ", =") {
			bad("disk %d: serial %q must be 1 to %d characters without commas, spaces or '='", i, disk.Serial, maxDeviceSerial)
		}
	}
	if sata > maxSATAPorts {
		bad("%d SATA disks, but the AHCI controller has %d ports", sata, maxSATAPorts)
	}
	macs := map[string]bool{}
	for i, nic := range d.NICs {
		if nic.Model != VirtioNet && nic.Model != E1000 {
			bad("NIC %d: model %q must be virtio or e1000", i, nic.Model)
		}
		hw, err := net.ParseMAC(nic.MAC)
		if err != nil || len(hw) != 6 {
			bad("NIC %d: MAC %q is not an Ethernet address", i, nic.MAC)
			continue
		}
		if hw[0]&1 != 0 {
			bad("NIC %d: MAC %s is a multicast address", i, nic.MAC)
		}
		if macs[hw.String()] {
			bad("NIC %d: MAC %s is used twice", i, nic.MAC)
		}
		macs[hw.String()] = true
	}
	return errors.Join(errs...)
}
