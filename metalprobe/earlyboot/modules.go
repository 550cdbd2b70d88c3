package earlyboot

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Module is one line of a load-order file (metalprobe/image.LoadOrderFile).
type Module struct {
	// File is the module's file name, in the load-order file's directory.
	File string
	// Name is the module's name: File without ".ko", hyphens made underscores.
	Name string
	// Depends are the names of the modules it needs loaded first, each on an earlier line.
	Depends []string
	// PCI are its PCI alias patterns: when there are any, it drives PCI devices only and is
	// wanted only when one of them matches a device present.
	PCI []string
	// Dependency says it is in the image only because others need it: it is loaded only
	// when one of them is.
	Dependency bool
}

// ParseLoadOrder reads a load-order file, as metalprobe/image.LoadOrder writes it: one module
// a line, dependencies first,
//
//	<file> [depends=<name>,...] [pci=<pattern>,...] [dependency]
//
// separated by spaces; blank lines and # comments are skipped. It refuses, with the line's
// number, a file name that is not a .ko or has a slash (it would escape the modules'
// directory), a module listed twice, a dependency not on an earlier line, an empty or
// repeated field and a field it does not know.
func ParseLoadOrder(r io.Reader) ([]Module, error) {
	var modules []Module
	listed := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20) // a driver's pci= can hold a few hundred patterns
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		file := fields[0]
		if strings.ContainsRune(file, '/') || !strings.HasSuffix(file, ".ko") || file == ".ko" || strings.ContainsAny(file, "=,") {
			return nil, fmt.Errorf("line %d: %q is not a module file name", n, file)
		}
		m := Module{File: file, Name: ModuleName(file)}
		if listed[m.Name] {
			return nil, fmt.Errorf("line %d: module %s is listed twice", n, m.Name)
		}
		seen := map[string]bool{}
		for _, field := range fields[1:] {
			key, value, hasValue := strings.Cut(field, "=")
			if seen[key] {
				return nil, fmt.Errorf("line %d: %s appears twice", n, key)
			}
			seen[key] = true
			switch {
			case key == "dependency" && !hasValue:
				m.Dependency = true
			case key == "depends" && hasValue:
				for _, dep := range strings.Split(value, ",") {
					if !listed[dep] {
						return nil, fmt.Errorf("line %d: %s depends on %q, which no line before it lists", n, m.Name, dep)
					}
					m.Depends = append(m.Depends, dep)
				}
			case key == "pci" && hasValue:
				for _, pattern := range strings.Split(value, ",") {
					if pattern == "" {
						return nil, fmt.Errorf("line %d: an empty pci= pattern", n)
					}
					m.PCI = append(m.PCI, pattern)
				}
			default:
				return nil, fmt.Errorf("line %d: %q is not a field of a load-order line", n, field)
			}
		}
		listed[m.Name] = true
		modules = append(modules, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return modules, nil
}

// ModuleName is a module's name from its file name: kernel module names use underscores where
// file names often have hyphens (virtio-rng.ko is virtio_rng), as metalprobe/image names them.
func ModuleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(file, ".ko"), "-", "_")
}

// PCIModaliases reads the modalias of every PCI device under the sysfs root sysfs (/sys):
// bus/pci/devices/*/modalias, such as "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00".
// The kernel enumerates PCI before it runs /init, so they are all there. An error means what
// this machine has is unknown.
func PCIModaliases(sysfs string) ([]string, error) {
	dir := filepath.Join(sysfs, "bus", "pci", "devices")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the PCI devices: %w", err)
	}
	var modaliases []string
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name(), "modalias"))
		if err != nil {
			return nil, fmt.Errorf("reading the PCI devices: %w", err)
		}
		if alias := strings.TrimSpace(string(data)); alias != "" {
			modaliases = append(modaliases, alias)
		}
	}
	return modaliases, nil
}

// MatchesAlias says whether a module alias pattern matches a device's modalias, as kmod's
// fnmatch does: *, ? and [...], which path.Match has too (modaliases have no '/'), once
// fnmatch's negated class [!...] is written path.Match's way, [^...]. (The kernel writes PCI
// aliases with * alone; the rest is for completeness.) A pattern that does not compile
// matches: better to load a driver for nothing than to miss a device.
func MatchesAlias(pattern, modalias string) bool {
	ok, err := path.Match(strings.ReplaceAll(pattern, "[!", "[^"), modalias)
	return ok || err != nil
}

// Select decides which of modules (a load-order file's, in its order) to load on a machine
// whose PCI devices have the modaliases pci, the way udev would: a module with PCI patterns
// is wanted when one of them matches a device, one without when it is not there only as a
// dependency; a dependency of a module that loads loads too, whatever its own patterns. load
// keeps the file's order (dependencies first); skip are the rest.
func Select(modules []Module, pci []string) (load, skip []Module) {
	needed := map[string]bool{}
	// Dependencies are on earlier lines, so one pass from the end sees every module that
	// needs one before the module itself.
	for i := len(modules) - 1; i >= 0; i-- {
		m := modules[i]
		if !needed[m.Name] && !wanted(m, pci) {
			continue
		}
		needed[m.Name] = true
		for _, dep := range m.Depends {
			needed[dep] = true
		}
	}
	for _, m := range modules {
		if needed[m.Name] {
			load = append(load, m)
		} else {
			skip = append(skip, m)
		}
	}
	return load, skip
}

// wanted says a module is wanted for itself on a machine with these PCI modaliases.
func wanted(m Module, pci []string) bool {
	if m.Dependency {
		return false
	}
	if len(m.PCI) == 0 {
		return true
	}
	for _, pattern := range m.PCI {
		for _, alias := range pci {
			if MatchesAlias(pattern, alias) {
				return true
			}
		}
	}
	return false
}

// Loaded is what LoadModules did.
type Loaded struct {
	// Total is how many modules the load-order file lists.
	Total int
	// Loaded are the names of the modules loaded (or loaded already), in load order.
	Loaded []string
	// Skipped are the names of the modules not loaded because no device present needs them.
	Skipped []string
	// Failed are the modules that were to load and could not (a NIC driver whose firmware is
	// missing, a filesystem the firmware lacks), one error each, naming the module.
	Failed []error
	// PCIErr says the PCI devices could not be read: every module was tried then.
	PCIErr error
}

// LoadModules loads, from the directory of the load-order file at path, in its order and with
// finit_module, the modules that this machine needs (Select) given the PCI devices under the
// sysfs root sysfs (/sys). When those cannot be read it loads every module, and says so in
// PCIErr. An image's list is wider than any one machine, so a module that fails is returned in
// Failed and the rest still load. err says the list itself could not be read; nothing was
// loaded then.
func LoadModules(path, sysfs string) (Loaded, error) {
	f, err := os.Open(path)
	if err != nil {
		return Loaded{}, fmt.Errorf("reading the module load order: %w", err)
	}
	defer func() { _ = f.Close() }()
	modules, err := ParseLoadOrder(f)
	if err != nil {
		return Loaded{}, fmt.Errorf("reading %s: %w", path, err)
	}
	res := Loaded{Total: len(modules)}
	load := modules
	if pci, err := PCIModaliases(sysfs); err != nil {
		res.PCIErr = err
	} else {
		var skip []Module
		load, skip = Select(modules, pci)
		for _, m := range skip {
			res.Skipped = append(res.Skipped, m.Name)
		}
	}
	for _, m := range load {
		if err := LoadModule(filepath.Join(filepath.Dir(path), m.File)); err != nil {
			res.Failed = append(res.Failed, fmt.Errorf("module %s: %w", m.File, err))
			continue
		}
		res.Loaded = append(res.Loaded, m.Name)
	}
	return res, nil
}

// LoadModule loads the module file at path; one already loaded (EEXIST) is fine.
func LoadModule(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	err = unix.FinitModule(int(f.Fd()), "", 0)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	return err
}
