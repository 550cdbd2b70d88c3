package tenantimage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/ironfleet/ironfleet/metalprobe/image"
)

// sourceDigest is the tenant image's metalprobe/image.SourceDigest: besides the kernel, the
// versions of the Debian packages that write the disk; the sources of /init and of this
// builder (with metalprobe/image, whose kernel, module and initramfs code it uses).
func sourceDigest(ctx context.Context, opts Options, t *tools) (string, error) {
	pins := make([]string, 0, len(t.versions))
	for pkg, version := range t.versions {
		pins = append(pins, "dpkg "+pkg+" "+version)
	}
	slices.Sort(pins)
	return image.SourceDigest(ctx, image.SourceInputs{
		ModuleDir: opts.ModuleDir,
		Kernel:    opts.Kernel,
		KernelDeb: opts.KernelDeb,
		Pins:      pins,
		Packages:  []string{InitPackage, builderPackage},
	})
}

// ReadManifest reads dir's manifest.json.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}

// current returns the manifest in dir when it was built from digest and its files (and
// SHA256SUMS) are intact.
func current(dir, digest string) (*Manifest, bool) {
	m, err := ReadManifest(dir)
	if err != nil || m.SourceDigest != digest || len(m.Files) == 0 {
		return nil, false
	}
	if sums, err := os.ReadFile(filepath.Join(dir, SumsFile)); err != nil || string(sums) != sha256Sums(m.Files) {
		return nil, false
	}
	if !image.Intact(dir, m.Files) {
		return nil, false
	}
	return m, true
}
