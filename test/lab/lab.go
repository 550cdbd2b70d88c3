package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// Options size and place a lab.
type Options struct {
	// Dir holds the lab's files: kubeconfig, MAC-prefix DB, BMC CAs, host trees.
	Dir     string
	Servers int
	BMCs    int
	// DiscoveryTimeout bounds each probe boot (simulated boots take well under a second; the
	// default is 30 s, 3 minutes with VMs).
	DiscoveryTimeout time.Duration
	// ManagerConfig, when set, gives the operator its own identity against the control plane
	// (the RBAC test runs it with exactly the permissions the bundle grants); by default it
	// runs as an administrator. In-process managers only.
	ManagerConfig func(env *testenv.Env) (*rest.Config, error)
	// ManagerBinary, when set, runs the operator as its own process from this cmd/manager
	// binary (its log in <Dir>/manager.log), so that it can be killed and measured on its own;
	// by default it runs in-process.
	ManagerBinary string
	// Manager adjusts the operator's options before it starts (client QPS, concurrency, …).
	Manager func(*manager.Options)
	// InstantProbes boots hosts without a hardware tree or disk I/O each (see InstantProbes).
	InstantProbes bool
	// ControlPlane tunes the control plane's processes (the benchmark's garbage-collection
	// target); the zero value runs them as envtest does.
	ControlPlane testenv.Options
	// VMs is how many hosts are real QEMU virtual machines besides the simulated Servers, each
	// behind a simulated BMC and network-booted by Ironfleet's boot service on a private network
	// (vms.go). It needs root and QEMU (CanRunVMs) and the probe image (ProbeDir).
	VMs int
	// SecureBootVMs is how many more Redfish VMs boot UEFI with Secure Boot enforced (Debian's
	// OVMF with Microsoft's keys enrolled: SecureBootVMDefinition), after the VMs: their BMCs
	// say so, and the boot service network-boots them through the signed chain (shim, GRUB,
	// kernel), or with VirtualMedia their BMCs boot the ISO (whose UEFI loader is shim and
	// signed GRUB too). Needs what VMs needs.
	SecureBootVMs int
	// HTTPBootVMs is how many more Redfish VMs boot UEFI by UEFI HTTP boot only (their PXE off:
	// HTTPBootVMDefinition), after the SecureBootVMs: DHCP gives them iPXE's URL, with no TFTP.
	HTTPBootVMs int
	// IPMIVMs is how many more real VMs sit each behind an IPMI BMC of its own: OpenIPMI's
	// ipmi_sim, enrolled through an Endpoint and the MAC-prefix database's IPMI entry, its
	// power and boot device carried out on the VM (ipmi.go). Like VMs, it needs root and QEMU,
	// and ipmi_sim (CanRunIPMI).
	IPMIVMs int
	// BMCQuirks are turned on in every lab BMC besides its kind's own (the fleet's, and the
	// VMs' behind them): a test of what a BMC cannot tell, as NoSecureBoot.
	BMCQuirks bmcsim.Quirks
	// VMDiskBytes, when set, is the size of each VM's first disk (the second is half as big):
	// a test that zeroes whole disks keeps them small. Default: VMDefinition's.
	VMDiskBytes int64
	// ProbeDir holds the probe's vmlinuz and initramfs.cpio.gz (default: ProbeDir()).
	ProbeDir string
	// VMRegistryClosed starts the lab with the registry out of the VMs' reach, until
	// OpenVMRegistry: a probe that cannot report, on purpose.
	VMRegistryClosed bool
	// VirtualMedia boots the VMs' probes from virtual media on a network without DHCP: each VM
	// behind a BMC of its own that boots by VirtualMedia, with a static probe network; the
	// boot service's DHCP off (vmedia.go).
	VirtualMedia bool
	// URIBoot boots the VMs' probes by UEFI HTTP boot from a URI their BMCs set: each VM
	// behind a BMC of its own (as with VirtualMedia) whose bootMethod is UefiHttp; the boot
	// service's DHCP gives them an address only, and the firmware fetches the boot's ISO over
	// HTTP. UEFI VMs only (SecureBootVMs, HTTPBootVMs): BIOS has no HTTP boot.
	URIBoot bool
	// ClusterAPI runs Cluster API's core controllers and Ironfleet's infrastructure provider
	// too, with their CRDs (capi.go).
	ClusterAPI bool
	// CAPIProviderConfig, when set, gives the provider its own identity (the test runs it with
	// exactly config/capi's ClusterRole); by default it runs as an administrator.
	CAPIProviderConfig func(env *testenv.Env) (*rest.Config, error)
	// ManualStart leaves starting the operator (StartManager) and creating the Endpoints
	// (CreateEndpoints) to the caller, e.g. to measure from that moment.
	ManualStart bool
}

// bmcPerVM says whether each Redfish VM sits behind a BMC of its own (VirtualMedia, URIBoot):
// the boot method is a BMC's.
func (o Options) bmcPerVM() bool { return o.VirtualMedia || o.URIBoot }

// vmCount is how many real VMs the lab runs: Redfish ones and IPMI ones.
func (o *Options) vmCount() int { return o.redfishVMs() + o.IPMIVMs }

// redfishVMs is how many real VMs sit behind Redfish BMCs: VMs, then SecureBootVMs, then
// HTTPBootVMs.
func (o *Options) redfishVMs() int { return o.VMs + o.SecureBootVMs + o.HTTPBootVMs }

func (o *Options) defaults() {
	if o.vmCount() > 0 && o.ProbeDir == "" {
		o.ProbeDir, _ = ProbeDir()
	}
	if o.Dir == "" {
		o.Dir = "lab"
	}
	if o.Servers <= 0 {
		o.Servers = 8
	}
	if o.BMCs <= 0 {
		o.BMCs = 4
	}
	if o.BMCs > o.Servers {
		o.BMCs = o.Servers
	}
	if o.DiscoveryTimeout <= 0 {
		o.DiscoveryTimeout = 30 * time.Second
		if o.vmCount() > 0 {
			// A VM takes 10–20 s from power-on to report, longer when the machine is busy;
			// a timeout shorter than that reboots it mid-boot.
			o.DiscoveryTimeout = 3 * time.Minute
		}
	}
}

// Fixtures the lab's hosts are made from, in turn.
var hostFixtures = []string{"small-vm", "dual-socket", "storage-1u"}

// HostFixtures are the fixtures the lab's hosts are made from, in turn.
func HostFixtures() []string { return slices.Clone(hostFixtures) }

// Lab is a running lab.
type Lab struct {
	Opts   Options
	Env    *testenv.Env
	Client client.Client
	BMCs   []*bmcsim.BMC
	Hosts  []Host
	Boots  *BootService
	// VMs are the real virtual machines: Options.VMs behind Redfish BMCs, then Options.IPMIVMs
	// behind IPMI ones.
	VMs        []*VMHost
	Kubeconfig string
	// Kubectl is a script that runs kubectl against the lab.
	Kubectl string
	// ManagerOptions are the operator's options.
	ManagerOptions manager.Options
	// MetricsURL is the operator's /metrics when it runs as a process; empty otherwise.
	MetricsURL string
	// Images serves OS images to the simulated hosts' probes (SimImage among them).
	Images *ImageServer

	fleet       *bmcsim.LoopbackFleet
	prepared    *manager.Prepared
	managerCfg  *rest.Config
	stopManager context.CancelFunc
	managerDone chan error
	proc        *exec.Cmd
	procLog     *os.File
	stopBoots   context.CancelFunc
	bootsDone   chan error
	vms         *vmLab
	capi        *capiLab
}

// Start brings up the control plane, the fleet, the boot service and the operator, and creates
// one Endpoint per simulated BMC.
func Start(ctx context.Context, opts Options) (l *Lab, err error) {
	opts.defaults()
	l = &Lab{Opts: opts}
	// A failed start stops what it started: the lab it made, not the nil it returns.
	started := l
	defer func() {
		if err != nil {
			started.Stop()
		}
	}()
	if err := resetDir(opts.Dir); err != nil {
		return nil, err
	}
	opts.ControlPlane.ClusterAPI = opts.ControlPlane.ClusterAPI || opts.ClusterAPI
	if l.Env, err = testenv.StartWith(opts.ControlPlane); err != nil {
		return nil, err
	}
	l.Client = l.Env.Client
	if err := l.writeKubeconfig(); err != nil {
		return nil, err
	}
	if err := l.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	if l.Images, err = StartImageServer(); err != nil {
		return nil, err
	}
	if opts.IPMIVMs > 0 && opts.VirtualMedia {
		return nil, errors.New("lab: IPMI hosts boot the probe by PXE, which VirtualMedia turns off (IPMI has no virtual media)")
	}
	if opts.URIBoot && (opts.VirtualMedia || opts.IPMIVMs > 0 || opts.VMs > 0) {
		return nil, errors.New("lab: URIBoot is for UEFI Redfish VMs (SecureBootVMs, HTTPBootVMs) alone: not with VirtualMedia, IPMI VMs or the BIOS VMs of VMs")
	}
	if opts.vmCount() > 0 {
		if err := l.startVMNetwork(); err != nil {
			return nil, err
		}
	}
	if err := l.startBootService(); err != nil {
		return nil, err
	}
	if err := l.startFleet(); err != nil {
		return nil, err
	}
	if l.vms != nil {
		if err := l.startVMs(); err != nil {
			return nil, err
		}
	}
	macdbPath, caPath, err := l.writeVendorFiles()
	if err != nil {
		return nil, err
	}
	registryAddr, err := FreeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	o := manager.DefaultOptions()
	o.MetricsAddr, o.ProbeAddr, o.InProcess = "0", "0", true
	o.MACPrefixesFile, o.BMCCAFile = macdbPath, caPath
	o.RegistryAddr, o.RegistryURL = registryAddr, "https://"+registryAddr
	// The simulated BMCs' update tasks run for seconds: followed every second.
	o.FirmwareTaskPoll = time.Second
	if l.vms != nil {
		// Probes report to the registry's address on the VMs' bridge; the simulated hosts,
		// which run on the host's loopback, are pointed at the registry itself.
		l.vms.registryTarget = registryAddr
		o.RegistryURL = l.vmRegistryURL(registryAddr)
		l.Boots.RegistryURL = "https://" + registryAddr
		if !opts.VMRegistryClosed {
			if err := l.openVMRegistry(); err != nil {
				return nil, err
			}
		}
		if err := l.startVMBootService(); err != nil {
			return nil, err
		}
		// Claims' oci:// images come from the lab's registry, over HTTPS with the lab's image
		// CA, which the probe is told to trust.
		if l.vms.oci, err = l.startOCIRegistry(imageCAFile(opts.Dir)); err != nil {
			return nil, err
		}
		o.ImageCAFile = imageCAFile(opts.Dir)
	}
	o.RegistrySecret = Namespace + "/ironfleet-registry"
	o.SystemNamespace, o.ProbeImage = Namespace, "lab/metalprobe:dev"
	o.Discovery.Timeout = opts.DiscoveryTimeout
	o.Discovery.InstallTimeout = opts.DiscoveryTimeout
	// The lab's tenant OS does not act on the ACPI power button: a claim's power Off is forced
	// after a grace period short enough to watch.
	o.Settings.Power.GracefulShutdown = 20 * time.Second
	if opts.ManagerBinary != "" {
		if opts.ManagerConfig != nil {
			return nil, errors.New("lab: ManagerConfig is for in-process managers only")
		}
		if o.MetricsAddr, err = FreeLoopbackAddr(); err != nil {
			return nil, err
		}
		o.InProcess = false
		l.MetricsURL = "http://" + o.MetricsAddr + "/metrics"
	}
	if opts.Manager != nil {
		opts.Manager(&o)
	}
	l.ManagerOptions = o
	if l.prepared, err = manager.Prepare(o); err != nil {
		return nil, err
	}
	l.managerCfg = l.Env.Config
	if opts.ManagerConfig != nil {
		if l.managerCfg, err = opts.ManagerConfig(l.Env); err != nil {
			return nil, err
		}
	}
	if opts.ManualStart {
		return l, nil
	}
	if err := l.StartManager(); err != nil {
		return nil, err
	}
	if opts.ClusterAPI {
		if err := l.startClusterAPI(); err != nil {
			return nil, err
		}
	}
	return l, l.CreateEndpoints(ctx)
}

func (l *Lab) writeKubeconfig() error {
	data, err := l.Env.Kubeconfig()
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(l.Opts.Dir)
	if err != nil {
		return err
	}
	l.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(l.Kubeconfig, data, 0o600); err != nil {
		return err
	}
	l.Kubectl = filepath.Join(dir, "kubectl")
	script := fmt.Sprintf("#!/bin/sh\n# kubectl against the Ironfleet lab\nexec %q --kubeconfig %q \"$@\"\n", filepath.Join(l.Env.Assets, "kubectl"), l.Kubeconfig)
	return os.WriteFile(l.Kubectl, []byte(script), 0o755)
}

// startBootService runs the boot service on a manager of its own: it is not the operator, and
// outlives operator restarts.
func (l *Lab) startBootService() error {
	mgr, err := l.newBootManager()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	boots := NewBootService(ctx, l.Client, ctrl.Log.WithName("boot-service"))
	if l.vms != nil {
		vmUUIDs := l.vms.uuids // not l.vms: Stop ends the VMs before this boot service
		boots.Skip = func(uuid string) bool { return vmUUIDs[uuid] }
	}
	if err := boots.SetupWithManager(mgr); err != nil {
		cancel()
		return err
	}
	l.Boots = boots
	l.stopBoots, l.bootsDone = cancel, make(chan error, 1)
	go func() { l.bootsDone <- mgr.Start(ctx) }()
	return nil
}

// newBootManager is a manager for a boot service: of its own, not the operator's, without
// metrics or probes of its own. Its cache keeps what the operator's does (no managedFields, a
// Server's inventory compact): the boot service finds a PXE-booting host's Server there.
func (l *Lab) newBootManager() (ctrl.Manager, error) {
	return ctrl.NewManager(l.Env.Config, ctrl.Options{Scheme: l.Env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cached.Options(),
		// The classic queue: see controller.Settings.controllerOptions (a shutdown deadlock).
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}})
}

// startFleet starts the simulated BMCs (TLS, varied vendor profiles, each at its own loopback
// address on one port) with the servers spread over them, and prepares each server's host: its
// firmware holds the UUID its BMC's kind gives it (a placeholder for some), and it knows its BMC
// and system Id, which is how the boot service finds its Server.
func (l *Lab) startFleet() error {
	perBMC := make([][]bmcsim.SystemSpec, l.Opts.BMCs)
	quirks := make([]bmcsim.Quirks, l.Opts.BMCs)
	for i := range quirks {
		var err error
		if quirks[i], err = labBMCs[i%len(labBMCs)].quirks(l.Opts.BMCQuirks); err != nil {
			return err
		}
	}
	var instant *InstantProbes
	if l.Opts.InstantProbes {
		instant = NewInstantProbes()
		l.Boots.Probe = instant.Probe
	}
	for i := 0; i < l.Opts.Servers; i++ {
		spec := bmcsim.DefaultSystem(i)
		fixture := hostFixtures[i%len(hostFixtures)]
		host := InstantHost(fixture, strings.ToLower(spec.UUID))
		if instant == nil {
			var err error
			if host, err = PrepareHost(fixture, filepath.Join(l.Opts.Dir, "hosts", spec.UUID), spec.UUID); err != nil {
				return err
			}
		}
		if reads := quirks[i%l.Opts.BMCs].HostUUID(spec.UUID); reads != spec.UUID {
			if err := host.SetSMBIOSUUID(reads); err != nil {
				return err
			}
		}
		if err := host.SetSerialNumber(spec.SerialNumber); err != nil {
			return err
		}
		host.BMC = labBMCName(i % l.Opts.BMCs)
		l.Hosts = append(l.Hosts, host)
		perBMC[i%l.Opts.BMCs] = append(perBMC[i%l.Opts.BMCs], spec)
	}
	bmcs := l.Opts.BMCs
	if l.vms != nil && l.Opts.bmcPerVM() {
		bmcs += l.Opts.redfishVMs() // a BMC of its own for each VM, after the fleet's
	} else if l.vms != nil {
		l.vmSystemSpecs(perBMC)
	}
	fleet, err := bmcsim.StartLoopbackFleet(bmcs, true, func(i int) bmcsim.Options {
		if i >= l.Opts.BMCs {
			return l.vmBMCOptions(i - l.Opts.BMCs)
		}
		return bmcsim.Options{
			Username: labUser, Password: Password,
			SerialNumber: fmt.Sprintf("LAB-BMC-%02d", i),
			Profile:      labBMCs[i%len(labBMCs)].profile, Quirks: &quirks[i], Systems: perBMC[i],
		}
	})
	if err != nil {
		return err
	}
	l.fleet, l.BMCs = fleet, fleet.BMCs[:l.Opts.BMCs]
	// Server i is the (i / BMCs)-th system of its BMC, which named it.
	for i := range l.Hosts {
		l.Hosts[i].SystemID = l.BMCs[i%len(l.BMCs)].SystemIDs()[i/len(l.BMCs)]
		l.Boots.AddHost(l.Hosts[i])
	}
	for _, sim := range l.BMCs {
		sim.OnPowerOn(l.Boots.PowerOn)
	}
	return nil
}

// HostOf is the host behind a Server, with its simulated BMC: the one behind its BMC and
// system Id.
func (l *Lab) HostOf(s *metalv1alpha1.Server) (Host, *bmcsim.BMC, bool) {
	if s.Spec.BMCRef == nil {
		return Host{}, nil, false
	}
	id := systemIDOf(s)
	for i, h := range l.Hosts {
		if h.BMC == s.Spec.BMCRef.Name && strings.EqualFold(h.SystemID, id) {
			return h, l.BMCs[i%len(l.BMCs)], true
		}
	}
	return Host{}, nil, false
}

// systemIDOf is the Id of a Server's system, from the end of its Redfish URI.
func systemIDOf(s *metalv1alpha1.Server) string {
	uri := strings.TrimSuffix(s.Spec.SystemURI, "/")
	return uri[strings.LastIndex(uri, "/")+1:]
}

// CreateEndpoints creates one Endpoint per simulated BMC (IPMI ones included), as the out-of-band network's DHCP
// would report them, from several workers so that ten thousand take seconds.
func (l *Lab) CreateEndpoints(ctx context.Context) error {
	if err := l.createVMBMCs(ctx); err != nil {
		return fmt.Errorf("creating the VMs' BMCs: %w", err)
	}
	if err := l.createIPMIEndpoints(ctx); err != nil {
		return err
	}
	return Parallel(8, len(l.BMCs), func(i int) error {
		_, mac := bmcMAC(i)
		ep := &metalv1alpha1.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: labBMCName(i)},
			Spec: metalv1alpha1.EndpointSpec{MACAddress: mac, IP: bmcsim.FleetAddr(i).String()}}
		if err := l.Client.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		return nil
	})
}

// Parallel runs do(0), …, do(n-1) on workers goroutines and returns the first error; every
// item is tried.
func Parallel(workers, n int, do func(i int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var first error
			for i := range next {
				if err := do(i); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var first error
	for range workers {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Stop tears the lab down.
func (l *Lab) Stop() {
	_ = l.stopClusterAPI()
	_ = l.StopManager()
	l.stopVMs()
	if l.stopBoots != nil {
		l.stopBoots()
		l.Boots.Wait()
		<-l.bootsDone
		l.stopBoots = nil
	}
	if l.fleet != nil {
		_ = l.fleet.Close()
		l.fleet, l.BMCs = nil, nil
	}
	if l.Images != nil {
		_ = l.Images.Close()
		l.Images = nil
	}
	if l.procLog != nil {
		_ = l.procLog.Close()
		l.procLog = nil
	}
	if l.Env != nil {
		_ = l.Env.Stop()
		l.Env = nil
	}
}

// labMarker marks a directory as the lab's own, so that only such a directory is ever emptied.
const labMarker = ".ironfleet-lab"

// resetDir empties a previous lab's directory (or makes a new one). A non-empty directory that
// is not a lab's is refused: --dir . must never wipe someone's work tree.
func resetDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case os.IsNotExist(err):
	case err != nil:
		return err
	case len(entries) > 0:
		if _, err := os.Stat(filepath.Join(dir, labMarker)); err != nil {
			return fmt.Errorf("refusing to use %s for the lab: it is not empty and was not made by the lab", dir)
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, labMarker), []byte("made by metal-lab; emptied on the next start\n"), 0o644)
}

// FreeLoopbackAddr is a free TCP address on 127.0.0.1 (free when asked; bind it soon).
func FreeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
