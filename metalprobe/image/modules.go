package image

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// WantedModules are the drivers the probe needs on the machines Ironfleet manages: the NICs
// and storage controllers of common servers (and QEMU's), plus virtio_pci under the virtio
// ones and virtio_rng so that getrandom never blocks in a VM without RDRAND. Their
// dependencies are added by ModuleClosure. A wanted module built into the kernel is skipped.
//
// af_packet (DHCP's raw socket), libata's SCSI translation (which gives SATA disks their
// vpd_pg80 serial in sysfs), devtmpfs, DMI and the 8250 console are built into Debian's
// kernel; ahci and sd_mod bring libata and scsi_mod as dependencies.
var WantedModules = []string{
	// NICs
	"virtio_net", "e1000", "e1000e", "igb", "ixgbe", "i40e", "ice", "mlx5_core", "bnxt_en", "tg3",
	// storage
	"virtio_blk", "virtio_scsi", "sd_mod", "nvme", "ahci", "megaraid_sas", "mpt3sas", "smartpqi",
	// buses, entropy, sockets
	"virtio_pci", "virtio_rng", "af_packet",
	// 802.1Q tagging, for a static probe network with a vlanID (virtual-media boots)
	"8021q",
	// the firmware's variables (/sys/firmware/efi/efivars): the boot mode and Secure Boot state
	// the probe reports
	"efivarfs",
}

// Module is one kernel module as the image ships it.
type Module struct {
	// Name is the module's name (modinfo name=, underscores).
	Name string `json:"name"`
	// File is the module's file name in the image's /lib/modules.
	File string `json:"file"`
	// Path is where the module is in the unpacked package (not in the manifest).
	Path string `json:"-"`
	// Depends are the modules it needs loaded first (modinfo depends= and softdep pre:).
	Depends []string `json:"depends,omitempty"`
}

// ModuleIndex finds modules by name in an unpacked kernel package.
type ModuleIndex struct {
	// paths maps a module name to its file.
	paths map[string]string
	// builtin holds the names of modules compiled into the kernel (modules.builtin).
	builtin map[string]bool
}

// moduleName is a module's name from its file name: kernel module names use underscores
// where file names often have hyphens (virtio-rng.ko is virtio_rng).
func moduleName(file string) string {
	base := filepath.Base(file)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	base = strings.TrimSuffix(base, ".ko")
	return strings.ReplaceAll(base, "-", "_")
}

// IndexModules lists the modules under <root>/lib/modules/<release>. Debian's bookworm
// packages ship them uncompressed (.ko); a compressed one (.ko.xz, .ko.zst) is an error, since
// the image would need a decompressor at build time.
func IndexModules(root, release string) (*ModuleIndex, error) {
	dir := filepath.Join(root, "lib", "modules", release)
	idx := &ModuleIndex{paths: map[string]string{}, builtin: map[string]bool{}}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		switch {
		case d.IsDir():
			return nil
		case strings.HasSuffix(name, ".ko"):
			idx.paths[moduleName(name)] = path
		case strings.Contains(name, ".ko."):
			return fmt.Errorf("%s is compressed; the image builder reads only uncompressed .ko modules", path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexing modules: %w", err)
	}
	if len(idx.paths) == 0 {
		return nil, fmt.Errorf("no modules under %s", dir)
	}
	builtin, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, fmt.Errorf("reading the built-in module list: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(builtin))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			idx.builtin[moduleName(line)] = true
		}
	}
	return idx, nil
}

// ReadModinfo reads a module's .modinfo ELF section: NUL-separated key=value strings. A key
// can repeat (alias=, softdep=), so values are lists.
func ReadModinfo(path string) (map[string][]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading module %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s has no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("reading .modinfo of %s: %w", path, err)
	}
	return parseModinfo(data), nil
}

func parseModinfo(data []byte) map[string][]string {
	info := map[string][]string{}
	for _, field := range bytes.Split(data, []byte{0}) {
		key, value, ok := strings.Cut(string(field), "=")
		if ok && key != "" {
			info[key] = append(info[key], value)
		}
	}
	return info
}

// dependsOf lists what modinfo says must be loaded first: depends= (comma-separated) and the
// pre: half of each softdep= ("pre: a b post: c").
func dependsOf(info map[string][]string) []string {
	var deps []string
	for _, list := range info["depends"] {
		for _, d := range strings.Split(list, ",") {
			if d = strings.TrimSpace(d); d != "" {
				deps = append(deps, moduleName(d))
			}
		}
	}
	for _, soft := range info["softdep"] {
		pre := false
		for _, word := range strings.Fields(soft) {
			switch word {
			case "pre:":
				pre = true
			case "post:":
				pre = false
			default:
				if pre {
					deps = append(deps, moduleName(word))
				}
			}
		}
	}
	slices.Sort(deps)
	return slices.Compact(deps)
}

// ModuleClosure resolves wanted and everything it depends on, and returns the modules in an
// order they can be loaded in: each after its dependencies, otherwise by name, so that the
// same package always gives the same list. A wanted module that is built in is skipped; one
// that is neither built in nor shipped is an error. A soft dependency that does not exist
// (softdeps name optional helpers) is skipped.
func (idx *ModuleIndex) ModuleClosure(wanted []string) ([]Module, error) {
	modules := map[string]*Module{}
	var load func(name string, required bool) error
	load = func(name string, required bool) error {
		if _, done := modules[name]; done || idx.builtin[name] {
			return nil
		}
		path, ok := idx.paths[name]
		if !ok {
			if !required {
				return nil
			}
			return fmt.Errorf("module %s is neither built in nor in the package", name)
		}
		info, err := ReadModinfo(path)
		if err != nil {
			return err
		}
		if n := info["name"]; len(n) == 1 && n[0] != name {
			return fmt.Errorf("module file %s calls itself %q, not %q", path, n[0], name)
		}
		m := &Module{Name: name, File: filepath.Base(path), Path: path}
		modules[name] = m
		hard := map[string]bool{}
		for _, list := range info["depends"] {
			for _, d := range strings.Split(list, ",") {
				hard[moduleName(d)] = true
			}
		}
		for _, dep := range dependsOf(info) {
			if err := load(dep, hard[dep]); err != nil {
				return fmt.Errorf("%s needs %w", name, err)
			}
			if !idx.builtin[dep] && modules[dep] != nil {
				m.Depends = append(m.Depends, dep)
			}
		}
		return nil
	}
	for _, name := range wanted {
		if err := load(name, true); err != nil {
			return nil, err
		}
	}
	return topoSort(modules)
}

// topoSort orders modules dependencies first, visiting names in sorted order so the result
// is deterministic.
func topoSort(modules map[string]*Module) ([]Module, error) {
	names := make([]string, 0, len(modules))
	for name := range modules {
		names = append(names, name)
	}
	slices.Sort(names)
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	var order []Module
	var visit func(name string, path []string) error
	visit = func(name string, path []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(path, name), " -> "))
		}
		state[name] = visiting
		m := modules[name]
		deps := slices.Clone(m.Depends)
		slices.Sort(deps)
		for _, dep := range deps {
			if _, ok := modules[dep]; !ok {
				continue
			}
			if err := visit(dep, append(path, name)); err != nil {
				return err
			}
		}
		state[name] = done
		order = append(order, *m)
		return nil
	}
	for _, name := range names {
		if err := visit(name, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
