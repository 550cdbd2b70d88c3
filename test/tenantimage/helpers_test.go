package tenantimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// requireOr skips the test, saying why, when ok is false, and fails it instead when CI is
// set: in CI (as root, with `make test`'s packages) a skip would hide that nothing was tested.
func requireOr(t *testing.T, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	why := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		t.Fatalf("%s (CI is set, so this fails instead of skipping)", why)
	}
	t.Skip(why)
}

// requireTools is requireOr for the programs that build the disk.
func requireTools(t *testing.T) {
	t.Helper()
	_, err := findTools(context.Background())
	requireOr(t, err == nil, "cannot build the tenant image: %v", err)
}

// requireVMs is requireOr for what booting a VM on a private network needs.
func requireVMs(t *testing.T) {
	t.Helper()
	requireOr(t, os.Geteuid() == 0, "booting the tenant image needs root for the VM's network namespace and tap (euid %d)", os.Geteuid())
	_, err := exec.LookPath("qemu-system-x86_64")
	requireOr(t, err == nil, "booting the tenant image needs QEMU: apt-get install --no-install-recommends qemu-system-x86 ipxe-qemu (%v)", err)
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
