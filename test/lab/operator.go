package lab

// The operator the lab runs: in-process, as cmd/manager wires it, or as its own cmd/manager
// process, which can be stopped, killed and restarted.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/ironfleet/ironfleet/test/testenv"
)

// StartManager starts the operator, with exactly the wiring cmd/manager uses: in-process, or as
// a cmd/manager process when Options.ManagerBinary is set.
func (l *Lab) StartManager() error {
	if l.Opts.ManagerBinary != "" {
		return l.startManagerProcess()
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stopManager, l.managerDone = cancel, make(chan error, 1)
	go func() { l.managerDone <- l.prepared.Run(ctx, l.managerCfg) }()
	return nil
}

func (l *Lab) startManagerProcess() error {
	if l.procLog == nil {
		f, err := os.OpenFile(filepath.Join(l.Opts.Dir, "manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		l.procLog = f
	}
	cmd := exec.Command(l.Opts.ManagerBinary, l.ManagerOptions.Args()...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig)
	cmd.Stdout, cmd.Stderr = l.procLog, l.procLog
	// The manager never outlives the lab, even when the lab's process is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the manager process: %w", err)
	}
	l.proc, l.managerDone = cmd, make(chan error, 1)
	go func() { l.managerDone <- cmd.Wait() }()
	return nil
}

// ManagerPID is the operator's process ID when it runs as a process, else 0.
func (l *Lab) ManagerPID() int {
	if l.proc == nil {
		return 0
	}
	return l.proc.Process.Pid
}

// StopManager stops the operator and waits until it has: a process gets SIGTERM (SIGKILL after
// 30 s), an in-process manager has its context cancelled.
func (l *Lab) StopManager() error {
	if l.proc != nil {
		_ = l.proc.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-l.managerDone:
			l.proc = nil
			return err
		case <-time.After(30 * time.Second):
			return l.KillManager()
		}
	}
	if l.stopManager == nil {
		return nil
	}
	l.stopManager()
	l.stopManager = nil
	err := <-l.managerDone
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// KillManager kills the operator's process with SIGKILL, as a crash or an OOM kill would, and
// waits until it is gone. An in-process manager is stopped instead.
func (l *Lab) KillManager() error {
	if l.proc == nil {
		return l.StopManager()
	}
	_ = l.proc.Process.Kill()
	<-l.managerDone
	l.proc = nil
	return nil
}

// RestartManager stops the operator and starts a new one: fresh caches, fresh BMC sessions.
func (l *Lab) RestartManager() error {
	if err := l.StopManager(); err != nil {
		return err
	}
	return l.StartManager()
}

// BuildManager builds cmd/manager into dir and returns the binary's path, for
// Options.ManagerBinary.
func BuildManager(dir string) (string, error) {
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "manager")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/manager")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/manager: %w\n%s", err, out)
	}
	return bin, nil
}
