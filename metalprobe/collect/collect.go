// Package collect reads a host's hardware with ghw and turns it into a report in the API's own
// types. Each subsystem is a separate collector: one that fails (or panics inside ghw) adds a
// line to the report's Warnings and the others still run.
//
// With Options.Root set, everything is read from that directory instead of the live system:
// ghw's chroot for the subsystems it reads, and the same root for the few sysfs files this
// package reads itself (link state, NIC driver, CPU architecture and frequency, the firmware's
// boot mode), for pci.ids, and for LLDP (<root>/lldpctl.json instead of running lldpctl).
// Nothing under a root ever touches the host's own hardware or runs a command.
package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jaypipes/ghw"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// Options say where to read from and how to label the report.
type Options struct {
	// Root is a directory holding a fixture tree (proc/, sys/, run/, ...) to read instead of
	// the live system. Empty or "/" means the live system.
	Root string
	// LLDPCtl is the lldpctl binary to run on the live system. Empty means "lldpctl" looked up
	// on PATH. Ignored under Root, where <Root>/lldpctl.json is read when present.
	LLDPCtl string
	// ProbeVersion is copied into the report.
	ProbeVersion string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// LLDPFixture is the file, relative to Options.Root, that stands in for `lldpctl -f json`.
const LLDPFixture = "lldpctl.json"

// Collect reads the host's hardware. It returns an error only when it cannot start (Root is
// not a directory) or ctx ends; a subsystem that cannot be read is a Warning in the report.
func Collect(ctx context.Context, opts Options) (*report.Report, error) {
	c, err := newCollector(opts)
	if err != nil {
		return nil, err
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	collectedAt := now().UTC()
	rep := &report.Report{CollectedAt: collectedAt, ProbeVersion: opts.ProbeVersion}
	rep.Inventory.Source = metalv1alpha1.InventorySourceProbe
	rep.Inventory.ReportedAt = &metav1.Time{Time: collectedAt}

	// Order matters: network reuses the PCI drivers, LLDP needs the NICs.
	steps := []struct {
		name string
		run  func(context.Context, *report.Report) error
	}{
		{"cpu", c.cpu},
		{"memory", c.memory},
		{"storage", c.storage},
		{"pci", c.pci},
		{"network", c.network},
		{"dmi", c.dmi},
		{"lldp", c.lldp},
		{"boot", c.boot},
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("collecting %s: %w", step.name, err)
		}
		if err := runStep(ctx, step.run, rep); err != nil {
			rep.Warnings = append(rep.Warnings, step.name+": "+err.Error())
		}
	}
	rep.Warnings = append(rep.Warnings, c.notes...)
	if dmi := rep.Inventory.DMI; dmi != nil {
		rep.SystemUUID = strings.ToLower(dmi.System.UUID)
	}
	return rep, nil
}

// runStep runs one collector, turning a panic inside ghw into an error so that one bad file in
// sysfs cannot take the whole report down.
func runStep(ctx context.Context, step func(context.Context, *report.Report) error, rep *report.Report) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return step(ctx, rep)
}

// collector carries what every step needs: where to read and how to call ghw.
type collector struct {
	// root is the absolute directory everything is read under; "/" on the live system.
	root string
	live bool
	// lldpctl is the binary to run on the live system ("" = look up on PATH).
	lldpctl string
	// pciDrivers maps PCI address to kernel driver, filled by the pci step for network.
	pciDrivers map[string]string
	// notes are warnings a step raised while still succeeding.
	notes []string
}

func newCollector(opts Options) (*collector, error) {
	root := opts.Root
	if root == "" {
		root = "/"
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolving root %q: %w", opts.Root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("reading root: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("root %s is not a directory", abs)
	}
	return &collector{root: abs, live: abs == "/", lldpctl: opts.LLDPCtl}, nil
}

// discardLogger swallows ghw's own log lines; what matters surfaces as Warnings instead.
var discardLogger = slog.New(slog.DiscardHandler)

// ghwOptions are the arguments every ghw call gets: read under root, no external tools
// (ethtool would look at the host's interfaces, not the fixture's), no topology scan (PCI
// only uses it for NUMA nodes, which the API has no field for), and no logging.
func (c *collector) ghwOptions() []any {
	return []any{
		ghw.WithChroot(c.root),
		ghw.WithDisableTools(),
		ghw.WithDisableTopology(),
		ghw.WithLogger(discardLogger),
	}
}

// path joins a path below root, e.g. c.path("sys/class/net") .
func (c *collector) path(elem ...string) string {
	return filepath.Join(append([]string{c.root}, elem...)...)
}

// note records a warning from a step that otherwise succeeded.
func (c *collector) note(format string, args ...any) {
	c.notes = append(c.notes, fmt.Sprintf(format, args...))
}

// readTrimmed reads a small file below root; "" when it is missing or unreadable.
func (c *collector) readTrimmed(elem ...string) string {
	b, err := os.ReadFile(c.path(elem...))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// exists says whether a path below root exists.
func (c *collector) exists(elem ...string) bool {
	_, err := os.Stat(c.path(elem...))
	return err == nil
}

// dirHasEntries says whether a directory below root exists and is not empty.
func (c *collector) dirHasEntries(elem ...string) (bool, error) {
	entries, err := os.ReadDir(c.path(elem...))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return len(entries) > 0, nil
}

// known maps ghw's placeholder for "could not read" to the API's empty value.
func known(s string) string {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "unknown") {
		return ""
	}
	return s
}
