package vm

import (
	"errors"
	"fmt"

	"github.com/ironfleet/ironfleet/test/ipmisim"
)

// AttachIPMI makes machine the host of an IPMI BMC: ipmi_sim's chassis controls power the
// VM, in order, on the binding's own goroutine (the one Attach uses), so ipmi_sim never
// waits for QEMU:
//
//   - power on, and reset: QEMU (re)starts booting the device the action consumed
//     (IPMIBootDevice); a reset keeping the boot device resets in place.
//   - power off: QEMU is killed. A power cycle arrives as off, then on.
//   - soft shutdown: the ACPI power button; the BMC shows On until the guest powers off.
//
// When QEMU exits by itself, or an action fails and leaves it stopped, the BMC's power goes
// Off. The BMC's current power is applied at once: On starts the VM booting from disk.
//
// The VM's in-band KCS interface (Options.IPMIChardev) is optional; when it is set it must
// name this BMC's VMAddr.
func AttachIPMI(bmc *ipmisim.BMC, machine *VM) (*Binding, error) {
	if c := machine.layout.IPMIChardev; c != "" && c != bmc.VMAddr() {
		return nil, fmt.Errorf("attach VM %q: its IPMI chardev connects to %s, not to this BMC's %q", machine.def.Name, c, bmc.VMAddr())
	}
	b := newBinding(machine, func() { bmc.SetPowerState("Off") }, func() {})
	bmc.OnPowerAction(func(a ipmisim.PowerAction) { b.enqueue(job{ipmi: &a}) })
	if bmc.PowerState() == "On" {
		b.enqueue(job{ipmi: &ipmisim.PowerAction{Action: ipmisim.ActionOn, From: "Off", To: "On", Boot: "default"}})
	}
	go b.work()
	return b, nil
}

// IPMIBootDevice maps the boot device an IPMI (re)boot consumed to what QEMU can boot;
// cdMedium says whether the VM's CD/DVD drive holds a medium. "pxe" boots the network,
// "cdrom" the CD when it has a medium, everything else ("default", "bios", "none") the disk.
func IPMIBootDevice(boot string, cdMedium bool) BootDevice {
	switch {
	case boot == "pxe":
		return BootNetwork
	case boot == "cdrom" && cdMedium:
		return BootCD
	}
	return BootDisk
}

// applyIPMI carries out one IPMI power action on the VM.
func (b *Binding) applyIPMI(a ipmisim.PowerAction) error {
	m := b.machine
	switch a.Action {
	case ipmisim.ActionOn, ipmisim.ActionReset:
		return m.Reset(IPMIBootDevice(a.Boot, m.Media() != "")) // starts an off VM; restarts a running one
	case ipmisim.ActionOff:
		return m.Kill()
	case ipmisim.ActionShutdown:
		if err := m.Shutdown(); !errors.Is(err, ErrNotRunning) {
			return err
		}
		return nil // already off: the exit hook turned the BMC Off
	}
	return nil
}
