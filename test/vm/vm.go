package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// Options says where a VM lives and what it connects to.
type Options struct {
	Dir     string   // disks, console log, QEMU's own log, OVMF variables; created if missing
	Network *Network // where the NICs' taps are; required when the definition has NICs
	QEMU    string   // qemu-system-x86_64 to run; empty: found in PATH
	// IPMIChardev gives the machine an in-band IPMI BMC connected to this TCP host:port
	// (Layout.IPMIChardev; ipmisim.BMC.VMAddr).
	IPMIChardev string
}

// Errors a VM's controls return.
var (
	ErrRunning    = errors.New("the VM is running")
	ErrNotRunning = errors.New("the VM is not running")
	ErrClosed     = errors.New("the VM is closed")
)

// VM is one QEMU machine: its files exist from New, its process from Start until it is
// killed, reset to another boot device, or exits by itself. All methods are safe for
// concurrent use; the controls (Start, Kill, Reset, Close) run one at a time.
type VM struct {
	def     Definition
	opts    Options
	qemu    string
	layout  Layout // without NICFDs, which each start assigns
	taps    []string
	qemuLog string
	dropDir func() // removes a private QMP socket directory

	ops sync.Mutex // serialises the controls

	mu       sync.Mutex // guards what follows
	run      *run       // the current QEMU, nil when off
	closed   bool
	exitHook []func(error)
	// biosVersion is the SMBIOS type 0 version the next QEMU publishes (SetBIOSVersion;
	// def.SMBIOS.BIOSVersion at first).
	biosVersion string
}

// New validates the definition and prepares the VM's disks, firmware variables and taps;
// nothing runs until Start.
func New(def Definition, opts Options) (*VM, error) {
	if err := def.Validate(); err != nil {
		return nil, fmt.Errorf("VM %q: %w", def.Name, err)
	}
	if opts.Dir == "" {
		return nil, fmt.Errorf("VM %q: Options.Dir is required", def.Name)
	}
	if len(def.NICs) > 0 && opts.Network == nil {
		return nil, fmt.Errorf("VM %q has NICs but no Network to plug them into", def.Name)
	}
	qemu := opts.QEMU
	if qemu == "" {
		var err error
		if qemu, err = exec.LookPath("qemu-system-x86_64"); err != nil {
			return nil, fmt.Errorf("VM %q: qemu-system-x86_64 not found (apt-get install qemu-system-x86 ipxe-qemu ovmf): %w", def.Name, err)
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("VM %q: create its directory: %w", def.Name, err)
	}
	v := &VM{def: def, opts: opts, qemu: qemu, qemuLog: filepath.Join(opts.Dir, "qemu.log"), biosVersion: def.SMBIOS.BIOSVersion}
	v.layout.IPMIChardev = opts.IPMIChardev
	var err error
	if v.layout.DiskFiles, err = prepareDisks(opts.Dir, def.Disks); err != nil {
		return nil, fmt.Errorf("VM %q: %w", def.Name, err)
	}
	if def.Firmware == UEFI {
		if v.layout.FirmwareVars, err = prepareFirmwareVars(opts.Dir, OVMFVarsTemplate(def)); err != nil {
			return nil, fmt.Errorf("VM %q: %w", def.Name, err)
		}
	}
	sockDir, dropDir, err := socketDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("VM %q: %w", def.Name, err)
	}
	v.dropDir = dropDir
	v.layout.QMPSocket = filepath.Join(sockDir, "qmp.sock")
	v.layout.ConsoleLog = filepath.Join(opts.Dir, "console.log")
	for range def.NICs {
		tap, err := opts.Network.AddTap()
		if err != nil {
			return nil, errors.Join(fmt.Errorf("VM %q: %w", def.Name, err), v.Close())
		}
		v.taps = append(v.taps, tap)
	}
	return v, nil
}

// Definition is the hardware the VM was made with, with the BIOS version its next start
// publishes (SetBIOSVersion).
func (v *VM) Definition() Definition {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.nextDefinition()
}

// nextDefinition is what the next start runs; the caller holds v.mu.
func (v *VM) nextDefinition() Definition {
	def := v.def
	def.SMBIOS.BIOSVersion = v.biosVersion
	if def.SMBIOS.BIOSVersion == "" { // the firmware's own type 0, whole (Validate)
		def.SMBIOS.BIOSVendor, def.SMBIOS.BIOSDate = "", ""
	}
	return def
}

// SetBIOSVersion is a firmware update of the machine's BIOS: from its next power-on the
// firmware publishes version in SMBIOS type 0 (Definition.SMBIOS; "" is the firmware's own
// version), with the definition's vendor and date. QEMU builds its SMBIOS tables once, when
// it starts, so a running machine keeps publishing the version it started with, through
// resets in place too, until it is started again: Reset starts a new QEMU when the version
// differs, and so does every start after a Kill or an exit.
func (v *VM) SetBIOSVersion(version string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.biosVersion = version
}

// BIOSVersion is the SMBIOS type 0 version the running QEMU publishes, and when the VM is
// off the one its next start will; "" is the firmware's own.
func (v *VM) BIOSVersion() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.run != nil {
		return v.run.biosVersion
	}
	return v.biosVersion
}

// DiskFiles are the raw files behind the VM's disks, in Definition order: what the host reads
// to check what the guest wrote (sync the guest or stop the VM first).
func (v *VM) DiskFiles() []string { return append([]string(nil), v.layout.DiskFiles...) }

// ConsoleLog is the file the serial console is appended to, across restarts (see
// ReadConsole and TailConsole).
func (v *VM) ConsoleLog() string { return v.layout.ConsoleLog }

// FirmwareVars is the VM's OVMF variable store (UEFI only; "" for BIOS), which its firmware
// writes as it runs: SecureBootEnabled reads it.
func (v *VM) FirmwareVars() string { return v.layout.FirmwareVars }

// QEMULog is QEMU's own output (its errors and warnings), appended across restarts.
func (v *VM) QEMULog() string { return v.qemuLog }

// Taps names the taps of the VM's NICs in its Network, in NIC order.
func (v *VM) Taps() []string { return slices.Clone(v.taps) }

// OnExit adds a hook called when QEMU exits without being asked to: the guest powered off,
// QEMU was told to quit over QMP, or it crashed. Kill, Close and restarts for a new boot
// device do not call it. It runs on its own goroutine with the exit error (nil for a clean
// exit), after the VM already reports not running.
func (v *VM) OnExit(hook func(err error)) {
	v.mu.Lock()
	v.exitHook = append(v.exitHook, hook)
	v.mu.Unlock()
}

// Running reports whether QEMU is running.
func (v *VM) Running() bool { return v.current() != nil }

// PID is QEMU's process id, 0 when it is not running.
func (v *VM) PID() int {
	if r := v.current(); r != nil {
		return r.cmd.Process.Pid
	}
	return 0
}

// BootDevice is what the running QEMU was started to boot from, "" when it is not running.
func (v *VM) BootDevice() BootDevice {
	if r := v.current(); r != nil {
		return r.boot
	}
	return ""
}

func (v *VM) current() *run {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.run
}

// Start runs QEMU booting from boot and returns once its QMP monitor answers.
func (v *VM) Start(boot BootDevice) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	return v.start(boot)
}

// Kill stops QEMU at once (a power cut: Redfish ForceOff) and waits until it is gone.
// Killing a VM that is off does nothing.
func (v *VM) Kill() error {
	v.ops.Lock()
	defer v.ops.Unlock()
	return v.kill()
}

// Shutdown presses the ACPI power button (Redfish GracefulShutdown) and returns at once: the
// guest decides whether and when to power off, and OnExit hooks hear when it has. Firmware
// without an OS ignores the button. It does not hold the controls' lock, so a Kill is never
// stuck behind a monitor that does not answer.
func (v *VM) Shutdown() error {
	r := v.current()
	if r == nil {
		return ErrNotRunning
	}
	if _, err := r.command("system_powerdown", nil); err != nil {
		return fmt.Errorf("VM %q: press the power button: %w", v.def.Name, err)
	}
	return nil
}

// Reset restarts the machine booting from boot (Redfish ForceRestart, PowerCycle), and
// starts it when it is off. QEMU fixes the boot order and the SMBIOS tables when it starts
// (-boot order and bootindex are read once, into the firmware configuration), so a reset in
// place with QMP system_reset only serves the same boot device and BIOS version; for
// another one (SetBIOSVersion) QEMU is killed and started again, with the same disks, NICs,
// variable store and medium. Both are what a power cycle looks like to the guest.
func (v *VM) Reset(boot BootDevice) error {
	v.ops.Lock()
	defer v.ops.Unlock()
	r := v.current()
	if r == nil {
		return v.start(boot)
	}
	v.mu.Lock()
	sameBIOS := r.biosVersion == v.biosVersion
	v.mu.Unlock()
	if r.boot == boot && sameBIOS {
		if _, err := r.command("system_reset", nil); err != nil {
			return fmt.Errorf("VM %q: reset: %w", v.def.Name, err)
		}
		return nil
	}
	if err := v.kill(); err != nil {
		return err
	}
	return v.start(boot)
}

// BootHTTPURI boots the machine's firmware from uri by UEFI HTTP boot once, as a BMC told to
// boot a Redfish HttpBootUri does: QEMU is stopped when it runs (a power cycle to the guest),
// SetHTTPBootNext writes the URI boot option and BootNext into the VM's variable store, which
// QEMU holds as the machine's flash while it runs, and QEMU starts again, booting the network
// (BootNext comes before that order). UEFI only. The URI is not put in errors or logs.
func (v *VM) BootHTTPURI(uri string) error {
	if v.def.Firmware != UEFI {
		return fmt.Errorf("VM %q: UEFI HTTP boot by URI needs UEFI firmware, not %s", v.def.Name, v.def.Firmware)
	}
	v.ops.Lock()
	defer v.ops.Unlock()
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := v.kill(); err != nil {
		return err
	}
	if err := SetHTTPBootNext(v.layout.FirmwareVars, uri); err != nil {
		return fmt.Errorf("VM %q: %w", v.def.Name, err)
	}
	return v.start(BootNetwork)
}

// NMI injects a non-maskable interrupt (Redfish Nmi).
func (v *VM) NMI() error {
	_, err := v.QMP("inject-nmi", nil)
	return err
}

// Status is QEMU's run state from QMP query-status: "running", "paused", "shutdown", ...
func (v *VM) Status() (string, error) {
	raw, err := v.QMP("query-status", nil)
	if err != nil {
		return "", err
	}
	var st struct {
		Status string `json:"status"`
	}
	if err := unmarshal(raw, &st); err != nil {
		return "", fmt.Errorf("VM %q: read query-status: %w", v.def.Name, err)
	}
	return st.Status, nil
}

// Close kills QEMU and removes the VM's taps and socket directory. Disks and logs stay in
// Options.Dir. It is idempotent.
func (v *VM) Close() error {
	v.ops.Lock()
	defer v.ops.Unlock()
	v.mu.Lock()
	if v.closed {
		v.mu.Unlock()
		return nil
	}
	v.closed = true
	v.mu.Unlock()
	errs := []error{v.kill()}
	for _, tap := range v.taps {
		errs = append(errs, v.opts.Network.RemoveTap(tap))
	}
	if v.dropDir != nil {
		v.dropDir()
	}
	return errors.Join(errs...)
}

// killTimeout bounds the wait for a SIGKILLed QEMU to be reaped; it only passes when the
// kernel is in trouble.
const killTimeout = 30 * time.Second

func (v *VM) kill() error {
	r := v.current()
	if r == nil {
		return nil
	}
	r.stopping.Store(true)
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("VM %q: kill QEMU %d: %w", v.def.Name, r.cmd.Process.Pid, err)
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(killTimeout):
		return fmt.Errorf("VM %q: QEMU %d still running %s after SIGKILL", v.def.Name, r.cmd.Process.Pid, killTimeout)
	}
}
