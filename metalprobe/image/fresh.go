package image

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// sourceDigest hashes everything a build's bytes depend on: the Go toolchain, the kernel pin
// (and an explicit package file's name and size), the boot loaders' pins, the probe version, and the sources of /init,
// metalprobe and this builder (WantedModules and the initramfs layout live here) with the
// versions of every module they import. A build directory whose manifest records the same
// digest holds what a new build would write, so Build can keep it.
func sourceDigest(ctx context.Context, opts Options) (string, error) {
	h := sha256.New()
	goVersion, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("asking go for its version: %w", err)
	}
	fmt.Fprintf(h, "go %s\nkernel %s\nversion %q\n", bytes.TrimSpace(goVersion), opts.Kernel, opts.ProbeVersion)
	for _, pin := range opts.Bootloaders {
		fmt.Fprintf(h, "bootloader %s\n", pin)
	}
	if opts.KernelDeb != "" {
		fi, err := os.Stat(opts.KernelDeb)
		if err != nil {
			return "", fmt.Errorf("reading the kernel package: %w", err)
		}
		fmt.Fprintf(h, "deb %s %d\n", filepath.Base(opts.KernelDeb), fi.Size())
	}
	// One line per package: main-module packages with their directory and files, others
	// by module version (go.sum pins their contents), the standard library by nothing (the
	// toolchain version covers it).
	const format = `{{if .Module}}{{if .Module.Main}}M {{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{else}}D {{.Module.Path}} {{.Module.Version}}{{with .Module.Replace}} {{.Path}} {{.Version}}{{end}}{{end}}{{end}}`
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", format, InitPackage, MetalprobePackage, builderPackage)
	cmd.Dir = opts.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing the probe's packages: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		if fields[0] != "M" {
			fmt.Fprintln(h, strings.Join(fields, " "))
			continue
		}
		pkg, dir, files := fields[1], fields[2], fields[3:]
		fmt.Fprintf(h, "M %s\n", pkg)
		for _, name := range files {
			if err := hashFile(h, filepath.Join(dir, name), name); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// builderPackage is this package: its sources decide what goes into the image.
const builderPackage = "github.com/ironfleet/ironfleet/metalprobe/image"

func hashFile(h io.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("hashing the sources: %w", err)
	}
	defer func() { _ = f.Close() }()
	fmt.Fprintf(h, "F %s\n", name)
	if _, err := io.Copy(h, f); err != nil {
		return fmt.Errorf("hashing %s: %w", path, err)
	}
	return nil
}

// current returns the manifest in dir when it was built from digest and its files are intact.
func current(dir, digest string) (*Manifest, bool) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, false
	}
	var m Manifest
	if json.Unmarshal(data, &m) != nil || m.SourceDigest != digest || len(m.Files) == 0 || len(m.ISO) == 0 {
		return nil, false
	}
	for _, f := range append(slices.Clone(m.Files), m.ISO...) {
		data, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil || digestOf(f.Name, data) != f {
			return nil, false
		}
	}
	return &m, true
}
