package ipmisim

import (
	"os"
	"testing"
)

// RequireTools is for tests that run ipmi_sim or ipmitool: when either is missing it fails the
// test in CI (env CI set: make test installs both with make vm-deps, so that is a broken
// setup) and skips it elsewhere, saying why.
func RequireTools(t testing.TB) {
	t.Helper()
	err := CheckTools()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("IPMI tests cannot run in CI: %v (make vm-deps installs openipmi and ipmitool)", err)
	}
	t.Skipf("IPMI tests need what this machine lacks: %v (make vm-deps installs openipmi and ipmitool; in CI they fail instead)", err)
}
