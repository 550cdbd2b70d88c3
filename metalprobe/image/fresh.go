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

// sourceDigest is the probe image's SourceDigest: besides the kernel, the boot loaders' pins
// and the probe version; the sources of /init, metalprobe and this builder (WantedModules and
// the initramfs layout live here).
func sourceDigest(ctx context.Context, opts Options) (string, error) {
	pins := []string{fmt.Sprintf("version %q", opts.ProbeVersion)}
	for _, pin := range opts.Bootloaders {
		pins = append(pins, "bootloader "+pin.String())
	}
	return SourceDigest(ctx, SourceInputs{
		ModuleDir: opts.ModuleDir,
		Kernel:    opts.Kernel,
		KernelDeb: opts.KernelDeb,
		Pins:      pins,
		Packages:  []string{InitPackage, MetalprobePackage, builderPackage},
	})
}

// builderPackage is this package: its sources decide what goes into the image.
const builderPackage = "github.com/ironfleet/ironfleet/metalprobe/image"

// SourceInputs are what a boot image's bytes depend on, for SourceDigest.
type SourceInputs struct {
	// ModuleDir is a directory inside this Go module, where go list runs.
	ModuleDir string
	// Kernel is the kernel package's pin.
	Kernel KernelPin
	// KernelDeb is an explicit kernel package file, hashed by name and size; "" when the
	// package is fetched by its pin.
	KernelDeb string
	// Pins are the builder's other inputs, a line each: versions of what it compiles in or
	// of the tools that write the image.
	Pins []string
	// Packages are the Go packages the builder compiles and the builder's own: their sources,
	// and those of every package of this module they import, decide the image's bytes.
	Packages []string
}

// SourceDigest hashes everything a boot image's bytes depend on: the Go toolchain, the kernel
// pin, the builder's other pins, and the sources of in.Packages with the versions of every
// module they import. A build directory whose manifest records the same digest holds what a
// new build would write, so a builder keeps it (this package's, and test/tenantimage's).
func SourceDigest(ctx context.Context, in SourceInputs) (string, error) {
	h := sha256.New()
	goVersion, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("asking go for its version: %w", err)
	}
	fmt.Fprintf(h, "go %s\nkernel %s\n", bytes.TrimSpace(goVersion), in.Kernel)
	for _, pin := range in.Pins {
		fmt.Fprintln(h, pin)
	}
	if in.KernelDeb != "" {
		fi, err := os.Stat(in.KernelDeb)
		if err != nil {
			return "", fmt.Errorf("reading the kernel package: %w", err)
		}
		fmt.Fprintf(h, "deb %s %d\n", filepath.Base(in.KernelDeb), fi.Size())
	}
	// One line per package: main-module packages with their directory and files, others
	// by module version (go.sum pins their contents), the standard library by nothing (the
	// toolchain version covers it).
	const format = `{{if .Module}}{{if .Module.Main}}M {{.ImportPath}} {{.Dir}}{{range .GoFiles}} {{.}}{{end}}{{range .EmbedFiles}} {{.}}{{end}}{{else}}D {{.Module.Path}} {{.Module.Version}}{{with .Module.Replace}} {{.Path}} {{.Version}}{{end}}{{end}}{{end}}`
	args := append([]string{"list", "-deps", "-f", format}, in.Packages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = in.ModuleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("listing the packages of %s: %w: %s", strings.Join(in.Packages, " "), err, strings.TrimSpace(stderr.String()))
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

// current returns the manifest in dir when it was built from digest and its files are intact.
func current(dir, digest string) (*Manifest, bool) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, false
	}
	var m Manifest
	if json.Unmarshal(data, &m) != nil || m.SourceDigest != digest || len(m.Files) == 0 || len(m.ISO) == 0 || len(m.SignedChain) == 0 {
		return nil, false
	}
	if !Intact(dir, slices.Concat(m.Files, m.ISO, m.SignedChain)) {
		return nil, false
	}
	return &m, true
}

// Intact reports whether every file in dir has the size and digest recorded.
func Intact(dir string, files []FileDigest) bool {
	for _, want := range files {
		f, err := os.Open(filepath.Join(dir, want.Name))
		if err != nil {
			return false
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		_ = f.Close()
		if err != nil || n != want.Size || hex.EncodeToString(h.Sum(nil)) != want.SHA256 {
			return false
		}
	}
	return true
}
