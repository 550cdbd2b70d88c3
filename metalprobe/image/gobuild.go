package image

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Packages the image builder compiles into the initramfs.
const (
	InitPackage       = "github.com/ironfleet/ironfleet/metalprobe/init"
	MetalprobePackage = "github.com/ironfleet/ironfleet/metalprobe"
	versionVariable   = "github.com/ironfleet/ironfleet/metalprobe/cli.Version"
)

// goBuild compiles a package into a static linux/amd64 binary in dir and returns its bytes.
// The flags make the binary depend only on the sources and the Go toolchain: no cgo (the
// initramfs has no libc), no file paths (-trimpath), no build ID or VCS stamp (both change
// with the checkout, not the code), no symbols (-s -w: smaller).
func goBuild(ctx context.Context, moduleDir, pkg, version, dir string, log io.Writer) ([]byte, error) {
	out := filepath.Join(dir, filepath.Base(pkg))
	ldflags := "-s -w -buildid="
	if version != "" {
		ldflags += " -X " + versionVariable + "=" + version
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", out, pkg)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64", "GOFLAGS=")
	var stderr tailBuffer
	cmd.Stdout = log
	cmd.Stderr = io.MultiWriter(log, &stderr)
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(stderr.String()))
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return nil, fmt.Errorf("reading the %s binary: %w", pkg, err)
	}
	return data, nil
}
