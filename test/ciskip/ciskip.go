// Package ciskip is the tests' rule for what a machine may lack (root, QEMU, a built image):
// elsewhere such a test is skipped, saying why; in CI (the environment variable CI set, as root,
// with make test's dependencies) a skip would hide that nothing was tested, so it fails.
package ciskip

import (
	"fmt"
	"os"
	"testing"
)

// Unless skips t, saying why, when ok is false, and fails it instead when CI is set.
func Unless(t testing.TB, ok bool, format string, args ...any) {
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
