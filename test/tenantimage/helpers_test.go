package tenantimage

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ciskip"
)

// requireTools is ciskip.Unless for the programs that build the disk.
func requireTools(t *testing.T) {
	t.Helper()
	_, err := findTools(context.Background())
	ciskip.Unless(t, err == nil, "cannot build the tenant image: %v", err)
}

// requireVMs is ciskip.Unless for what booting a VM on a private network needs.
func requireVMs(t *testing.T) {
	t.Helper()
	ciskip.Unless(t, os.Geteuid() == 0, "booting the tenant image needs root for the VM's network namespace and tap (euid %d)", os.Geteuid())
	_, err := exec.LookPath("qemu-system-x86_64")
	ciskip.Unless(t, err == nil, "booting the tenant image needs QEMU: apt-get install --no-install-recommends qemu-system-x86 ipxe-qemu (%v)", err)
}

var (
	imageOnce     sync.Once
	imageDir      string
	imageManifest *Manifest
	imageErr      error
)

// testImage returns the directory of a current build ($IRONFLEET_TENANT_DIR, else bin/tenant:
// where `make tenant-image` builds) and its manifest (Ensure, once per run).
func testImage(t *testing.T) (string, *Manifest) {
	t.Helper()
	requireTools(t)
	imageOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		imageDir, imageManifest, imageErr = Ensure(ctx)
		if imageErr == nil {
			t.Logf("tenant image current in %s after %s", imageDir, time.Since(start).Round(10*time.Millisecond))
		}
	})
	require.NoError(t, imageErr, "building the tenant image")
	return imageDir, imageManifest
}

// logTail logs the last lines of a log, where a boot problem shows.
func logTail(t *testing.T, what string, lines []string) {
	t.Helper()
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	t.Logf("%s ends:\n%s", what, strings.Join(lines, "\n"))
}
