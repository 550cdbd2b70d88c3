package ipmisim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerEnv marks every ipmi_sim this package starts with the pid of the process that
// started it, so CleanupStale can find those of a run that died.
const ownerEnv = "IRONFLEET_IPMISIM_OWNER"

// errExited: ipmi_sim ended before it answered (typically it could not bind its port).
var errExited = errors.New("ipmi_sim exited before answering")

// process is one ipmi_sim run.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has been reaped
	err  error         // Wait's result, valid once done is closed
}

func (b *BMC) launch(ctx context.Context) error {
	b.procMu.Lock()
	defer b.procMu.Unlock()
	if b.closed {
		return errors.New("ipmisim: BMC is closed")
	}
	return b.launchLocked(ctx)
}

// launchLocked starts ipmi_sim and waits until it answers a Get Channel Authentication
// Capabilities request; the caller holds procMu.
func (b *BMC) launchLocked(ctx context.Context) error {
	logFile, err := os.OpenFile(b.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("ipmisim: open %s: %w", b.logPath, err)
	}
	defer logFile.Close()
	args := []string{"-c", b.conf, "-f", b.emu, "-s", b.stateDir, "-n", "-d"}
	fmt.Fprintf(logFile, "%s%s: %s %q\n", logHeader, time.Now().Format(time.RFC3339Nano), b.program, args)
	cmd := exec.Command(b.program, args...)
	cmd.Dir = b.opts.Dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), ownerEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &process{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go p.supervise(started)
	if err := <-started; err != nil {
		return fmt.Errorf("ipmisim: start ipmi_sim: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	if err := waitAnswer(ctx, b.udpAddr, p.done); err != nil {
		return errors.Join(fmt.Errorf("ipmisim: ipmi_sim on %s: %w%s", b.udpAddr, err, b.logTail()), p.stop())
	}
	b.proc = p
	return nil
}

// supervise starts ipmi_sim from a thread it keeps locked until ipmi_sim is gone: Linux
// sends the parent-death signal when the forking thread ends, and Go ends threads that exit
// locked.
func (p *process) supervise(started chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := p.cmd.Start(); err != nil {
		started <- err
		return
	}
	started <- nil
	p.err = p.cmd.Wait()
	close(p.done)
}

// stop SIGKILLs ipmi_sim (its control program children too, through the process group)
// and waits until it is reaped.
func (p *process) stop() error {
	if p == nil {
		return nil
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("ipmisim: ipmi_sim %d still running 30s after SIGKILL", p.cmd.Process.Pid)
	}
}

// PID is ipmi_sim's process id, 0 when it is not running.
func (b *BMC) PID() int {
	b.procMu.Lock()
	defer b.procMu.Unlock()
	if b.proc == nil {
		return 0
	}
	select {
	case <-b.proc.done:
		return 0
	default:
		return b.proc.cmd.Process.Pid
	}
}

// getChannelAuthCaps is an IPMI 1.5 Get Channel Authentication Capabilities request
// outside a session (RMCP, auth type none, session 0): channel "this one" with the IPMI v2.0
// bit, administrator. Every BMC answers it before any login, so it shows one is up.
var getChannelAuthCaps = []byte{
	0x06, 0x00, 0xff, 0x07, // RMCP v1.0, no ack, sequence 0xff, class IPMI
	0x00, 0, 0, 0, 0, 0, 0, 0, 0, // auth type none, session sequence 0, session id 0
	0x09,             // message length
	0x20, 0x18, 0xc8, // BMC, NetFn App request, checksum
	0x81, 0x00, 0x38, 0x8e, 0x04, 0xb5, // remote console, seq 0, cmd 0x38, channel 0x8e, admin, checksum
}

// Ping sends one Get Channel Authentication Capabilities request to a BMC's UDP address
// and waits for an answer until ctx ends: a quick "is it up" that needs no credentials.
func Ping(ctx context.Context, addr string) error {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(time.Second)
	}
	if _, err := c.Write(getChannelAuthCaps); err != nil {
		return err
	}
	_ = c.SetReadDeadline(deadline)
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if n < 4 || buf[0] != 0x06 {
		return fmt.Errorf("not an RMCP answer (% x)", buf[:n])
	}
	return nil
}

// waitAnswer pings addr until it answers, the process ends or ctx does.
func waitAnswer(ctx context.Context, addr string, exited <-chan struct{}) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		err := Ping(pctx, addr)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return fmt.Errorf("no answer: %w (last: %v)", ctx.Err(), err)
		default:
		}
	}
}

// logHeader starts each run's section of the log.
const logHeader = "--- start "

// logTail is what ipmi_sim wrote since its last start, to explain a failure.
func (b *BMC) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return ""
	}
	text := string(data)
	if i := strings.LastIndex(text, logHeader); i >= 0 {
		if nl := strings.IndexByte(text[i:], '\n'); nl >= 0 {
			text = text[i+nl+1:]
		}
	}
	if len(text) > 2048 {
		text = text[len(text)-2048:]
	}
	if text = strings.TrimSpace(text); text == "" {
		return ""
	}
	return "; ipmi_sim said: " + text
}

// CleanupStale SIGKILLs ipmi_sims started by this package for processes that no longer
// exist (normally gone already through their parent-death signal). Those of live processes
// are left alone; other ipmi_sims are never touched.
func CleanupStale() error {
	prefix := []byte(ownerEnv + "=")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			v, ok := bytes.CutPrefix(kv, prefix)
			if !ok {
				continue
			}
			owner, _ := strconv.Atoi(string(v))
			if owner > 0 && !alive(owner) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("kill stale ipmi_sim %d: %w", pid, err))
				}
			}
			break
		}
	}
	return errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// CheckTools reports whether ipmi_sim and ipmitool (the tests' third-party client) are
// installed; make vm-deps installs both.
func CheckTools() error {
	for _, tool := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is missing: make vm-deps (apt-get install openipmi ipmitool): %w", tool, err)
		}
	}
	return nil
}
