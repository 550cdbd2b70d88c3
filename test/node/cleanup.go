package node

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// baseDir holds each run's directory, <pid>: state, logs, certificates, containerd's root.
const baseDir = "/var/lib/ironfleet-node"

// cgroupPrefix names each run's cgroup, ironfleet-node-<pid>, in every hierarchy: its
// processes in system/, the kubelet's pods under pods/.
const cgroupPrefix = "ironfleet-node-"

// ownerEnv marks every process the node starts with the pid of the process that started it.
const ownerEnv = "IRONFLEET_NODE_OWNER"

var staleCgroup = regexp.MustCompile(`^` + regexp.QuoteMeta(cgroupPrefix) + `(\d+)$`)

// cgroupName is this run's cgroup.
func cgroupName() string { return cgroupPrefix + strconv.Itoa(os.Getpid()) }

// hierarchy is a mounted cgroup hierarchy.
type hierarchy struct {
	path string
	v2   bool
}

// hierarchies are the cgroup hierarchies the node's cgroups are made in: the v1 ones, or the
// v2 one when there are none (a hybrid host's "unified" mount holds no controllers the kubelet
// uses on v1).
func hierarchies() ([]hierarchy, error) {
	v1, v2, err := mountedHierarchies()
	if len(v1) > 0 {
		return v1, err
	}
	return v2, err
}

// allHierarchies are every mounted hierarchy: runc makes a container's cgroup in a hybrid
// host's "unified" one too, and what is made there goes with the rest.
func allHierarchies() ([]hierarchy, error) {
	v1, v2, err := mountedHierarchies()
	return append(v1, v2...), err
}

func mountedHierarchies() (v1, v2 []hierarchy, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(s.Text())
		sep := -1
		for i, field := range fields {
			if field == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		switch fields[sep+1] {
		case "cgroup":
			v1 = append(v1, hierarchy{path: fields[4]})
		case "cgroup2":
			v2 = append(v2, hierarchy{path: fields[4], v2: true})
		}
	}
	return v1, v2, s.Err()
}

// makeCgroups makes this run's cgroup, its system/ and pods/, in every hierarchy.
func makeCgroups() error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		for _, rel := range []string{cgroupName(), cgroupName() + "/system", cgroupName() + "/pods"} {
			if err := makeCgroup(h, rel); err != nil {
				return fmt.Errorf("cgroup %s in %s: %w", rel, h.path, err)
			}
		}
	}
	return nil
}

func makeCgroup(h hierarchy, rel string) error {
	dir := filepath.Join(h.path, rel)
	parent := filepath.Dir(dir)
	if h.v2 {
		// Children get the parent's controllers only when it hands them down.
		if data, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers")); err == nil {
			var enable []string
			for _, c := range strings.Fields(string(data)) {
				enable = append(enable, "+"+c)
			}
			_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644)
		}
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// A v1 cpuset starts empty, and takes no process until it has CPUs and memory nodes.
	for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
		mine, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || strings.TrimSpace(string(mine)) != "" {
			continue
		}
		theirs, err := os.ReadFile(filepath.Join(parent, file))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, file), theirs, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// enterCgroup moves a process into this run's system/ cgroup, in every hierarchy.
func (n *Node) enterCgroup(pid int) error {
	hs, err := hierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := os.WriteFile(filepath.Join(h.path, cgroupName(), "system", "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("moving %d into its cgroup in %s: %w", pid, h.path, err)
		}
	}
	return nil
}

// removeCgroups kills every process left in a run's cgroup (the pods' containers, their
// shims) and removes it, in every hierarchy.
func removeCgroups(name string) error {
	hs, err := allHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	deadline := time.Now().Add(10 * time.Second)
	for _, h := range hs {
		root := filepath.Join(h.path, name)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) }) // deepest first
		for _, dir := range dirs {
			for {
				pids := cgroupProcs(dir)
				if len(pids) == 0 {
					break
				}
				if time.Now().After(deadline) {
					errs = append(errs, fmt.Errorf("processes %v in %s do not die", pids, dir))
					break
				}
				for _, pid := range pids {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
				time.Sleep(50 * time.Millisecond) // a retry of the kill, not synchronisation: SIGKILL takes a moment
			}
			if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func cgroupProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// unmountUnder detaches every mount at or below dir, deepest first: the containers' root
// filesystems, their shm, the kubelet's volumes, the pods' network namespaces.
func unmountUnder(dir string) error {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			points = append(points, mp)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, mp := range points {
		if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", mp, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeRun removes a run's mounts, cgroups and directory.
func removeRun(dir string) error {
	errs := []error{unmountUnder(dir)}
	errs = append(errs, removeCgroups(cgroupPrefix+filepath.Base(dir)))
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// cleanupStale removes what runs that have died left: their directories (with the mounts under
// them) and cgroups. Their network namespaces go with test/vm's own cleanup.
func cleanupStale() error {
	var errs []error
	if entries, err := os.ReadDir(baseDir); err == nil {
		for _, e := range entries {
			if pid, err := strconv.Atoi(e.Name()); err == nil && !alive(pid) {
				errs = append(errs, removeRun(filepath.Join(baseDir, e.Name())))
			}
		}
	}
	hs, err := allHierarchies()
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	seen := map[string]bool{}
	for _, h := range hs {
		entries, _ := os.ReadDir(h.path)
		for _, e := range entries {
			m := staleCgroup.FindStringSubmatch(e.Name())
			if m == nil || seen[e.Name()] {
				continue
			}
			if pid, _ := strconv.Atoi(m[1]); !alive(pid) {
				seen[e.Name()] = true
				errs = append(errs, removeCgroups(e.Name()))
			}
		}
	}
	return errors.Join(errs...)
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
