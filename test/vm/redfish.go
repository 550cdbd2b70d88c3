package vm

import (
	"fmt"
	"strings"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// dimmMiB is the size of the memory devices QEMU describes in SMBIOS type 17: it splits
// guest memory into 16 GiB DIMMs, so the BMC lists the same modules the guest sees.
const dimmMiB = 16 << 10

// NICSpeedMbps is what each NIC model reports (virtio-net is given speed=10000 by Args).
var NICSpeedMbps = map[NICModel]int{VirtioNet: 10000, E1000: 1000}

// SystemSpec is the Redfish view of a definition's hardware, as sushy-tools derives one
// from a libvirt domain: the SMBIOS identity (the BIOS version is the one the guest reads
// when the definition sets one, else the firmware's name), one processor socket with the
// VM's cores, memory as DIMMs summing to the VM's memory, drives with size, serial and
// protocol, and NICs with their MACs. Id is left for the BMC's profile; set it to name the
// system yourself.
func SystemSpec(def Definition) bmcsim.SystemSpec {
	spec := bmcsim.SystemSpec{
		UUID:         strings.ToLower(def.SMBIOS.UUID),
		Manufacturer: def.SMBIOS.Manufacturer,
		Model:        def.SMBIOS.Product,
		SerialNumber: def.SMBIOS.Serial,
		BIOSVersion:  or(def.SMBIOS.BIOSVersion, map[Firmware]string{BIOS: "SeaBIOS", UEFI: "OVMF"}[def.Firmware]),
		BootMode:     bootModeOf(def),
		PowerState:   "Off",
		Processors: []bmcsim.Processor{{
			ID: "CPU1", ProcessorType: "CPU", Manufacturer: "QEMU", Model: "QEMU TCG CPU (max)",
			TotalCores: def.CPUs, TotalThreads: def.CPUs,
		}},
	}
	for left, i := def.MemoryMiB, 0; left > 0; i++ {
		size := min(left, dimmMiB)
		spec.Memory = append(spec.Memory, bmcsim.DIMM{ID: fmt.Sprintf("DIMM%d", i+1), CapacityMiB: size, Manufacturer: "QEMU"})
		left -= size
	}
	for i, d := range def.Disks {
		drive := bmcsim.Drive{
			ID: fmt.Sprintf("Disk%d", i+1), SerialNumber: d.Serial, CapacityBytes: d.SizeBytes, Manufacturer: "QEMU",
		}
		switch d.Bus {
		case NVMe:
			drive.Name, drive.Model, drive.MediaType, drive.Protocol = "NVMe disk", "QEMU NVMe Ctrl", "SSD", "NVMe"
		case SATA:
			drive.Name, drive.Model, drive.MediaType, drive.Protocol = "SATA disk", "QEMU HARDDISK", "HDD", "SATA"
		case Virtio: // Redfish has no protocol for virtio; real BMCs leave unknown fields out
			drive.Name, drive.Model = "virtio disk", "QEMU VIRTUAL DISK"
		}
		spec.Drives = append(spec.Drives, drive)
	}
	for i, n := range def.NICs {
		spec.NICs = append(spec.NICs, bmcsim.NIC{
			ID: fmt.Sprintf("NIC%d", i+1), MACAddress: strings.ToLower(n.MAC), SpeedMbps: NICSpeedMbps[n.Model], LinkUp: true,
		})
	}
	return spec
}

// bootModeOf is how the definition's firmware boots, as its BMC reports it.
func bootModeOf(def Definition) string {
	switch {
	case def.Firmware == BIOS:
		return bmcsim.BootModeLegacy
	case def.SecureBoot:
		return bmcsim.BootModeUEFISecureBoot
	}
	return bmcsim.BootModeUEFI
}
