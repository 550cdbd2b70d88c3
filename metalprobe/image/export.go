package image

import (
	"context"
	"io"
)

// GoBuild compiles a main package of this Go module into a static linux/amd64 binary the way
// the probe's /init and metalprobe are compiled (CGO off, -trimpath, no build ID, VCS stamp or
// symbols), so that other boot images (test/tenantimage) are reproducible the same way. It
// runs go build in moduleDir ("." when empty), writes the binary into the directory dir, and
// returns its bytes; log receives go build's output (nil: discarded).
func GoBuild(ctx context.Context, moduleDir, pkg, dir string, log io.Writer) ([]byte, error) {
	if moduleDir == "" {
		moduleDir = "."
	}
	if log == nil {
		log = io.Discard
	}
	return goBuild(ctx, moduleDir, pkg, "", dir, log)
}
