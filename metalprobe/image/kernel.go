package image

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// kernelPinFile is the one place the kernel version is written.
//
//go:embed kernel.version
var kernelPinFile string

// KernelPin is a Debian kernel package at an exact version.
type KernelPin struct {
	Package string `json:"package"`
	Version string `json:"version"`
}

// DefaultKernelPin is the pin in kernel.version.
func DefaultKernelPin() KernelPin {
	pin, err := ParseKernelPin(kernelPinFile)
	if err != nil {
		panic(fmt.Sprintf("metalprobe/image/kernel.version: %v", err))
	}
	return pin
}

// ParseKernelPin reads "<package> <version>" from the first line that is not blank or a comment.
func ParseKernelPin(text string) (KernelPin, error) {
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return KernelPin{}, fmt.Errorf("want \"<package> <version>\", got %q", line)
		}
		pin := KernelPin{Package: fields[0], Version: fields[1]}
		if !strings.HasPrefix(pin.Package, "linux-image-") {
			return KernelPin{}, fmt.Errorf("package %q is not a linux-image-* package", pin.Package)
		}
		return pin, nil
	}
	return KernelPin{}, errors.New("no pin in the file")
}

// Release is the kernel release the package installs modules under (uname -r),
// e.g. 6.1.0-56-amd64.
func (p KernelPin) Release() string {
	return strings.TrimPrefix(p.Package, "linux-image-")
}

// String is the pin as apt-get spells it.
func (p KernelPin) String() string { return p.Package + "=" + p.Version }

// debName is the file name apt-get download gives the package (an epoch's colon is %3a).
func (p KernelPin) debName() string {
	return p.Package + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_amd64.deb"
}

// DefaultCacheDir is where downloaded packages (the kernel's, the boot loaders') are kept
// between builds:
// $XDG_CACHE_HOME/ironfleet/kernel, else ~/.cache/ironfleet/kernel.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the cache directory: %w", err)
	}
	return filepath.Join(dir, "ironfleet", "kernel"), nil
}

// FetchKernelDeb returns the path of the pinned package in cacheDir, downloading it with
// apt-get download when it is not there yet. apt-get checks the package against the archive's
// signed index; the download lands in a temporary directory and is renamed into the cache, so
// an interrupted download never passes for a cached package.
func FetchKernelDeb(ctx context.Context, pin KernelPin, cacheDir string, log io.Writer) (string, error) {
	return fetchDeb(ctx, pin.String(), pin.debName(), cacheDir, log)
}

// UnpackDeb extracts a package into dir with dpkg-deb -x (never installing it on this host).
func UnpackDeb(ctx context.Context, deb, dir string, log io.Writer) error {
	if err := run(ctx, "", log, "dpkg-deb", "-x", deb, dir); err != nil {
		return fmt.Errorf("unpacking %s: %w", deb, err)
	}
	return nil
}

// run runs a command in dir, its output going to log; the error carries the tail of stderr.
func run(ctx context.Context, dir string, log io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr tailBuffer
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, &stderr)
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%w: %s", err, msg)
		}
		return err
	}
	return nil
}

// tailBuffer keeps the last 2 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2048 {
		t.b = t.b[len(t.b)-2048:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
