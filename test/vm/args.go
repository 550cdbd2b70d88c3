package vm

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// BootDevice is what the machine boots from first. QEMU fixes the boot order when it
// starts, so a VM is started (or restarted) for one boot device.
type BootDevice string

// The boot devices a VM can start with.
const (
	BootNetwork BootDevice = "network" // iPXE from the NIC's option ROM
	BootDisk    BootDevice = "disk"
	// BootCD boots the medium in the CD/DVD drive (Definition.CDROM), falling through to the
	// disks and then the network when it does not boot, as firmware does.
	BootCD BootDevice = "cd"
)

// The CD/DVD drive's QEMU names: cdDevice is the qdev id QMP's blockdev-change-medium, eject
// and query-block ("qdev") take; cdDrive is its block backend.
const (
	cdDevice = "cd0"
	cdDrive  = "cd0drive"
)

// Debian's OVMF without Secure Boot: the 4 MiB build that Debian 12 ships as the default.
const (
	DefaultOVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	DefaultOVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// Debian's OVMF with Secure Boot (package ovmf): the SMM build, and a variable store with
// Microsoft's keys enrolled (PK, KEK, db with the UEFI CA shim is signed by) and Secure Boot
// on from the first boot.
const (
	SecureBootOVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.ms.fd"
	SecureBootOVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// OVMFVarsTemplate is the variable store a UEFI definition's VM starts from.
func OVMFVarsTemplate(def Definition) string {
	if def.SecureBoot {
		return SecureBootOVMFVars
	}
	return DefaultOVMFVars
}

// Layout is everything the command line names besides the Definition: where the VM's files
// are and which descriptors QEMU inherits for the NICs' taps.
type Layout struct {
	QMPSocket    string
	ConsoleLog   string
	FirmwareCode string   // UEFI only; empty: DefaultOVMFCode, or SecureBootOVMFCode
	FirmwareVars string   // UEFI only: this VM's writable copy of the OVMF variable store
	DiskFiles    []string // one raw file per Definition.Disks entry
	NICFDs       []int    // QEMU's descriptor number of each NIC's open tap, one per Definition.NICs
	// CDROMFile is the raw image (an ISO) in the CD/DVD drive at start; empty: no medium.
	// Only for a definition with CDROM, and required to boot BootCD.
	CDROMFile string
	// IPMIChardev is the TCP host:port of an IPMI BMC's VM interface (ipmi_sim's `serial 15
	// ... codec VM`, ipmisim.BMC.VMAddr): the machine gets an in-band BMC on an ISA KCS
	// interface connected to it, reconnecting when the BMC restarts. Empty: no IPMI device.
	IPMIChardev string
}

// Args builds the qemu-system-x86_64 arguments (without the program name) for a definition
// booting from boot. It is pure: it touches no file and starts nothing.
//
// QEMU runs with TCG only: /dev/kvm on these machines is a stub that hangs guests. -cpu max
// gives the guest RDRAND, so its getrandom does not block for minutes, and virtio-rng adds
// an entropy source for kernels that load the module. -nodefaults drops QEMU's default VGA,
// NIC and serial, so the machine has exactly the defined devices; the serial console goes to
// a file opened in append mode, so a tailer's offset stays valid across restarts.
func Args(def Definition, l Layout, boot BootDevice) ([]string, error) {
	if err := def.Validate(); err != nil {
		return nil, fmt.Errorf("invalid definition: %w", err)
	}
	if boot != BootNetwork && boot != BootDisk && boot != BootCD {
		return nil, fmt.Errorf("boot device %q must be %s, %s or %s", boot, BootNetwork, BootDisk, BootCD)
	}
	if l.CDROMFile != "" && !def.CDROM {
		return nil, fmt.Errorf("layout has a CD medium %s, but the machine has no CD/DVD drive", l.CDROMFile)
	}
	if boot == BootCD && !def.CDROM {
		return nil, fmt.Errorf("boot device %s needs a CD/DVD drive (Definition.CDROM)", BootCD)
	}
	if boot == BootCD && l.CDROMFile == "" {
		return nil, fmt.Errorf("boot device %s needs a medium in the CD/DVD drive", BootCD)
	}
	if len(l.DiskFiles) != len(def.Disks) || len(l.NICFDs) != len(def.NICs) {
		return nil, fmt.Errorf("layout has %d disk files and %d NIC descriptors for %d disks and %d NICs",
			len(l.DiskFiles), len(l.NICFDs), len(def.Disks), len(def.NICs))
	}
	if l.QMPSocket == "" || l.ConsoleLog == "" {
		return nil, fmt.Errorf("layout needs a QMP socket and a console log path")
	}
	machine := "pc"
	if def.Firmware == UEFI {
		machine = "q35"
		if def.SecureBoot {
			// The Secure Boot build keeps its variables behind SMM, so that the OS cannot
			// change them (turn Secure Boot off, enroll a key) behind the firmware's back.
			machine = "q35,smm=on"
		}
		if l.FirmwareVars == "" {
			return nil, fmt.Errorf("a UEFI machine needs its own copy of the OVMF variable store")
		}
	}
	args := []string{
		"-name", "guest=" + escape(def.Name),
		"-machine", machine,
		"-accel", "tcg",
		"-cpu", "max",
		// One socket of CPUs cores, spelled out so the guest sees what the BMC reports.
		"-smp", fmt.Sprintf("%d,sockets=1,cores=%d,threads=1", def.CPUs, def.CPUs),
		"-m", strconv.Itoa(def.MemoryMiB),
		"-nographic",
		"-no-user-config",
		"-nodefaults",
		"-smbios", smbiosType1(def.SMBIOS),
		"-chardev", "file,id=console,append=on,path=" + escape(l.ConsoleLog),
		"-serial", "chardev:console",
		"-qmp", "unix:" + escape(l.QMPSocket) + ",server=on,wait=off",
		"-device", "virtio-rng-pci",
	}
	if t0 := smbiosType0(def.Firmware, def.SMBIOS); t0 != "" {
		args = append(args, "-smbios", t0)
	}
	if def.Firmware == UEFI {
		code := l.FirmwareCode
		switch {
		case code != "":
		case def.SecureBoot:
			code = SecureBootOVMFCode
		default:
			code = DefaultOVMFCode
		}
		if def.SecureBoot {
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		if def.HTTPBoot {
			args = append(args, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
				"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
		}
		args = append(args,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+escape(code),
			"-drive", "if=pflash,format=raw,unit=1,file="+escape(l.FirmwareVars))
	}
	order := bootOrder{firmware: def.Firmware, boot: boot, count: map[BootDevice]int{
		BootNetwork: len(def.NICs), BootDisk: len(def.Disks), BootCD: cdDrives(def)}}
	if def.Firmware == BIOS {
		// SeaBIOS takes the legacy order: n is the first NIC's ROM, c the first hard disk, d
		// the first CD. Devices not named still follow, so a PXE or CD failure falls through
		// to the disk.
		args = append(args, "-boot", map[BootDevice]string{BootNetwork: "order=n", BootDisk: "order=c", BootCD: "order=d"}[boot])
	}
	args = append(args, diskArgs(def.Disks, l.DiskFiles, order)...)
	if def.CDROM {
		args = append(args, cdArgs(def.Firmware, l.CDROMFile, order)...)
	}
	args = append(args, nicArgs(def.NICs, l.NICFDs, order)...)
	if l.IPMIChardev != "" {
		ipmi, err := ipmiArgs(l.IPMIChardev)
		if err != nil {
			return nil, err
		}
		args = append(args, ipmi...)
	}
	return args, nil
}

// ipmiArgs connect an external BMC (ipmi-bmc-extern, OpenIPMI's VM protocol) to the
// guest's KCS interface; QEMU builds the SMBIOS type 38 and ACPI entries for it. The
// chardev connects as a client and retries every 2 s (QEMU 7.2's reconnect; later QEMUs
// deprecate it for reconnect-ms), so QEMU starts without the BMC and survives its restarts.
func ipmiArgs(addr string) ([]string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return nil, fmt.Errorf("IPMI chardev %q must be host:port", addr)
	}
	return []string{
		"-chardev", fmt.Sprintf("socket,id=ipmi0,host=%s,port=%s,reconnect=2", escape(host), escape(port)),
		"-device", "ipmi-bmc-extern,id=bmc0,chardev=ipmi0",
		"-device", "isa-ipmi-kcs,bmc=bmc0",
	}, nil
}

func cdDrives(def Definition) int {
	if def.CDROM {
		return 1
	}
	return 0
}

// bootOrder gives UEFI machines a bootindex per device: OVMF ignores -boot order and walks
// the devices by bootindex, so the boot device's class comes first, and the others follow
// in the order disks, NICs, CD.
type bootOrder struct {
	firmware Firmware
	boot     BootDevice
	count    map[BootDevice]int // devices per class
}

func (o bootOrder) suffix(class BootDevice, i int) string {
	if o.firmware != UEFI {
		return ""
	}
	classes := []BootDevice{o.boot}
	for _, c := range []BootDevice{BootDisk, BootNetwork, BootCD} {
		if c != o.boot {
			classes = append(classes, c)
		}
	}
	index := i + 1
	for _, c := range classes { // after every device of the classes before this one
		if c == class {
			break
		}
		index += o.count[c]
	}
	return ",bootindex=" + strconv.Itoa(index)
}

// cdArgs is the CD/DVD drive, empty or holding file: an ATAPI drive on the chipset's own
// controller, where QEMU's -cdrom puts it. On pc that is the PIIX IDE's secondary master
// (ide.1), which -nodefaults keeps; on q35 port 2 of the built-in ICH9 AHCI (ide.2), apart
// from the "sata" controller the SATA disks get. Read-only, like the medium, which
// blockdev-change-medium keeps.
func cdArgs(fw Firmware, file string, order bootOrder) []string {
	drive := "if=none,id=" + cdDrive + ",media=cdrom,readonly=on"
	if file != "" {
		drive += ",file=" + escape(file) + ",format=raw"
	}
	bus := map[Firmware]string{BIOS: "ide.1", UEFI: "ide.2"}[fw]
	return []string{
		"-drive", drive,
		"-device", fmt.Sprintf("ide-cd,id=%s,drive=%s,bus=%s%s", cdDevice, cdDrive, bus, order.suffix(BootCD, 0)),
	}
}

func diskArgs(disks []Disk, files []string, order bootOrder) []string {
	var args []string
	sataPort := 0
	for i, d := range disks {
		drive := fmt.Sprintf("drive%d", i)
		args = append(args, "-drive", fmt.Sprintf("file=%s,format=raw,if=none,id=%s,discard=unmap", escape(files[i]), drive))
		boot := order.suffix(BootDisk, i)
		switch d.Bus {
		case Virtio:
			args = append(args, "-device", fmt.Sprintf("virtio-blk-pci,id=disk%d,drive=%s,serial=%s%s", i, drive, d.Serial, boot))
		case NVMe:
			args = append(args, "-device", fmt.Sprintf("nvme,id=disk%d,drive=%s,serial=%s%s", i, drive, d.Serial, boot))
		case SATA:
			if sataPort == 0 {
				args = append(args, "-device", "ahci,id=sata")
			}
			args = append(args, "-device", fmt.Sprintf("ide-hd,id=disk%d,bus=sata.%d,drive=%s,serial=%s%s", i, sataPort, drive, d.Serial, boot))
			sataPort++
		}
	}
	return args
}

func nicArgs(nics []NIC, fds []int, order bootOrder) []string {
	var args []string
	for i, n := range nics {
		// virtio-net has no speed of its own; giving it one makes the guest and the BMC agree.
		device := map[NICModel]string{VirtioNet: "virtio-net-pci,speed=10000,duplex=full", E1000: "e1000"}[n.Model]
		if n.FirmwarePXE {
			device += ",romfile="
		}
		args = append(args,
			"-netdev", fmt.Sprintf("tap,id=net%d,fd=%d", i, fds[i]),
			"-device", fmt.Sprintf("%s,id=nic%d,netdev=net%d,mac=%s%s", device, i, i, strings.ToLower(n.MAC), order.suffix(BootNetwork, i)))
	}
	return args
}

// smbiosType1 renders the system identity; empty fields are left to QEMU's defaults.
func smbiosType1(s SMBIOS) string {
	parts := []string{"type=1"}
	for _, kv := range [][2]string{{"manufacturer", s.Manufacturer}, {"product", s.Product}, {"serial", s.Serial}, {"uuid", s.UUID}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+escape(kv[1]))
		}
	}
	return strings.Join(parts, ",")
}

// ownBIOS is what each firmware publishes as its own SMBIOS type 0 (Debian 12's SeaBIOS
// 1.16.2 and OVMF 2022.11, as their guests read it): a type 0 from QEMU replaces the
// firmware's whole, so the vendor and date a definition leaves empty are taken from here.
var ownBIOS = map[Firmware]struct{ vendor, date string }{
	BIOS: {vendor: "SeaBIOS", date: "04/01/2014"},
	UEFI: {vendor: "EFI Development Kit II / OVMF", date: "02/06/2015"},
}

// smbiosType0 renders the firmware's identity, "" when the definition has no BIOS version
// (the firmware publishes its own). SeaBIOS and OVMF both publish QEMU's type 0 instead of
// their own when there is one (checked in guests: /sys/class/dmi/id/bios_*). uefi=on sets
// the "UEFI is supported" characteristic, which OVMF's own type 0 has.
func smbiosType0(fw Firmware, s SMBIOS) string {
	if s.BIOSVersion == "" {
		return ""
	}
	own := ownBIOS[fw]
	parts := []string{"type=0", "vendor=" + escape(or(s.BIOSVendor, own.vendor)), "version=" + escape(s.BIOSVersion),
		"date=" + escape(or(s.BIOSDate, own.date))}
	if fw == UEFI {
		parts = append(parts, "uefi=on")
	}
	return strings.Join(parts, ",")
}

// escape doubles commas, QEMU's way of putting one inside an option value.
func escape(v string) string { return strings.ReplaceAll(v, ",", ",,") }
