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
package vm
