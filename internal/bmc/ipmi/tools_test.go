package ipmi

import (
	"os"
	"os/exec"
	"testing"
)

// requireTool finds a program the test needs: missing in CI it fails the test, elsewhere it
// skips it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required in CI (make vm-deps installs it): %v", name, err)
	}
	t.Skipf("%s not installed: %v", name, err)
	return ""
}
