package earlyboot

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

// ParseLoadOrder reads a load-order file (metalprobe/image.LoadOrderFile): one module file
// name a line, dependencies first; blank lines and # comments are skipped. A name with a slash
// would escape the modules' directory.
func ParseLoadOrder(r io.Reader) ([]string, error) {
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
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return files, nil
}

// LoadModules loads the modules the load-order file at path lists, from its directory, in
// order, with finit_module. An image's list is wider than any one machine, so a module that
// fails (a NIC driver whose firmware is missing, say) is returned in failed and the rest still
// load. err says the list itself could not be read; nothing was loaded then.
func LoadModules(path string) (loaded int, failed []error, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, nil, fmt.Errorf("reading the module load order: %w", err)
	}
	defer func() { _ = f.Close() }()
	files, err := ParseLoadOrder(f)
	if err != nil {
		return 0, nil, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, name := range files {
		if err := LoadModule(filepath.Join(filepath.Dir(path), name)); err != nil {
			failed = append(failed, fmt.Errorf("module %s: %w", name, err))
			continue
		}
		loaded++
	}
	return loaded, failed, nil
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
