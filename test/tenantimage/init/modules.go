package main

// The probe's /init (metalprobe/init, a main package that cannot be imported) loads its
// modules the same way: a load-order file written by the image builder, finit_module each.

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

// parseLoadOrder reads a load-order file: one module file name a line, dependencies first;
// blank lines and # comments are skipped. A name with a slash would escape the directory.
func parseLoadOrder(r io.Reader) ([]string, error) {
	var files []string
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.ContainsRune(line, '/') || !strings.HasSuffix(line, ".ko") {
			return nil, fmt.Errorf("line %d: %q is not a module file name", n, line)
		}
		files = append(files, line)
	}
	return files, sc.Err()
}

// loadModules loads the modules listed in the load-order file (a path relative to /), from
// its directory, in order. A module that fails is reported and the rest still load; one
// already loaded is fine.
func loadModules(loadOrder string) (loaded, total int, errs []error) {
	path := "/" + loadOrder
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, []error{fmt.Errorf("reading the module load order: %w", err)}
	}
	defer func() { _ = f.Close() }()
	files, err := parseLoadOrder(f)
	if err != nil {
		return 0, 0, []error{fmt.Errorf("reading %s: %w", path, err)}
	}
	for _, name := range files {
		if err := loadModule(filepath.Join(filepath.Dir(path), name)); err != nil {
			errs = append(errs, fmt.Errorf("module %s: %w", name, err))
			continue
		}
		loaded++
	}
	return loaded, len(files), errs
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
