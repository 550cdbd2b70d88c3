// Package layout checks the repository's layout rules that a path alone cannot enforce.
package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/ironfleet/ironfleet"

// shipped are the binaries Ironfleet ships (the manager's image, the boot service's, the Cluster
// API provider's, the probe's init and metalprobe).
var shipped = []string{
	module + "/cmd/manager",
	module + "/cmd/boot-service",
	module + "/cmd/capi-provider",
	module + "/metalprobe/...",
}

// TestShippedCodeNeverImportsTheHarness: everything under test/ stands in for the world
// (simulated BMCs, VMs, a real node, the lab); nothing that ships may depend on it.
func TestShippedCodeNeverImportsTheHarness(t *testing.T) {
	for _, pkg := range shipped {
		// Not the tests' imports (-test is off): a probe test may boot a VM.
		out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		var bad []string
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, module+"/test/") {
				bad = append(bad, dep)
			}
		}
		if len(bad) > 0 {
			t.Errorf("%s depends on the test harness: %s", pkg, strings.Join(bad, ", "))
		}
	}
}

// kinds are the reconcilers' packages, one per kind (or group of kinds) under
// internal/controller. What two of them share lives in the API package or in a package below
// them (settings, status, cached, bmcaccess, taints, internal/probeboot), never in one of them.
var kinds = []string{"enroll", "server", "claim", "maintenance", "firmware", "health"}

// TestNoKindImportsAnother: a kind's package, its tests included, never depends on another
// kind's; only internal/controller's setup wires them together.
func TestNoKindImportsAnother(t *testing.T) {
	kindPkg := map[string]string{}
	for _, k := range kinds {
		kindPkg[module+"/internal/controller/"+k] = k
	}
	// Every package under internal/controller that is not setup's must be a kind's or shared.
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"/internal/controller/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	if len(strings.Fields(string(out))) < len(kinds)+1 {
		t.Fatalf("go list found too few packages under internal/controller:\n%s", out)
	}
	for pkg, kind := range kindPkg {
		out, err := exec.Command("go", "list", "-deps", "-test", "-f", "{{.ImportPath}}", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps -test %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			// A test variant is listed as "pkg [pkg.test]".
			dep = strings.TrimSuffix(strings.Fields(dep + " ")[0], ".test")
			if other, ok := kindPkg[dep]; ok && other != kind {
				t.Errorf("the %s package depends on the %s package: what they share belongs in the API or a package below both", kind, other)
			}
			if dep == module+"/internal/controller" {
				t.Errorf("the %s package depends on internal/controller, which wires every kind", kind)
			}
		}
	}
}
