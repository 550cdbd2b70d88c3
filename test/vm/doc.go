// Package vm runs real QEMU virtual machines for the BMC simulator and the lab, and the
// private network they live on.
//
// A Definition describes a machine's hardware; Args turns it into a qemu-system-x86_64
// command line (TCG only: this package never asks for KVM). A VM starts, stops, resets and
// asks its guest to shut down through QMP, writes its serial console to a log, and reports
// when QEMU exits by itself. A Network is a named network namespace holding a bridge and one
// tap per VM NIC, with no way out: every packet stays inside it, and Do, ListenTCP,
// ListenUDP and Forward let the host process serve the VMs from there. The bridge answers
// IPv6 router solicitations with an advertisement that configures nothing, so iPXE does not
// wait ~13 s per boot for a router. Attach puts a VM
// behind a simulated Redfish system, so resets through Redfish power the VM and the system's
// virtual media is the VM's CD/DVD drive (Definition.CDROM), booted with a Cd override.
//
// # BIOS version (SMBIOS type 0)
//
// A definition's SMBIOS.BIOSVersion (with BIOSVendor, BIOSDate) becomes QEMU's
// -smbios type=0,vendor=...,version=...,date=...[,uefi=on], and the guest reads it in-band
// (/sys/class/dmi/id/bios_version, the probe's dmi.bios.version). Measured with Debian 12's
// QEMU 7.2, SeaBIOS 1.16.2 and OVMF 2022.11 (a static /init printing bios_*):
//
//   - without a type 0, each firmware publishes its own: SeaBIOS "SeaBIOS",
//     "1.16.2-debian-1.16.2-1", 04/01/2014; OVMF "EFI Development Kit II / OVMF", "0.0.0",
//     02/06/2015;
//   - with one, both publish QEMU's instead (OVMF's Secure Boot build on q35,smm=on too),
//     whole: a field it leaves out is empty, not the firmware's, so Args fills vendor and
//     date from the firmware's own and refuses a vendor or date without a version. OVMF
//     takes it with or without uefi=on, which only sets the "UEFI is supported"
//     characteristic; Args sets it for UEFI machines, which makes the characteristics
//     bytes OVMF's own (extension byte 2 0x1c).
//
// QEMU builds the SMBIOS tables once, when it starts; system_reset keeps them (checked: a
// probe rebooted in place still reads the old version). So a BIOS update reaches the guest
// only through a new QEMU: VM.SetBIOSVersion sets the version the next start publishes,
// and Reset starts QEMU anew, rather than resetting in place, when the running one
// publishes another (same disks, NICs, OVMF variable store and medium, as any power
// cycle). A Binding does so for a BMC power action that boots the host with another BIOS
// version (bmcsim.PowerAction.BIOSVersion: a firmware update staged at the BMC takes effect
// at that boot), so the probe booted next reports the version the BMC shows.
package vm
