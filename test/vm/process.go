package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// run is one QEMU process, from start to exit.
type run struct {
	cmd         *exec.Cmd
	boot        BootDevice
	biosVersion string        // the SMBIOS type 0 version it publishes ("": the firmware's own)
	done        chan struct{} // closed once QEMU has exited and been reaped
	err         error         // Wait's result, valid once done is closed
	ready       atomic.Bool   // Start succeeded: an exit from now on is news for OnExit
	stopping    atomic.Bool   // this package is stopping it: the exit is not news

	monMu sync.Mutex
	mon   *qmpConn
}

// qmpConnectTimeout bounds how long Start waits for QEMU's monitor to answer; it answers
// within a fraction of a second unless QEMU failed.
const qmpConnectTimeout = 30 * time.Second

// start runs QEMU; the caller holds v.ops.
//
// QEMU runs in the host's network namespace and gets its NICs as tap descriptors opened
// inside the Network (-netdev tap,fd=N). That keeps every packet inside the namespace
// without running QEMU in it, and avoids the fragile alternatives: `ip netns exec` adds a
// dependency and a process between us and QEMU, and forking from a thread that entered the
// namespace ties QEMU's parent-death signal to a thread Go may throw away.
func (v *VM) start(boot BootDevice) error {
	v.mu.Lock()
	closed, running, def := v.closed, v.run != nil, v.nextDefinition()
	v.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if running {
		return ErrRunning
	}
	taps := make([]*os.File, 0, len(v.taps))
	defer func() { // QEMU has its own copies; ours would keep the taps' carrier up after it exits
		for _, f := range taps {
			_ = f.Close()
		}
	}()
	layout := v.layout
	for _, name := range v.taps {
		f, err := v.opts.Network.OpenTap(name)
		if err != nil {
			return fmt.Errorf("VM %q: %w", v.def.Name, err)
		}
		layout.NICFDs = append(layout.NICFDs, 3+len(taps)) // ExtraFiles start at descriptor 3
		taps = append(taps, f)
	}
	args, err := Args(def, layout, boot)
	if err != nil {
		return fmt.Errorf("VM %q: %w", v.def.Name, err)
	}
	if err := os.Remove(layout.QMPSocket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("VM %q: remove the old QMP socket: %w", v.def.Name, err)
	}
	if err := markConsole(layout.ConsoleLog, boot); err != nil {
		return fmt.Errorf("VM %q: %w", v.def.Name, err)
	}
	logFile, err := os.OpenFile(v.qemuLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("VM %q: open QEMU's log: %w", v.def.Name, err)
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "%s%s: %s %q\n", qemuLogHeader, time.Now().Format(time.RFC3339Nano), v.qemu, args)

	cmd := exec.Command(v.qemu, args...)
	cmd.Dir = v.opts.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.ExtraFiles = taps
	cmd.Env = append(os.Environ(), ownerEnv+"="+strconv.Itoa(os.Getpid()))
	if v.opts.Network != nil {
		cmd.Env = append(cmd.Env, networkEnv+"="+v.opts.Network.Name())
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig: syscall.SIGKILL, // QEMU never outlives this process...
		Setpgid:   true,            // ...and a terminal's ^C reaches this process, which cleans up, not QEMU
	}
	r := &run{cmd: cmd, boot: boot, biosVersion: def.SMBIOS.BIOSVersion, done: make(chan struct{})}
	started := make(chan error, 1)
	go v.supervise(r, started)
	if err := <-started; err != nil {
		return fmt.Errorf("VM %q: start QEMU: %w", v.def.Name, err)
	}
	if err := r.connect(layout.QMPSocket); err != nil {
		return errors.Join(fmt.Errorf("VM %q: %w%s", v.def.Name, err, v.qemuLogTail()), v.kill())
	}
	r.ready.Store(true)
	select {
	case <-r.done:
		return fmt.Errorf("VM %q: QEMU exited right after starting: %v%s", v.def.Name, r.err, v.qemuLogTail())
	default:
		return nil
	}
}

// supervise starts QEMU and waits for it. Linux sends the parent-death signal when the
// *thread* that forked the child ends, not the process; Go ends threads that exit locked,
// so QEMU is forked from a thread this goroutine keeps locked until QEMU is gone.
func (v *VM) supervise(r *run, started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := r.cmd.Start(); err != nil {
		started <- err
		return
	}
	v.mu.Lock()
	v.run = r
	v.mu.Unlock()
	started <- nil

	r.err = r.cmd.Wait()
	r.disconnect()
	v.mu.Lock()
	if v.run == r {
		v.run = nil
	}
	hooks := append([]func(error){}, v.exitHook...)
	v.mu.Unlock()
	close(r.done)
	if r.ready.Load() && !r.stopping.Load() {
		for _, h := range hooks {
			h(r.err)
		}
	}
}

// connect polls until QEMU's monitor accepts the QMP handshake, QEMU exits, or the deadline.
func (r *run) connect(socket string) error {
	deadline := time.Now().Add(qmpConnectTimeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		mon, err := dialQMP(socket, time.Second)
		if err == nil {
			r.monMu.Lock()
			r.mon = mon
			r.monMu.Unlock()
			return nil
		}
		lastErr = err
		if time.Now().After(deadline) {
			return fmt.Errorf("QMP monitor at %s did not answer within %s: %w", socket, qmpConnectTimeout, lastErr)
		}
		select {
		case <-r.done:
			return fmt.Errorf("QEMU exited before its QMP monitor answered: %v", r.err)
		case <-tick.C:
		}
	}
}

func (r *run) disconnect() {
	r.monMu.Lock()
	defer r.monMu.Unlock()
	if r.mon != nil {
		_ = r.mon.close()
		r.mon = nil
	}
}

// command runs one QMP command and returns its "return" value.
func (r *run) command(name string, args any) (json.RawMessage, error) {
	r.monMu.Lock()
	mon := r.mon
	r.monMu.Unlock()
	if mon == nil {
		return nil, ErrNotRunning
	}
	out, err := mon.run(name, args)
	if err != nil {
		return nil, fmt.Errorf("QMP %s: %w", name, err)
	}
	return out, nil
}

// QMP runs a QMP command on the running QEMU (args may be nil) and returns its "return"
// value. It is for what the VM has no method for, like query-* in tests.
func (v *VM) QMP(command string, args any) (json.RawMessage, error) {
	r := v.current()
	if r == nil {
		return nil, ErrNotRunning
	}
	out, err := r.command(command, args)
	if err != nil {
		return nil, fmt.Errorf("VM %q: %w", v.def.Name, err)
	}
	return out, nil
}

func unmarshal(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }

// ConsoleStartMarker begins the line markConsole writes at each start, so readers of the
// console log can tell power-ons apart.
const ConsoleStartMarker = "[ironfleet] power on, booting from "

// markConsole ends whatever line a killed QEMU left unfinished and notes the power-on, so
// the next firmware banner starts a line of its own.
func markConsole(path string, boot BootDevice) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open the console log: %w", err)
	}
	_, err = fmt.Fprintf(f, "\r\n%s%s\r\n", ConsoleStartMarker, boot)
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("mark the console log: %w", err)
	}
	return nil
}

// qemuLogHeader starts each start's section of QEMU's log.
const qemuLogHeader = "--- start "

// qemuLogTail is what QEMU wrote since its last start (without the command line), to
// explain a failed start.
func (v *VM) qemuLogTail() string {
	data, err := os.ReadFile(v.qemuLog)
	if err != nil {
		return ""
	}
	text := string(data)
	if i := strings.LastIndex(text, qemuLogHeader); i >= 0 {
		if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
			text = text[i+nl+1:]
		}
	}
	const tail = 2048
	if len(text) > tail {
		text = text[len(text)-tail:]
	}
	if text = strings.TrimSpace(text); text == "" {
		return ""
	}
	return "; QEMU said: " + text
}
