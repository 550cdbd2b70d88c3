package tenantimage

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

	"github.com/ironfleet/ironfleet/metalprobe/image"
)

// sourceDigest hashes everything the image's bytes depend on: the Go toolchain, the kernel pin
// (and an explicit package file's name and size), the versions of the Debian packages that
// write the disk, and the sources of /init and of this builder (with metalprobe/image, whose
// kernel, module and initramfs code it uses) with the versions of every module they import.
// It is metalprobe/image's source digest for this image's packages.
func sourceDigest(ctx context.Context, opts Options, t *tools) (string, error) {
	h := sha256.New()
	goVersion, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("asking go for its version: %w", err)
	}
	fmt.Fprintf(h, "go %s\nkernel %s\n", bytes.TrimSpace(goVersion), opts.Kernel)
	if opts.KernelDeb != "" {
		fi, err := os.Stat(opts.KernelDeb)
		if err != nil {
			return "", fmt.Errorf("reading the kernel package: %w", err)
		}
		fmt.Fprintf(h, "deb %s %d\n", filepath.Base(opts.KernelDeb), fi.Size())
	}
	pkgs := make([]string, 0, len(t.versions))
	for pkg := range t.versions {
		pkgs = append(pkgs, pkg)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		fmt.Fprintf(h, "dpkg %s %s\n", pkg, t.versions[pkg])
	}
	// One line per package: main-module packages with their directory and files, others by
	// module version (go.sum pins their contents), the standard library by nothing (the
	// toolchain version covers it).
	const format = `{{if .Module}}{{if .Module.Main}}M {{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{else}}D {{.Module.Path}} {{.Module.Version}}{{with .Module.Replace}} {{.Path}} {{.Version}}{{end}}{{end}}{{end}}`
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f", format, InitPackage, builderPackage)
	cmd.Dir = opts.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing the tenant image's packages: %w: %s", err, strings.TrimSpace(stderr.String()))
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

// ReadManifest reads dir's manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}

// current returns the manifest in dir when it was built from digest and its files (and
// SHA256SUMS) are intact.
func current(dir, digest string) (*Manifest, bool) {
	m, err := ReadManifest(dir)
	if err != nil || m.SourceDigest != digest || len(m.Files) == 0 {
		return nil, false
	}
	if sums, err := os.ReadFile(filepath.Join(dir, SumsFile)); err != nil || string(sums) != sha256Sums(m.Files) {
		return nil, false
	}
	for _, f := range m.Files {
		if !intact(filepath.Join(dir, f.Name), f) {
			return nil, false
		}
	}
	return m, true
}

// intact reports whether the file at path has the size and digest recorded.
func intact(path string, want image.FileDigest) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	n, err := io.Copy(h, f)
	return err == nil && n == want.Size && hex.EncodeToString(h.Sum(nil)) == want.SHA256
}
