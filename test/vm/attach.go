package vm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/ipmisim"
)

// Binding is a VM acting as the host of a simulated BMC's system: a Redfish one (Attach),
// whose resets power the VM and whose virtual media is the VM's CD, or an IPMI one
// (AttachIPMI), whose chassis controls power the VM. The VM powering itself off turns the
// system Off.
type Binding struct {
	bmc      *bmcsim.BMC // the Redfish BMC; nil for IPMI
	systemID string
	machine  *VM
	setOff   func() // tells the BMC the host is off
	detach   func() // undoes what binding did to the BMC, on Close

	mu      sync.Mutex
	queue   []job
	wake    chan struct{}
	done    chan struct{}
	closed  bool
	errs    []error
	applied int
	// mediaApplied counts the media changes carried out (the current media at Attach among
	// them), failed ones included.
	mediaApplied int
	lastMedia    bmcsim.MediaEvent // the last media change applied; only work uses it
}

// job is one thing for the binding's goroutine to do: a Redfish or IPMI power action, or a
// media change.
type job struct {
	power *bmcsim.PowerAction
	ipmi  *ipmisim.PowerAction
	media *bmcsim.MediaEvent
}

// Attach makes machine the host of the BMC's system systemID. Power actions are carried out
// in order on the binding's own goroutine, so a Redfish request never waits for QEMU and
// actions never overtake each other:
//
//   - On, ForceOn, PowerCycle from Off, any restart: QEMU (re)starts booting what the BMC
//     chose (its boot override, consumed as firmware would; Pxe and UefiHttp boot the
//     network, everything else the disk). A restart keeping the boot device resets in place.
//     UefiHttp with the system's HttpBootUri (PowerAction.HTTPBootURI) on a UEFI VM boots
//     that URI, as firmware does once its BMC has written it a URI boot option: QEMU is
//     stopped, the URI goes into the VM's variable store as BootNext (VM.BootHTTPURI), and
//     QEMU starts again. Without a URI the firmware's HTTP boot takes the one DHCP gives; a
//     BIOS VM ignores the URI and boots the network.
//   - An action that boots the host with a BIOS version (PowerAction.BIOSVersion: a firmware
//     update staged at the BMC takes effect) other than the one QEMU publishes: the VM takes
//     it (VM.SetBIOSVersion), and QEMU is started anew, a restart included, since QEMU builds
//     the firmware's SMBIOS tables only when it starts: the guest reads the new version
//     (SMBIOS type 0, /sys/class/dmi/id/bios_version). An action without one keeps the VM's.
//   - ForceOff, and SetPowerState Off: QEMU is killed.
//   - GracefulShutdown, and PushPowerButton on a running system: the ACPI power button. The
//     system stays On until the guest powers off (firmware alone never does).
//   - Nmi: an NMI.
//
// The system's virtual media goes into the VM's CD/DVD drive (Definition.CDROM) in the same
// order: a running VM changes or ejects it at once, one that is off starts with it, and a
// Cd boot override boots it (BootCD) while it is inserted. Without a drive the media are
// ignored, and without a medium a Cd boot falls through to the disk, as firmware does.
//
// When QEMU exits by itself, the system goes Off. When an action fails (QEMU cannot start),
// the system goes Off too, so the BMC never shows a host that is not running as On, and the
// error is kept for Errors. The system's current power is applied at once: On starts the VM
// booting from disk. The VM takes the BIOS version the BMC says the system runs
// (bmcsim.BMC.BIOSVersion) from its next start; SystemSpec gives a BMC the definition's
// version, or without one the firmware's name, which the VM then publishes.
func Attach(bmc *bmcsim.BMC, systemID string, machine *VM) (*Binding, error) {
	if !bmc.SetHostShutsDown(systemID, true) {
		return nil, fmt.Errorf("attach VM %q: the BMC has no system %q", machine.def.Name, systemID)
	}
	if v := bmc.BIOSVersion(systemID); v != "" {
		machine.SetBIOSVersion(v)
	}
	b := newBinding(machine, func() { bmc.SetPowerState(systemID, "Off") }, func() { bmc.SetHostShutsDown(systemID, false) })
	b.bmc, b.systemID = bmc, systemID
	bmc.OnPowerAction(b.enqueuePower)
	if machine.def.CDROM {
		// Hooked before the current media is read, so no change falls in between; a change
		// queued twice is applied twice, which changes nothing.
		bmc.OnMediaChange(b.enqueueMedia)
		b.enqueueMedia(bmc.Media(systemID))
	}
	if bmc.PowerState(systemID) == "On" {
		b.enqueuePower(bmcsim.PowerAction{SystemID: systemID, From: "Off", To: "On", Boot: bmcsim.BootHdd})
	}
	go b.work()
	return b, nil
}

// newBinding makes a binding whose goroutine is not started yet: the VM exiting by itself
// calls setOff, Close calls detach.
func newBinding(machine *VM, setOff, detach func()) *Binding {
	b := &Binding{machine: machine, setOff: setOff, detach: detach, wake: make(chan struct{}, 1), done: make(chan struct{})}
	machine.OnExit(func(error) {
		if !b.isClosed() {
			setOff()
		}
	})
	return b
}

// BootDeviceFor maps a Redfish boot target to what QEMU can boot; cdMedium says whether the
// VM's CD/DVD drive holds a medium (false without a drive). Cd boots the CD when it does;
// otherwise, and for Usb, the disk, as a server without that media falls through to it.
func BootDeviceFor(target bmcsim.BootTarget, cdMedium bool) BootDevice {
	switch {
	case target == bmcsim.BootPxe || target == bmcsim.BootUefiHttp:
		return BootNetwork
	case target == bmcsim.BootCd && cdMedium:
		return BootCD
	}
	return BootDisk
}

func (b *Binding) enqueuePower(a bmcsim.PowerAction) {
	if strings.EqualFold(a.SystemID, b.systemID) {
		b.enqueue(job{power: &a})
	}
}

func (b *Binding) enqueueMedia(e bmcsim.MediaEvent) {
	if strings.EqualFold(e.SystemID, b.systemID) {
		b.enqueue(job{media: &e})
	}
}

// enqueue is called from the BMC's request handlers: it never waits for QEMU.
func (b *Binding) enqueue(j job) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.queue = append(b.queue, j)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *Binding) work() {
	defer close(b.done)
	for {
		b.mu.Lock()
		for len(b.queue) == 0 && !b.closed {
			b.mu.Unlock()
			<-b.wake
			b.mu.Lock()
		}
		if b.closed {
			b.mu.Unlock()
			return
		}
		j := b.queue[0]
		b.queue = b.queue[1:]
		b.mu.Unlock()

		if j.media != nil {
			err := b.applyMedia(*j.media)
			b.mu.Lock()
			b.mediaApplied++
			if err != nil {
				b.errs = append(b.errs, fmt.Errorf("media %s: %w", or(j.media.Path, "eject"), err))
			}
			b.mu.Unlock()
			continue
		}
		var err error
		if j.ipmi != nil {
			a := *j.ipmi
			if err = b.applyIPMI(a); err != nil {
				err = fmt.Errorf("IPMI %s %s>%s: %w", a.Action, a.From, a.To, err)
			}
		} else {
			a := *j.power
			if err = b.apply(a); err != nil {
				err = fmt.Errorf("%s %s>%s: %w", or(a.ResetType, "SetPowerState"), a.From, a.To, err)
			}
		}
		b.mu.Lock()
		b.applied++
		if err != nil {
			b.errs = append(b.errs, err)
		}
		b.mu.Unlock()
		if err != nil && !b.machine.Running() {
			b.setOff()
		}
	}
}

// apply carries out one action on the VM.
func (b *Binding) apply(a bmcsim.PowerAction) error {
	m := b.machine
	switch {
	case a.Boot != "":
		b.dropVanishedMedia()
		if a.BIOSVersion != "" {
			m.SetBIOSVersion(a.BIOSVersion) // Reset and BootHTTPURI start a new QEMU when it differs
		}
		if a.Boot == bmcsim.BootUefiHttp && a.HTTPBootURI != "" && m.def.Firmware == UEFI {
			// Not a reset in place: QEMU holds the variable store the URI goes into.
			return m.BootHTTPURI(a.HTTPBootURI)
		}
		return m.Reset(BootDeviceFor(a.Boot, m.Media() != "")) // starts an off VM; restarts a running one
	case a.From == "On" && a.To == "Off":
		return m.Kill()
	case a.To == "On" && (a.ResetType == "GracefulShutdown" || a.ResetType == "PushPowerButton"):
		err := m.Shutdown()
		if errors.Is(err, ErrNotRunning) {
			return nil // already off: the exit hook turns the system Off
		}
		return err
	case a.ResetType == "Nmi" && a.To == "On":
		return m.NMI()
	}
	return nil // nothing for the host to do (On while on, ForceOff while off)
}

// applyMedia puts the system's media in the VM's drive, or ejects it.
func (b *Binding) applyMedia(e bmcsim.MediaEvent) error {
	if e.Inserted && e.Path != "" {
		if e == b.lastMedia && b.machine.Media() != "" {
			return nil // the same insert twice (see Attach): no tray movement
		}
		b.lastMedia = e
		err := b.machine.InsertMedia(e.Path)
		if errors.Is(err, fs.ErrNotExist) && b.bmc.Media(b.systemID) != e {
			// The BMC has ejected or replaced this medium (and removed its copy) since: the
			// change that did is further down the queue.
			return nil
		}
		return err
	}
	b.lastMedia = e
	if b.machine.Media() == "" {
		return nil
	}
	return b.machine.EjectMedia()
}

// dropVanishedMedia empties the VM's drive when the BMC has removed the medium's file, which
// it does when the medium is ejected or replaced: that change is still queued behind the
// power action at hand, and QEMU cannot start with a file that is gone. A host powered on
// just before its virtual media was ejected boots without it, as a server would.
func (b *Binding) dropVanishedMedia() {
	m := b.machine
	if p := m.Media(); p != "" {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			_ = m.EjectMedia() // only fails for a closed VM, which the start reports
		}
	}
}

// MediaApplied counts the media changes carried out so far (the media found at Attach
// included), failed ones included; tests wait on it.
func (b *Binding) MediaApplied() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mediaApplied
}

// Applied counts the power actions carried out so far, failed ones included; tests wait on it.
func (b *Binding) Applied() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.applied
}

// Errors are the actions that failed, oldest first.
func (b *Binding) Errors() []error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]error(nil), b.errs...)
}

func (b *Binding) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// Close detaches the VM: later actions and exits are ignored, and graceful shutdowns are the
// BMC's own again. It leaves the VM as it is; close the VM to stop it.
func (b *Binding) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	<-b.done
	b.detach()
	return nil
}

func or(v, fallback string) string {
	if v != "" {
		return v
	}
	return fallback
}
