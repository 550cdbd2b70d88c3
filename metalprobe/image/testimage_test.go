package image

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// repoProbeDir is where `make probe-image` builds ($IRONFLEET_PROBE_DIR, which the Makefile
// exports, else bin/probe, as the lab has it): the tests use that build when it is current (its
// manifest's source digest matches the sources), and otherwise rebuild it there.
func repoProbeDir(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("IRONFLEET_PROBE_DIR"); dir != "" {
		return dir
	}
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Join(filepath.Dir(strings.TrimSpace(string(out))), "bin", "probe")
}

var (
	imageOnce     sync.Once
	imageManifest *Manifest
	imageErr      error
)

// testImage returns the directory of a current build and its manifest, building at most
// once per test run.
func testImage(t *testing.T) (string, *Manifest) {
	t.Helper()
	dir := repoProbeDir(t)
	imageOnce.Do(func() {
		// Keep the version make built with, so that a current build is reused as it is.
		version := "dev"
		if data, err := os.ReadFile(filepath.Join(dir, ManifestFile)); err == nil {
			var m Manifest
			if json.Unmarshal(data, &m) == nil && m.ProbeVersion != "" {
				version = m.ProbeVersion
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		start := time.Now()
		var built bool
		imageManifest, built, imageErr = Build(ctx, Options{OutDir: dir, ProbeVersion: version})
		if imageErr == nil {
			what := "reused"
			if built {
				what = "built"
			}
			t.Logf("probe image %s in %s: %s (%s)", what, dir, time.Since(start).Round(10*time.Millisecond), sizes(imageManifest))
		}
	})
	require.NoError(t, imageErr, "building the probe image")
	return dir, imageManifest
}

func sizes(m *Manifest) string {
	var parts []string
	for _, f := range m.Files {
		parts = append(parts, f.Name+" "+mib(f.Size))
	}
	return strings.Join(parts, ", ") + ", total " + mib(m.TotalBytes)
}

func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
