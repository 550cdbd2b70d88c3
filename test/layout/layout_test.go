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
