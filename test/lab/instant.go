package lab

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/cli"
	"github.com/ironfleet/ironfleet/metalprobe/collect"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/metalprobe/post"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// InstantProbes boots hosts instantly, for the benchmark: metalprobe's own collector reads each
// fixture tree once, and every boot reports that inventory under its host's UUID to the real
// registry with the token its ignition carries. A wipe is reported done as asked without
// touching a disk. Thousands of boots then measure the operator, not this machine's disks.
// Hosts need no tree of their own (InstantHost).
type InstantProbes struct {
	mu      sync.Mutex
	reports map[string]*report.Report // by fixture
	clients map[string]*http.Client   // by registry CA
}

// NewInstantProbes returns an empty cache of fixture reports.
func NewInstantProbes() *InstantProbes {
	return &InstantProbes{reports: map[string]*report.Report{}, clients: map[string]*http.Client{}}
}

// InstantHost is a host booted by InstantProbes: a fixture's shape under its own UUID.
func InstantHost(fixture, uuid string) Host {
	return Host{UUID: uuid, Fixture: fixture}
}

// Probe is a BootService.Probe.
func (p *InstantProbes) Probe(ctx context.Context, ign []byte, host Host) error {
	cfg, err := ignition.Parse(ign)
	if err != nil {
		return err
	}
	rep, err := p.inventory(ctx, host.Fixture)
	if err != nil {
		return err
	}
	// The host reads what its firmware holds: perhaps a placeholder, the same on many hosts.
	rep.SystemUUID, rep.CollectedAt = host.ReadsUUID(), time.Now().UTC()
	if rep.Inventory.DMI != nil {
		dmi := *rep.Inventory.DMI
		dmi.System.UUID = strings.ToUpper(rep.SystemUUID)
		if host.SerialNumber != "" {
			dmi.System.SerialNumber = host.SerialNumber
		}
		rep.Inventory.DMI = &dmi
	}
	switch cfg.Mode {
	case ignition.ModeWipe:
		rep.Wipe = instantWipe(rep.Inventory.Storage, cfg.WipePolicy, cfg.WipeExclusions)
	case ignition.ModeProvision:
		rep.Install = instantInstall(rep.Inventory.Storage, cfg.Install)
	}
	c, err := p.client(cfg.RegistryCA)
	if err != nil {
		return err
	}
	return post.Send(ctx, c, cfg.RegistryURL, cfg.Token, rep, post.DefaultBackoff)
}

// inventory is a copy of the fixture's report, collected on first use.
func (p *InstantProbes) inventory(ctx context.Context, fixture string) (*report.Report, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rep, ok := p.reports[fixture]
	if !ok {
		root, err := fixtures.Root(fixture)
		if err != nil {
			return nil, err
		}
		if rep, err = collect.Collect(ctx, collect.Options{Root: root, ProbeVersion: cli.Version}); err != nil {
			return nil, fmt.Errorf("collecting fixture %s: %w", fixture, err)
		}
		p.reports[fixture] = rep
	}
	out := *rep
	out.Inventory = *rep.Inventory.DeepCopy()
	out.Warnings = append([]string(nil), rep.Warnings...)
	return &out, nil
}

// client is an HTTPS client trusting the registry's CA, one per CA so connections are reused.
func (p *InstantProbes) client(caPEM string) (*http.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.clients[caPEM]; ok {
		return c, nil
	}
	pool, err := ignition.CertPool([]byte(caPEM))
	if err != nil {
		return nil, err
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	transport.MaxIdleConnsPerHost = 64
	c := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	p.clients[caPEM] = c
	return c, nil
}

// instantInstall reports the image installed on the first non-removable disk, without fetching
// or writing anything.
func instantInstall(disks []metalv1alpha1.StorageDevice, in *ignition.Install) *metalv1alpha1.InstallReport {
	rep := &metalv1alpha1.InstallReport{Image: in.Image, ImageChecksum: in.ImageChecksum, Succeeded: true,
		Reason: metalv1alpha1.InstallReasonInstalled, Message: "instant boot (benchmark): no I/O", ServedDigest: in.ImageChecksum}
	for _, d := range disks {
		if !d.Removable {
			rep.Disk, rep.DiskSerial = d.Name, d.SerialNumber
			break
		}
	}
	return rep
}

// instantWipe reports every disk wiped as policy asks, but those the probe skips (wipe.Skip):
// removable ones too.
func instantWipe(disks []metalv1alpha1.StorageDevice, policy metalv1alpha1.WipePolicy, exclusions []metalv1alpha1.WipeExclusion) *metalv1alpha1.WipeReport {
	if policy == "" {
		policy = metalv1alpha1.DefaultWipePolicy
	}
	method := string(policy)
	if policy == metalv1alpha1.WipeErase {
		method = string(metalv1alpha1.WipeZero) // what a disk without an erase of its own reports
	}
	rep := &metalv1alpha1.WipeReport{Policy: policy}
	for _, d := range disks {
		if wipe.Skip(d, exclusions) == "" {
			rep.Disks = append(rep.Disks, metalv1alpha1.DiskWipe{Name: d.Name, SerialNumber: d.SerialNumber,
				Method: method, Succeeded: true, Message: "instant boot (benchmark): no I/O"})
		}
	}
	return rep
}
