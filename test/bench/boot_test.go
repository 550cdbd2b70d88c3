package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/testenv"
	"github.com/ironfleet/ironfleet/test/vm"
)

// BootResult is the boot benchmark's record (docs/bench/boot.json): how long a real VM takes
// from the BMC's power-on to its probe's report reaching the Server, and what it boots.
type BootResult struct {
	Commit  string  `json:"commit"`
	Date    string  `json:"date"`
	Machine Machine `json:"machine"`
	VMs     int     `json:"vms"`
	// Paths is each VM's boot path, in VM order: "BIOS PXE (iPXE)", "UEFI PXE (iPXE)", then
	// "UEFI Secure Boot PXE (shim, GRUB)" for the Secure Boot VMs and "UEFI HTTP boot (iPXE)"
	// for the HTTP boot VMs.
	Paths []string `json:"paths"`
	// Stages is, for each VM in VM order, when its console first showed each boot stage
	// (lab.BootStage), in seconds after its power-on: where the time goes.
	Stages [][]StageAt `json:"stages"`
	// PowerOnToReportSeconds is each VM's time, in VM order (Paths).
	PowerOnToReportSeconds []float64 `json:"powerOnToReportSeconds"`
	MedianSeconds          float64   `json:"medianSeconds"`
	MaxSeconds             float64   `json:"maxSeconds"`
	// PowerOnToAvailableSeconds is each VM's time until its Server is Available (the report,
	// then the operator's transition), in VM order.
	PowerOnToAvailableSeconds []float64 `json:"powerOnToAvailableSeconds"`
	// TargetSeconds is the bound on a VM's power-on to Available.
	TargetSeconds float64 `json:"targetSeconds"`
	// ProbeImage is the probe's kernel + initramfs, from bin/probe/manifest.json.
	ProbeImage probeImage `json:"probeImage"`
}

// StageAt is when a boot stage first showed on a VM's console.
type StageAt struct {
	Stage   string  `json:"stage"`
	Seconds float64 `json:"seconds"`
}

type probeImage struct {
	KernelPackage  string `json:"kernelPackage"`
	KernelBytes    int64  `json:"kernelBytes"`
	InitramfsBytes int64  `json:"initramfsBytes"`
	TotalBytes     int64  `json:"totalBytes"`
	LimitBytes     int64  `json:"limitBytes"`
}

// TestBenchBoot measures real network boots (make bench): BENCH_VMS (2: BIOS and UEFI) VMs,
// BENCH_SECURE_BOOT_VMS (1) UEFI VMs with Secure Boot enforced and BENCH_HTTP_BOOT_VMS (1)
// UEFI VMs that boot by UEFI HTTP boot, in two rounds (the BIOS and UEFI VMs, then the others),
// power on together from their BMCs, network-boot the probe through the boot service (iPXE over
// TFTP or HTTP, or the signed chain), and report.
// The time of each is from the PXE power-on the BMC recorded to the moment the Server holds
// the probe's report; each boot stage's time is read from the VM's console as it goes.
func TestBenchBoot(t *testing.T) {
	if os.Getenv("IRONFLEET_BENCH") == "" {
		t.Skip("the benchmark runs with `make bench` (IRONFLEET_BENCH=1)")
	}
	if err := lab.CanRunVMs(); err != nil {
		t.Fatalf("the boot benchmark needs VMs: %v", err)
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	counts := map[string]int{"BENCH_VMS": 2, "BENCH_SECURE_BOOT_VMS": 1, "BENCH_HTTP_BOOT_VMS": 1, "BENCH_VIRTUAL_MEDIA": 1, "BENCH_URI_BOOT": 1}
	for name := range counts {
		if s := os.Getenv(name); s != "" {
			counts[name], err = strconv.Atoi(s)
			require.NoError(t, err, name)
		}
	}
	vms, sbVMs, httpVMs := counts["BENCH_VMS"], counts["BENCH_SECURE_BOOT_VMS"], counts["BENCH_HTTP_BOOT_VMS"]
	vmedia, uriBoot := counts["BENCH_VIRTUAL_MEDIA"] > 0, counts["BENCH_URI_BOOT"] > 0
	// Rounds of (by default) two VMs each, as the figures of the BIOS and UEFI paths have
	// always been taken: four TCG VMs on two cores would measure the contention, not the paths.
	// Network boot: BIOS and UEFI PXE; Secure Boot PXE and DHCP-led HTTP boot. Virtual media:
	// BIOS and Secure Boot from the ISO. By URI: UEFI and Secure Boot, the ISO over HTTP.
	rounds := []lab.Options{{VMs: vms}, {SecureBootVMs: sbVMs, HTTPBootVMs: httpVMs}}
	if vmedia {
		rounds = append(rounds, lab.Options{VMs: 1, SecureBootVMs: 1, VirtualMedia: true})
	}
	if uriBoot {
		rounds = append(rounds, lab.Options{SecureBootVMs: 1, HTTPBootVMs: 1, URIBoot: true})
	}
	var boots []vmBoot
	for _, round := range rounds {
		if round.VMs+round.SecureBootVMs+round.HTTPBootVMs > 0 {
			boots = append(boots, bootRound(t, round)...)
		}
	}

	r := BootResult{Commit: commit(root), Date: time.Now().UTC().Format(time.RFC3339), Machine: thisMachine(), VMs: len(boots), TargetSeconds: 20}
	var times []time.Duration
	for _, b := range boots {
		times = append(times, b.report)
		r.Paths = append(r.Paths, b.path)
		r.Stages = append(r.Stages, b.stages)
		r.PowerOnToReportSeconds = append(r.PowerOnToReportSeconds, b.report.Round(100*time.Millisecond).Seconds())
		r.PowerOnToAvailableSeconds = append(r.PowerOnToAvailableSeconds, b.available.Round(100*time.Millisecond).Seconds())
		fmt.Printf("bench: VM %s (%s): power-on → report %.1f s, → Available %.1f s; stages %v\n", b.name, b.path, b.report.Seconds(), b.available.Seconds(), b.stages)
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	r.MedianSeconds = percentile(sorted, 50).Round(100 * time.Millisecond).Seconds()
	r.MaxSeconds = sorted[len(sorted)-1].Round(100 * time.Millisecond).Seconds()

	var manifest struct {
		Kernel struct{ Package, Version string }
		Files  []struct {
			Name string
			Size int64
		}
		TotalBytes int64
	}
	probeDir, err := lab.ProbeDir()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(probeDir, "manifest.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &manifest))
	r.ProbeImage = probeImage{KernelPackage: manifest.Kernel.Package + "=" + manifest.Kernel.Version, TotalBytes: manifest.TotalBytes, LimitBytes: 40 << 20}
	for _, f := range manifest.Files {
		switch f.Name {
		case "vmlinuz":
			r.ProbeImage.KernelBytes = f.Size
		case "initramfs.cpio.gz":
			r.ProbeImage.InitramfsBytes = f.Size
		}
	}
	fmt.Printf("bench: boot median %.1f s, max %.1f s over %d VMs; probe image %.1f MiB\n", r.MedianSeconds, r.MaxSeconds, len(boots), float64(r.ProbeImage.TotalBytes)/(1<<20))
	path, err := writeFigures(outputDir(root, vms == 2 && sbVMs == 1 && httpVMs == 1 && vmedia && uriBoot, r.Commit, os.Getenv("BENCH_OUT")), "boot.json", r)
	require.NoError(t, err)
	fmt.Printf("bench: figures in %s\n", path)
}

// vmBoot is one VM's boot, measured.
type vmBoot struct {
	name, path        string
	report, available time.Duration // after the PXE power-on its BMC recorded
	stages            []StageAt
}

// bootRound starts a lab of the VMs opts asks for, lets them enroll and be discovered together,
// and measures each from its BMC's power-on.
func bootRound(t *testing.T, opts lab.Options) []vmBoot {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Dir, opts.Servers, opts.BMCs = filepath.Join(t.TempDir(), "lab"), 1, 1
	opts.DiscoveryTimeout, opts.ManualStart = 5*time.Minute, true
	l, err := lab.Start(ctx, opts)
	require.NoError(t, err)
	defer l.Stop()
	// Each VM's stages, as its console shows them, from before anything boots.
	seen := make([]*stageLog, len(l.VMs))
	for i, h := range l.VMs {
		seen[i] = &stageLog{at: map[string]time.Time{}}
		go seen[i].follow(ctx, h.Machine.ConsoleLog())
	}
	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))

	reported, available := map[string]time.Time{}, map[string]time.Time{}
	require.NoError(t, waitFor(ctx, 10*time.Minute, "every VM's probe report and Available", func() (bool, string) {
		for _, h := range l.VMs {
			name := strings.ToLower(h.Def.SMBIOS.UUID)
			var s metalv1alpha1.Server
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				continue
			}
			now := time.Now()
			if _, ok := reported[name]; !ok && s.Status.Inventory != nil && s.Status.Inventory.Source == "Probe" {
				reported[name] = now
			}
			if _, ok := available[name]; !ok && s.Status.State == metalv1alpha1.ServerStateAvailable {
				available[name] = now
			}
		}
		return len(available) == len(l.VMs), fmt.Sprintf("%d of %d reported, %d Available", len(reported), len(l.VMs), len(available))
	}))

	var out []vmBoot
	for i, h := range l.VMs {
		var powerOn time.Time
		for _, ev := range h.BMC.BootLog(h.SystemID) {
			if ev.Boot == bmcsim.BootPxe || ev.Boot == bmcsim.BootCd || ev.Boot == bmcsim.BootUefiHttp {
				powerOn = ev.Time // the last probe boot's power-on before the report
			}
		}
		require.False(t, powerOn.IsZero(), "VM %s was never booted into the probe", h.Def.Name)
		path := map[bool]string{true: "BIOS PXE (iPXE)", false: "UEFI PXE (iPXE)"}[h.Def.Firmware == "BIOS"]
		switch {
		case opts.VirtualMedia && h.Def.SecureBoot:
			path = "UEFI Secure Boot virtual media (shim, GRUB)"
		case opts.VirtualMedia:
			path = "BIOS virtual media (isolinux)"
		case opts.URIBoot && h.Def.SecureBoot:
			path = "UEFI Secure Boot HTTP boot by URI (ISO: shim, GRUB)"
		case opts.URIBoot:
			path = "UEFI HTTP boot by URI (ISO: shim, GRUB)"
		case h.Def.SecureBoot:
			path = "UEFI Secure Boot PXE (shim, GRUB)"
		case h.Def.HTTPBoot:
			path = "UEFI HTTP boot (iPXE)"
		}
		name := strings.ToLower(h.Def.SMBIOS.UUID)
		out = append(out, vmBoot{name: h.Def.Name, path: path, report: reported[name].Sub(powerOn), available: available[name].Sub(powerOn), stages: seen[i].since(powerOn)})
	}
	return out
}

// stageLog is when each boot stage first showed on a VM's console.
type stageLog struct {
	mu    sync.Mutex
	at    map[string]time.Time
	order []string
}

func (s *stageLog) follow(ctx context.Context, console string) {
	for line := range vm.TailConsole(ctx, console) {
		stage := lab.BootStage(line)
		if stage == "" {
			continue
		}
		s.mu.Lock()
		if _, ok := s.at[stage]; !ok {
			s.at[stage] = time.Now()
			s.order = append(s.order, stage)
		}
		s.mu.Unlock()
	}
}

// since is each stage's time after start, in the order they showed.
func (s *stageLog) since(start time.Time) []StageAt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]StageAt, 0, len(s.order))
	for _, stage := range s.order {
		out = append(out, StageAt{Stage: stage, Seconds: s.at[stage].Sub(start).Round(100 * time.Millisecond).Seconds()})
	}
	return out
}
