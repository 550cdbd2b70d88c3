package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
)

// process is one of the node's programs, run inside its network namespace and its cgroup,
// logging to <dir>/logs/<name>.log.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// run starts a program inside the node's network namespace. Linux sends the parent-death
// signal when the thread that forked the child ends, so the child is forked from a thread
// locked for its whole life (it also holds the namespace, which the fork inherits); nothing
// the node runs outlives this process.
func (n *Node) run(name, bin string, args ...string) (*process, error) {
	if err := os.MkdirAll(filepath.Join(n.dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(n.logPath(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = n.dir
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), ownerEnv+"="+fmt.Sprint(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	target, err := netns.GetFromName(n.net.Name())
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	go func() {
		defer close(p.done)
		defer log.Close()
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, in the namespace
		err := netns.Set(target)
		_ = target.Close()
		if err == nil {
			err = cmd.Start()
		}
		if err == nil {
			err = n.enterCgroup(cmd.Process.Pid)
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
			}
		}
		started <- err
		if err != nil {
			p.err = err
			return
		}
		p.err = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	n.mu.Lock()
	n.procs = append(n.procs, p)
	n.mu.Unlock()
	n.logf("started %s (pid %d)", name, cmd.Process.Pid)
	return p, nil
}

// exited says whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop ends the process: SIGTERM, then SIGKILL after a grace period.
func (p *process) stop() error {
	if done, _ := p.exited(); done {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

func (n *Node) logPath(name string) string { return filepath.Join(n.dir, "logs", name+".log") }

// logTail is the end of a process's log, for error messages.
func (n *Node) logTail(name string, lines int) string {
	data, err := os.ReadFile(n.logPath(name))
	if err != nil {
		return ""
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// logTails ends an error message with the last lines of the named processes' logs.
func (n *Node) logTails(names ...string) string {
	var b bytes.Buffer
	for _, name := range names {
		if tail := n.logTail(name, 15); tail != "" {
			fmt.Fprintf(&b, "\n--- %s (%s) ---\n%s", name, n.logPath(name), tail)
		}
	}
	return b.String()
}

// Exec runs a command inside the node's network namespace (kubectl with the admin kubeconfig,
// ctr on the node's containerd) and returns its output.
func (n *Node) Exec(ctx context.Context, bin string, args ...string) ([]byte, error) {
	var out []byte
	err := n.net.Do(func() error {
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Stderr = &stderr
		var err error
		out, err = cmd.Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return nil
	})
	return out, err
}

// Kubectl runs the pinned kubectl as the administrator.
func (n *Node) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return n.Exec(ctx, filepath.Join(n.opts.ControlPlaneDir, "kubectl"), append([]string{"--kubeconfig", n.Kubeconfig}, args...)...)
}

// waitExited fails when a process has exited: a component that dies says so at once, not
// after the wait's timeout.
func (n *Node) waitExited() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.procs {
		if done, err := p.exited(); done {
			return errors.Join(fmt.Errorf("%s exited: %v", p.name, err), errors.New(n.logTails(p.name)))
		}
	}
	return nil
}
