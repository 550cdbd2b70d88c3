// Command metal-lab runs Ironfleet's whole lifecycle on one machine: a local control plane, a
// fleet of simulated Redfish BMCs and hosts, a boot service, and the operator. `make lab`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/ironfleet/ironfleet/test/lab"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("metal-lab", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := lab.Options{}
	// One BMC of each kind (the vendors, and systems whose UUID cannot identify them), two
	// systems behind each.
	kinds := len(lab.BMCKinds())
	fs.IntVar(&opts.Servers, "servers", 2*kinds, "number of simulated servers")
	fs.IntVar(&opts.BMCs, "bmcs", kinds, fmt.Sprintf("number of simulated BMCs (servers are spread over them); their kinds, in turn: %s", strings.Join(lab.BMCKinds(), "; ")))
	fs.IntVar(&opts.VMs, "vms", 2, "number of real QEMU virtual machines network-booted by the boot service (needs root; 0 turns them off)")
	fs.IntVar(&opts.IPMIVMs, "ipmi-vms", 1, "number of real QEMU virtual machines behind IPMI BMCs (OpenIPMI's ipmi_sim), enrolled and network-booted like the others; the tour installs on the first (needs what --vms needs, and ipmi_sim; 0 turns them off, and so does --vms 0 unless --ipmi-vms is given)")
	fs.StringVar(&opts.Dir, "dir", "lab", "directory for the lab's kubeconfig, logs and host trees (recreated)")
	scenario := fs.String("scenario", "", "run a scenario and exit: tour (enroll → discover → claim → release → wipe → available; with VMs, a VM installs the tenant image and boots it from disk); capi (Cluster API: a Cluster and a MachineDeployment of 2 whose Machines get lab servers; exits 0 once both are provisioned)")
	secureBoot := fs.Bool("secure-boot", false, "add a real QEMU VM that boots UEFI with Secure Boot enforced (Debian's OVMF with Microsoft's keys), network-booted through the signed chain (shim, GRUB, kernel), or with --virtual-media booted from the probe's ISO (shim and signed GRUB), and discovered; its boot stages are shown like the others' (needs what --vms needs)")
	httpBoot := fs.Bool("http-boot", false, "add a real QEMU VM that boots UEFI by UEFI HTTP boot alone (its firmware's PXE off): DHCP gives it iPXE's URL, and it boots with no TFTP (needs what --vms needs)")
	fs.BoolVar(&opts.URIBoot, "uri-boot", false, "boot the VMs' probes by UEFI HTTP boot from a URI their BMCs set (bootMethod UefiHttp): each UEFI VM behind a BMC of its own, DHCP giving it an address only; runs a Secure Boot VM and an HTTP boot VM (as --secure-boot --http-boot) and no BIOS or IPMI VMs (docs/boot.md)")
	fs.BoolVar(&opts.VirtualMedia, "virtual-media", false, "boot the VMs' probes from virtual media (a per-boot ISO their BMCs insert) with the boot service's DHCP off: each VM behind a BMC of its own with bootMethod VirtualMedia and a static probe network (docs/virtual-media.md)")
	fs.BoolVar(&opts.ClusterAPI, "cluster-api", false, "run Cluster API's core controllers and Ironfleet's infrastructure provider too (docs/capi.md); --scenario=capi implies it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch *scenario {
	case "", "tour":
	case "capi":
		opts.ClusterAPI = true
	default:
		fmt.Fprintf(stderr, "metal-lab: unknown --scenario %q (known: tour, capi)\n", *scenario)
		return 2
	}
	if *secureBoot {
		opts.SecureBootVMs = 1
	}
	if *httpBoot {
		opts.HTTPBootVMs = 1
	}
	if opts.Servers < 1 || opts.BMCs < 1 || opts.VMs < 0 || opts.IPMIVMs < 0 {
		fmt.Fprintln(stderr, "metal-lab: --servers and --bmcs must be at least 1, --vms and --ipmi-vms at least 0")
		return 2
	}
	ipmiGiven := false
	fs.Visit(func(f *flag.Flag) { ipmiGiven = ipmiGiven || f.Name == "ipmi-vms" })
	if opts.VMs == 0 && !ipmiGiven {
		opts.IPMIVMs = 0 // --vms 0: no VMs at all
	}
	if opts.URIBoot {
		if opts.VirtualMedia {
			fmt.Fprintln(stderr, "metal-lab: --uri-boot and --virtual-media are two boot methods: choose one")
			return 2
		}
		// UEFI HTTP boot is UEFI's: the BIOS and IPMI VMs boot by PXE.
		opts.VMs, opts.IPMIVMs, opts.SecureBootVMs, opts.HTTPBootVMs = 0, 0, 1, 1
	}
	if opts.VirtualMedia && opts.IPMIVMs > 0 {
		if ipmiGiven {
			fmt.Fprintln(stdout, "Running without IPMI hosts: they boot by PXE, which --virtual-media turns off (IPMI has no virtual media).")
		}
		opts.IPMIVMs = 0
	}
	if opts.VMs > 0 || opts.IPMIVMs > 0 || opts.SecureBootVMs > 0 || opts.HTTPBootVMs > 0 {
		if err := lab.CanRunVMs(); err != nil {
			fmt.Fprintf(stdout, "Running without virtual machines: %v.\n", err)
			opts.VMs, opts.IPMIVMs, opts.SecureBootVMs, opts.HTTPBootVMs = 0, 0, 0, 0
		}
	}
	if opts.IPMIVMs > 0 {
		if err := lab.CanRunIPMI(); err != nil {
			fmt.Fprintf(stdout, "Running without IPMI hosts: %v.\n", err)
			opts.IPMIVMs = 0
		}
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "metal-lab: %v\n", err)
		return 1
	}
	logFile, err := os.CreateTemp("", "metal-lab-*.log")
	if err != nil {
		fmt.Fprintf(stderr, "metal-lab: %v\n", err)
		return 1
	}
	defer logFile.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(logFile)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	fmt.Fprintf(stdout, "Starting the Ironfleet lab: control plane, %d BMCs, %d simulated servers, %d VMs (%d behind IPMI BMCs, %d with Secure Boot, %d by HTTP boot), boot services, operator…\n", opts.BMCs, opts.Servers, opts.VMs+opts.SecureBootVMs+opts.HTTPBootVMs+opts.IPMIVMs, opts.IPMIVMs, opts.SecureBootVMs, opts.HTTPBootVMs)
	l, err := lab.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(stderr, "metal-lab: starting the lab: %v\n", err)
		return 1
	}
	defer l.Stop()
	fmt.Fprintf(stdout, "Lab up in %v (operator log: %s)\n\n", time.Since(started).Round(100*time.Millisecond), logFile.Name())
	kubectl, _ := filepath.Rel(mustGetwd(), l.Kubectl)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go l.Watch(watchCtx, stdout)
	go l.WatchVMs(watchCtx, stdout)
	for _, h := range l.VMs {
		fmt.Fprintf(stdout, "VM %s (%s BMC): %s, %d CPUs, %d MiB, console log %s\n", h.Def.Name, h.BMCKind(), h.Def.Firmware, h.Def.CPUs, h.Def.MemoryMiB, h.Machine.ConsoleLog())
	}

	switch *scenario {
	case "tour":
		if err := l.Tour(ctx, stdout); err != nil {
			fmt.Fprintf(stderr, "metal-lab: tour failed: %v\n", err)
			return 1
		}
		return 0
	case "capi":
		if err := l.CAPIScenario(ctx, stdout); err != nil {
			fmt.Fprintf(stderr, "metal-lab: capi scenario failed: %v\n", err)
			return 1
		}
		return 0
	}

	if err := l.WaitForServers(ctx, opts.Servers+len(l.VMs), "Available", 5*time.Minute); err != nil {
		fmt.Fprintf(stderr, "metal-lab: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, "\nThe fleet is Available. Applying a sample ServerClaim (default/sample)…")
	server, err := l.ClaimAndWait(ctx, l.OffVMs(l.SampleClaim("sample")), 2*time.Minute)
	if err != nil {
		fmt.Fprintf(stderr, "metal-lab: sample claim: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, `
Sample claim default/sample is Bound to server %s.

Look around (the lab runs until Ctrl-C):
  ./%s get servers
  ./%s get serverclaims,serverbootconfigurations -A
  ./%s get metal
  ./%s delete serverclaim sample      # watch the server get wiped and return to the pool
(or: export KUBECONFIG=%s and use your own kubectl)

`, server, kubectl, kubectl, kubectl, kubectl, l.Kubeconfig)
	<-ctx.Done()
	fmt.Fprintln(stdout, "\nStopping the lab.")
	return 0
}

func mustGetwd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	return wd
}
