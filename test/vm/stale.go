package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// netnsDir is where named network namespaces are bound, as `ip netns` and vishvananda/netns
// agree.
const netnsDir = "/run/netns"

// ownerEnv marks every QEMU this package starts with the pid of the process that started
// it, so CleanupStale can find QEMUs of a dead run even though they run in the host's
// namespace (they only hold tap descriptors).
const ownerEnv = "IRONFLEET_VM_OWNER"

// networkEnv marks a QEMU with the Network its taps belong to, so Network.Close can stop
// QEMUs still holding them: a tap descriptor keeps its namespace alive, unnamed, until the
// last holder exits.
const networkEnv = "IRONFLEET_VM_NETWORK"

var staleName = regexp.MustCompile(`^` + regexp.QuoteMeta(NamespacePrefix) + `(\d+)-\d+$`)

// CleanupStale removes what runs that have died left behind: QEMUs they started (normally
// already gone with them through their parent-death signal), processes inside their
// namespaces, and the namespaces, whose bridges and taps go with them. Namespaces of live
// processes, this one included, are left alone.
func CleanupStale() error {
	unlock, err := LockCleanup()
	if err != nil {
		return err
	}
	defer unlock()
	var errs []error
	errs = append(errs, killOrphanQEMUs())
	entries, err := os.ReadDir(netnsDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return errors.Join(errs...)
		}
		return errors.Join(append(errs, fmt.Errorf("list %s: %w", netnsDir, err))...)
	}
	for _, e := range entries {
		m := staleName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if pid, _ := strconv.Atoi(m[1]); processAlive(pid) {
			continue
		}
		if h, err := netns.GetFromPath(filepath.Join(netnsDir, e.Name())); err == nil {
			errs = append(errs, killProcessesIn(h))
			_ = h.Close()
		}
		errs = append(errs, deleteNamedNamespace(e.Name()))
	}
	return errors.Join(errs...)
}

// cleanupLock is the file whose lock makes one CleanupStale run at a time on this machine:
// several test processes (or a lab and a test) start networks at once.
const cleanupLock = "/run/ironfleet-vm-cleanup.lock"

// LockCleanup holds off every CleanupStale on this machine until unlock is called: whoever
// makes something that looks stale on purpose (a test of CleanupStale) holds it meanwhile, so
// another process's cleanup does not take it half made.
func LockCleanup() (unlock func(), err error) {
	f, err := os.OpenFile(cleanupLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the cleanup lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("taking the cleanup lock: %w", err)
	}
	return func() { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN); _ = f.Close() }, nil
}

// processAlive reports whether pid exists (a zombie counts as alive until reaped).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// killProcessesIn SIGKILLs every process whose network namespace is h's, except this one.
func killProcessesIn(h netns.NsHandle) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(h), &st); err != nil {
		return fmt.Errorf("stat network namespace: %w", err)
	}
	var errs []error
	forEachProcess(func(pid int) {
		var pst unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &pst) != nil || pst.Dev != st.Dev || pst.Ino != st.Ino {
			return
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill process %d in the namespace: %w", pid, err))
		}
	})
	return errors.Join(errs...)
}

// killOrphanQEMUs SIGKILLs processes carrying ownerEnv of a process that no longer exists.
func killOrphanQEMUs() error {
	return killMarked(ownerEnv, func(owner string) bool {
		pid, _ := strconv.Atoi(owner)
		return pid > 0 && !processAlive(pid)
	})
}

// killQEMUsOf SIGKILLs the processes started for a network's taps (networkEnv).
func killQEMUsOf(network string) error {
	return killMarked(networkEnv, func(v string) bool { return v == network })
}

// killMarked SIGKILLs every process whose environment sets key to a value match accepts.
// Environments are read from /proc; a process's own changes after exec do not show, which
// is fine for QEMU.
func killMarked(key string, match func(value string) bool) error {
	prefix := []byte(key + "=")
	var errs []error
	forEachProcess(func(pid int) {
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return
		}
		for kv := range bytes.SplitSeq(env, []byte{0}) {
			value, ok := bytes.CutPrefix(kv, prefix)
			if !ok {
				continue
			}
			if match(string(value)) {
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
					errs = append(errs, fmt.Errorf("kill process %d (%s=%s): %w", pid, key, value, err))
				}
			}
			return
		}
	})
	return errors.Join(errs...)
}

// forEachProcess calls fn with the pid of every process but this one.
func forEachProcess(fn func(pid int)) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		fn(pid)
	}
}
