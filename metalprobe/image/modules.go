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
	"unicode"
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
	// PCI are its PCI alias patterns (modinfo alias=pci:v...d..., sorted) when it drives PCI
	// devices and nothing else (pciAliases): /init loads it only when one of these matches a
	// device present (earlyboot.Select). Empty when it has no PCI alias or a device alias of
	// another bus (virtio:, scsi:, cpu:...): it loads on every machine. Written into
	// LoadOrderFile, not the manifest, which has their count.
	PCI []string `json:"-"`
	// PCIAliases is len(PCI).
	PCIAliases int `json:"pciAliases,omitempty"`
	// Dependency says the module is in the image only because others need it (it was not
	// wanted itself): /init loads it when one of those loads, and otherwise not.
	Dependency bool `json:"dependency,omitempty"`
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

// pciAliases are the PCI alias patterns of the module name, sorted, when it drives PCI
// devices only (see Module.PCI): it has some, and each of its other aliases names no device a
// machine could have without the module, being
//   - a plain name, without "<bus>:", which modprobe takes for the module's (mpt3sas's
//     "mpt2sas", an older driver's name; fs-efivarfs, rtnl-link-vlan);
//   - one of the module's own auxiliary devices, "auxiliary:<name>.<device>" (mlx5_core's
//     auxiliary:mlx5_core.eth), which only the module itself creates, under its PCI device.
//
// nil when it has no PCI alias, or any alias of another bus (virtio:, scsi:, usb:, acpi*:,
// platform:, another module's auxiliary devices...): that module loads on every machine.
func pciAliases(name string, info map[string][]string) []string {
	var pci []string
	for _, a := range info["alias"] {
		bus, _, device := strings.Cut(a, ":")
		switch {
		case bus == "pci":
			pci = append(pci, a)
		case !device, strings.HasPrefix(a, "auxiliary:"+name+"."):
		default:
			return nil
		}
	}
	slices.Sort(pci)
	return slices.Compact(pci)
}

// ModuleClosure resolves wanted and everything it depends on, and returns the modules in an
// order they can be loaded in: each after its dependencies, otherwise by name, so that the
// same package always gives the same list. A wanted module that is built in is skipped; one
// that is neither built in nor shipped is an error. A soft dependency that does not exist
// (softdeps name optional helpers) is skipped. Modules that are not in wanted are marked
// Dependency.
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
		pci := pciAliases(name, info)
		m := &Module{Name: name, File: filepath.Base(path), Path: path, PCI: pci, PCIAliases: len(pci), Dependency: !slices.Contains(wanted, name)}
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

// LoadOrder is the content of LoadOrderFile for modules, which are in load order (as
// ModuleClosure returns them): a comment header, then one line a module,
//
//	<file> [depends=<name>,<name>...] [pci=<pattern>,<pattern>...] [dependency]
//
// its fields separated by single spaces, in this order, each but <file> left out when empty:
//   - <file> is the module's file in ModulesDir; the module's name is the file's without
//     ".ko", hyphens made underscores (moduleName), as /init derives it.
//   - depends= are the names of the modules it needs loaded first (Module.Depends), each on an
//     earlier line.
//   - pci= are its PCI alias patterns (Module.PCI), globs that kmod and udev match against a
//     device's modalias: /init loads the module only when one matches a PCI device present.
//   - dependency says it is in the image only because others need it (Module.Dependency):
//     /init loads it only when one of those loads.
//
// A line without pci= and dependency is loaded on every machine. earlyboot.ParseLoadOrder reads
// this. Names and patterns are sorted, so the same modules always give the same bytes. A file or
// module name or a pattern that holds a space or a comma (a file name a slash), or a dependency
// not on an earlier line, cannot be written and is an error.
func LoadOrder(modules []Module) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Kernel modules in load order (dependencies first), written by metalprobe/image.\n")
	b.WriteString("# <file> [depends=<module>,...] [pci=<alias pattern>,...] [dependency]: see image.LoadOrder.\n")
	listed := map[string]bool{}
	for _, m := range modules {
		if !isLoadOrderWord(m.File) || strings.ContainsRune(m.File, '/') || !strings.HasSuffix(m.File, ".ko") || moduleName(m.File) != m.Name {
			return nil, fmt.Errorf("module %q: its file name %q cannot be written in the load order (one word ending in .ko, no slash or comma, named as the module)", m.Name, m.File)
		}
		if listed[m.Name] {
			return nil, fmt.Errorf("module %s is listed twice", m.Name)
		}
		b.WriteString(m.File)
		if len(m.Depends) > 0 {
			deps := slices.Clone(m.Depends)
			slices.Sort(deps)
			deps = slices.Compact(deps)
			for _, d := range deps {
				if !listed[d] {
					return nil, fmt.Errorf("module %s depends on %q, which is not listed before it", m.Name, d)
				}
			}
			b.WriteString(" depends=" + strings.Join(deps, ","))
		}
		if len(m.PCI) > 0 {
			pci := slices.Clone(m.PCI)
			slices.Sort(pci)
			pci = slices.Compact(pci)
			for _, p := range pci {
				if !isLoadOrderWord(p) || !strings.HasPrefix(p, "pci:") {
					return nil, fmt.Errorf("module %s: its alias %q cannot be written in the load order (a pci: pattern without spaces or commas)", m.Name, p)
				}
			}
			b.WriteString(" pci=" + strings.Join(pci, ","))
		}
		if m.Dependency {
			b.WriteString(" dependency")
		}
		b.WriteString("\n")
		listed[m.Name] = true
	}
	return []byte(b.String()), nil
}

// isLoadOrderWord says s can be one item of a load-order line: not empty, no space (nor any
// other white space or control character), no comma.
func isLoadOrderWord(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r == ',' || unicode.IsSpace(r) || unicode.IsControl(r)
	})
}
