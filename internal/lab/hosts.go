// Package lab runs Ironfleet's world on one machine: the control plane, a simulated fleet of
// BMCs and hosts, and a boot service that plays the external PXE operator. cmd/metal-lab,
// the controller tests and the benchmarks all build on it.
package lab

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

// Host is one simulated machine's in-band side: the hardware tree metalprobe reads.
type Host struct {
	UUID    string
	Fixture string
	Root    string
	// Disks are the host's disks, regular files <Root>/dev/<name> of DiskBytes each, filled
	// with a pattern so that a wipe can be checked byte by byte.
	Disks []string
}

// DiskBytes is the size of a simulated host's disk files: large enough that the metadata wipe
// (the first and last MiB) leaves a middle untouched, and that SimImage and its config drive
// fit.
const DiskBytes = 4 << 20

// PrepareHost copies the named fixture tree (metalprobe/testdata/hosts) to dir and makes uuid
// its DMI product UUID, so several simulated hosts can share one hardware shape and still be
// told apart by the registry.
func PrepareHost(fixture, dir, uuid string) (Host, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Host{}, err
	}
	root, err := fixtures.CopyRoot(fixture, dir)
	if err != nil {
		return Host{}, err
	}
	uuidFile := filepath.Join(root, "sys", "class", "dmi", "id", "product_uuid")
	if err := os.WriteFile(uuidFile, []byte(strings.ToUpper(uuid)+"\n"), 0o644); err != nil {
		return Host{}, fmt.Errorf("setting the host's UUID: %w", err)
	}
	expected, err := fixtures.LoadExpected(fixture)
	if err != nil {
		return Host{}, err
	}
	var disks []string
	for _, d := range expected.Disks {
		disks = append(disks, d.Name)
	}
	if err := fixtures.MakeDiskFiles(root, disks, DiskBytes); err != nil {
		return Host{}, fmt.Errorf("making the host's disks: %w", err)
	}
	return Host{UUID: strings.ToLower(uuid), Fixture: fixture, Root: root, Disks: disks}, nil
}
