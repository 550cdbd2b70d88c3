package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Where the image builder (metalprobe/image) puts the kernel modules and their load order.
const (
	modulesDir    = "/lib/modules"
	loadOrderFile = modulesDir + "/load-order"
)

// parseLoadOrder reads the load-order file: one module file name a line, dependencies first;
// blank lines and # comments are skipped. A name with a slash would escape modulesDir.
func parseLoadOrder(r io.Reader) ([]string, error) {
	var files []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsRune(line, '/') || line == ".." || !strings.HasSuffix(line, ".ko") {
			return nil, fmt.Errorf("line %d: %q is not a module file name", n, line)
		}
		files = append(files, line)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return files, nil
}

// loadModules loads every module in the load order with finit_module. The image's list is
// wider than any one machine, so a module that fails (a NIC driver whose firmware is missing,
// say) is logged and the rest still load; one already loaded (EEXIST) is fine.
func loadModules(log func(format string, args ...any)) error {
	f, err := os.Open(loadOrderFile)
	if err != nil {
		return fmt.Errorf("reading the module load order: %w", err)
	}
	defer func() { _ = f.Close() }()
	files, err := parseLoadOrder(f)
	if err != nil {
		return fmt.Errorf("reading %s: %w", loadOrderFile, err)
	}
	loaded := 0
	for _, name := range files {
		if err := loadModule(filepath.Join(modulesDir, name)); err != nil {
			log("module %s: %v", name, err)
			continue
		}
		loaded++
	}
	log("loaded %d of %d kernel modules", loaded, len(files))
	return nil
}

func loadModule(path string) error {
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
