package ipmisim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options describe one simulated BMC.
type Options struct {
	Dir string // config and state directory, required; fresh per BMC (a t.TempDir)
	// Addr is the UDP address RMCP+ is served on; default "127.0.0.1:0", port 0 picking a
	// free port (retried when another process takes it first).
	Addr               string
	Username, Password string
	// GUID is the system's UUID string; Get System GUID answers its SMBIOS byte encoding
	// (SMBIOSGUID). Empty: ipmi_sim does not support Get System GUID.
	GUID string
	FRU  FRU // FRU device 0
	// MAC is the BMC's LAN MAC (LAN configuration parameter 5); empty: zeros.
	MAC                          string
	FirmwareMajor, FirmwareMinor int // Get Device ID's firmware revision, e.g. 9 and 8: "9.08"
	ManufacturerID, ProductID    int // Get Device ID's IANA manufacturer and product id
	// VMChardev makes ipmi_sim also listen (TCP, 127.0.0.1, VMAddr) for QEMU's
	// ipmi-bmc-extern chardev, the in-band KCS interface of the host.
	VMChardev bool
	// Program is the ipmi_sim to run; empty: found in PATH.
	Program string
}

// PowerAction is what the BMC asked of the host: hooks added with OnPowerAction get them in
// order.
type PowerAction struct {
	Action   string // "on", "off", "reset", "shutdown"
	From, To string // power state before and after: "On" or "Off"
	// Boot is the boot device this power-on or reset consumed ("pxe", "default", "cdrom",
	// "bios"; "default" when none was pending); "" for off and shutdown.
	Boot string
	Time time.Time
}

// The power actions.
const (
	ActionOn       = "on"
	ActionOff      = "off"
	ActionReset    = "reset"
	ActionShutdown = "shutdown"
)

// BMC is one running ipmi_sim and the host state it asks about.
type BMC struct {
	opts      Options
	program   string
	udpAddr   string // host:port, fixed once started
	vmAddr    string // host:port of the VM chardev listener, "" without
	control   net.Listener
	conf, emu string
	stateDir  string
	logPath   string

	procMu sync.Mutex // guards proc and closed; held across Restart
	proc   *process
	closed bool

	cmdMu sync.Mutex // one chassis/lan command at a time, hooks included: actions stay in order

	mu     sync.Mutex // guards the host state below
	power  string     // "On" / "Off"
	boot   string     // pending boot device, "none" when none
	log    []string
	hooks  []func(PowerAction)
	served sync.WaitGroup
}

// startTimeout bounds how long Start and Restart wait for ipmi_sim to answer.
const startTimeout = 15 * time.Second

// bindAttempts is how often Start picks another free port when ipmi_sim could not bind the
// one picked (another process took it in between).
const bindAttempts = 5

// Start writes the configuration and starts ipmi_sim, returning once it answers RMCP.
func Start(ctx context.Context, o Options) (*BMC, error) {
	if o.Dir == "" {
		return nil, errors.New("ipmisim: Options.Dir is required")
	}
	if o.Username == "" || len(o.Username) > 16 || len(o.Password) > 20 {
		return nil, errors.New("ipmisim: a user name of 1 to 16 bytes and a password of at most 20 bytes are required")
	}
	if strings.ContainsAny(o.Username+o.Password, "\"\n") || strings.ContainsAny(o.Dir, "\" \n") {
		return nil, errors.New("ipmisim: the user name, password and Dir cannot hold double quotes or line breaks (nor Dir spaces): ipmi_sim's config has no escapes")
	}
	program := o.Program
	if program == "" {
		var err error
		if program, err = exec.LookPath("ipmi_sim"); err != nil {
			return nil, fmt.Errorf("ipmisim: ipmi_sim not found (apt-get install openipmi): %w", err)
		}
	}
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(o.Addr)
	if err != nil {
		return nil, fmt.Errorf("ipmisim: address %q: %w", o.Addr, err)
	}
	_ = CleanupStale() // ipmi_sims of runs that died; best effort
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("ipmisim: %w", err)
	}
	b := &BMC{
		opts: o, program: program, power: "Off", boot: "none",
		conf: filepath.Join(o.Dir, "lan.conf"), emu: filepath.Join(o.Dir, "sim.emu"),
		stateDir: filepath.Join(o.Dir, "state"), logPath: filepath.Join(o.Dir, "ipmi_sim.log"),
	}
	if err := os.MkdirAll(b.stateDir, 0o755); err != nil {
		return nil, fmt.Errorf("ipmisim: %w", err)
	}
	if b.control, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("ipmisim: listen for the control program: %w", err)
	}
	b.served.Add(1)
	go b.serveControl()
	if err := b.writeFiles(); err != nil {
		return nil, errors.Join(err, b.Close())
	}
	for attempt := 1; ; attempt++ {
		udpPort, vmPort := port, ""
		if port == "0" {
			if udpPort, err = freePort("udp", host); err != nil {
				return nil, errors.Join(err, b.Close())
			}
		}
		if o.VMChardev {
			if vmPort, err = freePort("tcp", "127.0.0.1"); err != nil {
				return nil, errors.Join(err, b.Close())
			}
		}
		b.mu.Lock() // the control program's lan calls read them
		if o.VMChardev {
			b.vmAddr = net.JoinHostPort("127.0.0.1", vmPort)
		}
		b.udpAddr = net.JoinHostPort(host, udpPort)
		b.mu.Unlock()
		if err = b.writeConf(); err != nil {
			return nil, errors.Join(err, b.Close())
		}
		err = b.launch(ctx)
		if err == nil {
			return b, nil
		}
		if port != "0" && !o.VMChardev || attempt == bindAttempts || ctx.Err() != nil || !errors.Is(err, errExited) {
			return nil, errors.Join(err, b.Close())
		}
	}
}

// freePort returns a port that was free on host a moment ago.
func freePort(network, host string) (string, error) {
	var addr net.Addr
	switch network {
	case "udp":
		c, err := net.ListenPacket("udp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("ipmisim: pick a UDP port: %w", err)
		}
		addr = c.LocalAddr()
		_ = c.Close()
	default:
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return "", fmt.Errorf("ipmisim: pick a TCP port: %w", err)
		}
		addr = l.Addr()
		_ = l.Close()
	}
	_, p, _ := net.SplitHostPort(addr.String())
	return p, nil
}

// Addr is the UDP host:port RMCP+ is served on.
func (b *BMC) Addr() string { return b.udpAddr }

// Address is the BMC address Ironfleet takes: "ipmi://127.0.0.1:<port>".
func (b *BMC) Address() string { return "ipmi://" + b.udpAddr }

// Port is Addr's port.
func (b *BMC) Port() int {
	_, p, _ := net.SplitHostPort(b.udpAddr)
	n, _ := strconv.Atoi(p)
	return n
}

// VMAddr is the TCP host:port for QEMU's ipmi-bmc-extern chardev; "" without
// Options.VMChardev.
func (b *BMC) VMAddr() string { return b.vmAddr }

// Dir is Options.Dir.
func (b *BMC) Dir() string { return b.opts.Dir }

// LogFile is ipmi_sim's output in Dir, appended across restarts, each run after a header
// line: its configuration errors and whatever it prints. With -n (no console: ipmi_sim
// aborts when its console's stdin is not a terminal) its -d debug output goes to syslog
// only.
func (b *BMC) LogFile() string { return b.logPath }

// PowerState is the host's power as the BMC holds it: "On" or "Off".
func (b *BMC) PowerState() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.power
}

// SetPowerState records that the host changed by itself (its VM exited: "Off"); no
// PowerAction is emitted.
func (b *BMC) SetPowerState(state string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.power = state
}

// BootDevice is the pending next-boot device as ipmi_sim last set it: "none", "pxe",
// "default", "cdrom" or "bios". A power-on or reset consumes it (back to "none").
func (b *BMC) BootDevice() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.boot
}

// OnPowerAction adds a hook called, in order, for every action that changes or concerns
// the host. Hooks run while ipmi_sim waits for its control program: they must not block.
func (b *BMC) OnPowerAction(hook func(PowerAction)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, hook)
}

// Log is the "set" commands ipmi_sim's chassis_control program was given, oldest first:
// "set power 1", "set boot pxe", "set reset 1", "set shutdown 1".
func (b *BMC) Log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.log)
}

// Restart kills ipmi_sim and starts it again on the same port, configuration and state
// directory: the "BMC goes away mid-session" fault. Sessions are lost; the host's power and
// pending boot device are not.
func (b *BMC) Restart() error {
	b.procMu.Lock()
	defer b.procMu.Unlock()
	if b.closed {
		return errors.New("ipmisim: BMC is closed")
	}
	if err := b.proc.stop(); err != nil {
		return err
	}
	b.proc = nil
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	return b.launchLocked(ctx)
}

// Close kills ipmi_sim and the control listener. It is idempotent.
func (b *BMC) Close() error {
	b.procMu.Lock()
	if b.closed {
		b.procMu.Unlock()
		return nil
	}
	b.closed = true
	var err error
	if b.proc != nil {
		err = b.proc.stop()
		b.proc = nil
	}
	b.procMu.Unlock()
	if b.control != nil {
		_ = b.control.Close()
		b.served.Wait()
	}
	return err
}
