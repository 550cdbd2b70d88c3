package lab

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/ipmisim"
	"github.com/ironfleet/ironfleet/test/testenv"
	"github.com/ironfleet/ironfleet/test/vm"
)

// LabelVM marks the Servers that are the lab's virtual machines. Sample claims stay off them:
// their image (the lab's SimImage) is served on the host's loopback, which the VMs cannot
// reach; a claim for a VM serves its image with ServeToVMs (test/e2e's install test does).
const LabelVM = "lab.ironfleet.dev/vm"

// VMHost is one of the lab's real virtual machines: a QEMU VM behind a simulated Redfish BMC
// (BMC and SystemID) or behind an IPMI one (IPMI), network-booted by Ironfleet's boot service
// on the lab's private network.
type VMHost struct {
	Def      vm.Definition
	Machine  *vm.VM
	BMC      *bmcsim.BMC
	SystemID string
	// IPMI is the host's IPMI BMC (OpenIPMI's ipmi_sim) for Options.IPMIVMs hosts; nil for
	// Redfish ones, whose BMC is BMC.
	IPMI    *ipmisim.BMC
	binding *vm.Binding
}

// vmLab is what the lab runs for its VMs: their network namespace, the boot service that
// boots them, and the registry's door into the namespace.
type vmLab struct {
	network  *vm.Network
	service  *boot.Service
	stop     context.CancelFunc
	done     chan error
	registry *vm.Forwarder
	// registryTarget is the registry on the host's loopback that the forwarder reaches.
	registryTarget string
	uuids          map[string]bool
	// bootMACs are the boot NICs of the VMs whose BMCs list no NICs (IPMI), by UUID: the lab
	// sets them as their Servers' spec.bootMACAddress, as a site does.
	bootMACs map[string]string
	labelled chan struct{}  // closed when labelVMServers has returned
	servers  []*http.Server // ServeToVMs's
	oci      *ociRegistry   // PushImageToVMs's
}

// VMDefinition is the lab's VM i: even ones boot SeaBIOS with a virtio NIC (QEMU's iPXE ROM),
// a virtio and an NVMe disk; odd ones boot UEFI (OVMF on q35) through the firmware's own PXE
// on a virtio NIC, with an e1000 as second NIC and two SATA disks — the two shapes most
// servers come in.
func VMDefinition(i int) vm.Definition { return labVM(i, i%2 == 1, false) }

// SecureBootVMDefinition is the lab's VM i as a UEFI machine (the odd ones' shape) with Secure
// Boot enforced: Debian's OVMF with Microsoft's keys enrolled, as servers ship.
func SecureBootVMDefinition(i int) vm.Definition { return labVM(i, true, true) }

// HTTPBootVMDefinition is the lab's VM i as a UEFI machine (the odd ones' shape) that boots
// from the network by UEFI HTTP boot alone.
func HTTPBootVMDefinition(i int) vm.Definition {
	def := labVM(i, true, false)
	def.HTTPBoot = true
	return def
}

func labVM(i int, uefi, secureBoot bool) vm.Definition {
	uuid := fixUUID(sha256.Sum256(fmt.Appendf(nil, "ironfleet-lab-vm-%d", i)))
	serial := func(kind string, j int) string { return fmt.Sprintf("LAB%s%02d%02d", kind, i, j) }
	mac := fmt.Sprintf("52:54:00:1f:%02x:%02x", i>>8&0xff, i&0xff)
	def := vm.Definition{
		Name:   fmt.Sprintf("lab-vm-%d", i),
		SMBIOS: vm.SMBIOS{Manufacturer: "Ironfleet Lab", Product: "QEMU Server", Serial: fmt.Sprintf("LABVM%04d", i), UUID: uuid},
	}
	if !uefi {
		def.Firmware, def.CPUs, def.MemoryMiB = vm.BIOS, 2, 512
		def.Disks = []vm.Disk{{Bus: vm.Virtio, SizeBytes: 2 << 30, Serial: serial("VD", 0)}, {Bus: vm.NVMe, SizeBytes: 1 << 30, Serial: serial("NV", 1)}}
		def.NICs = []vm.NIC{{Model: vm.VirtioNet, MAC: mac}}
		return def
	}
	def.Firmware, def.CPUs, def.MemoryMiB, def.SecureBoot = vm.UEFI, 1, 768, secureBoot
	def.Disks = []vm.Disk{{Bus: vm.SATA, SizeBytes: 2 << 30, Serial: serial("SA", 0)}, {Bus: vm.SATA, SizeBytes: 1 << 30, Serial: serial("SA", 1)}}
	// It boots from the firmware's own PXE (OVMF over virtio-net, no iPXE ROM), which loads
	// snponly.efi (or, under Secure Boot, shim) over TFTP, as most UEFI servers do; the e1000
	// is its second NIC.
	def.NICs = []vm.NIC{{Model: vm.VirtioNet, MAC: mac, FirmwarePXE: true}, {Model: vm.E1000, MAC: fmt.Sprintf("52:54:00:2f:%02x:%02x", i>>8&0xff, i&0xff)}}
	return def
}

// vmDefinition is VMDefinition(i) (SecureBootVMDefinition(i) for the SecureBootVMs,
// HTTPBootVMDefinition(i) for the HTTPBootVMs) with the lab's options applied: VMDiskBytes
// shrinks its disks.
func (l *Lab) vmDefinition(i int) vm.Definition {
	def := VMDefinition(i)
	switch sb := l.Opts.VMs + l.Opts.SecureBootVMs; {
	case i >= l.Opts.VMs && i < sb:
		def = SecureBootVMDefinition(i)
	case i >= sb && i < l.Opts.redfishVMs():
		def = HTTPBootVMDefinition(i)
	}
	def.CDROM = l.Opts.VirtualMedia // the drive its BMC's virtual media appears in
	if l.Opts.VMDiskBytes > 0 {
		for j := range def.Disks {
			def.Disks[j].SizeBytes = l.Opts.VMDiskBytes >> j // the second disk is the smaller one, as ever
		}
	}
	return def
}

// fixUUID formats a hash as a version-4 style UUID.
func fixUUID(sum [32]byte) string {
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// CanRunVMs says whether this process can run the lab's VMs, and why not: they need root (for
// network namespaces and taps) and QEMU.
func CanRunVMs() error {
	if os.Geteuid() != 0 {
		return errors.New("virtual machines need root (network namespaces and taps)")
	}
	for _, f := range []string{"qemu-system-x86_64"} {
		if _, err := exec.LookPath(f); err != nil {
			return fmt.Errorf("virtual machines need %s (apt-get install qemu-system-x86 ipxe-qemu ovmf)", f)
		}
	}
	return nil
}

// ProbeDir is where `make probe-image` puts the probe's kernel and initramfs:
// $IRONFLEET_PROBE_DIR, else bin/probe in the repository.
func ProbeDir() (string, error) {
	if dir := os.Getenv("IRONFLEET_PROBE_DIR"); dir != "" {
		return dir, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "probe"), nil
}

// startVMNetwork creates the VMs' private network before anything else needs it.
func (l *Lab) startVMNetwork() error {
	network, err := vm.NewNetwork(vm.NetworkOptions{})
	if err != nil {
		return fmt.Errorf("creating the VMs' network: %w", err)
	}
	l.vms = &vmLab{network: network, uuids: map[string]bool{}, bootMACs: map[string]string{}}
	for k, i := range l.vmIndices() {
		def := l.vmDefinition(i)
		l.vms.uuids[strings.ToLower(def.SMBIOS.UUID)] = true
		if k >= l.Opts.redfishVMs() {
			l.vms.bootMACs[strings.ToLower(def.SMBIOS.UUID)] = strings.ToLower(def.NICs[0].MAC)
		}
	}
	return nil
}

// vmSystemSpecs places the VMs' systems on the fleet's BMCs, round robin after the simulated
// ones, with Ids of their own.
func (l *Lab) vmSystemSpecs(perBMC [][]bmcsim.SystemSpec) {
	for i := range l.Opts.redfishVMs() {
		perBMC[i%len(perBMC)] = append(perBMC[i%len(perBMC)], l.vmSystemSpec(i))
	}
}

// vmSystemSpec is VM i's system as its BMC shows it, with an Id of its own.
func (l *Lab) vmSystemSpec(i int) bmcsim.SystemSpec {
	spec := vm.SystemSpec(l.vmDefinition(i))
	spec.ID = fmt.Sprintf("VM%d", i)
	return spec
}

// startVMs makes each VM and binds it to its system, once the fleet runs; the IPMI hosts come
// after the Redfish ones, each with its ipmi_sim.
func (l *Lab) startVMs() error {
	for k, i := range l.vmIndices() {
		if k >= l.Opts.redfishVMs() {
			if err := l.startIPMIVM(k-l.Opts.redfishVMs(), i); err != nil {
				return err
			}
			continue
		}
		def := l.vmDefinition(i)
		dir, err := filepath.Abs(filepath.Join(l.Opts.Dir, "vms", def.Name))
		if err != nil {
			return err
		}
		machine, err := vm.New(def, vm.Options{Dir: dir, Network: l.vms.network})
		if err != nil {
			return fmt.Errorf("making VM %s: %w", def.Name, err)
		}
		sim := l.BMCs[i%len(l.BMCs)]
		if l.Opts.bmcPerVM() {
			sim = l.fleet.BMCs[l.Opts.BMCs+i]
		}
		id := fmt.Sprintf("VM%d", i)
		binding, err := vm.Attach(sim, id, machine)
		if err != nil {
			_ = machine.Close()
			return err
		}
		l.VMs = append(l.VMs, &VMHost{Def: def, Machine: machine, BMC: sim, SystemID: id, binding: binding})
	}
	return nil
}

// openVMRegistry lets the VMs reach the registry: a forwarder on the bridge, at the port the
// registry's URL names, to the registry on the host's loopback.
func (l *Lab) openVMRegistry() error {
	if l.vms.registry != nil {
		return nil
	}
	_, port, _ := net.SplitHostPort(l.vms.registryTarget)
	fwd, err := l.vms.network.Forward(net.JoinHostPort(l.vms.network.BridgeIP().String(), port), l.vms.registryTarget)
	if err != nil {
		return fmt.Errorf("opening the registry to the VMs: %w", err)
	}
	l.vms.registry = fwd
	return nil
}

// OpenVMRegistry opens the registry to the VMs when the lab was started with it closed
// (Options.VMRegistryClosed).
func (l *Lab) OpenVMRegistry() error {
	if l.vms == nil {
		return errors.New("the lab runs no VMs")
	}
	return l.openVMRegistry()
}

// vmRegistryURL is the registry's URL as the VMs reach it: on the bridge, at the port of the
// registry on the host's loopback (registryAddr), which openVMRegistry forwards to.
func (l *Lab) vmRegistryURL(registryAddr string) string {
	_, port, _ := net.SplitHostPort(registryAddr)
	return "https://" + net.JoinHostPort(l.vms.network.BridgeIP().String(), port)
}

// BootServiceConfig is how the lab runs Ironfleet's boot service for its VMs: full DHCP on the
// private bridge (the lab's network is a dedicated provisioning network), TFTP and HTTP on the
// bridge's address.
func BootServiceConfig(network *vm.Network, probeDir string, uuids map[string]bool) (boot.Config, error) {
	key := make([]byte, boot.MinURLKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return boot.Config{}, err
	}
	ip := network.BridgeIP()
	subnet := network.Subnet()
	first := subnet.Masked().Addr().As4()
	start, end := first, first
	start[3], end[3] = 100, 200
	mask := net.CIDRMask(subnet.Bits(), 32)
	return boot.Config{
		Mode: dhcp.ModeFull, Interface: vm.BridgeName, ServerIP: ip,
		DHCPRangeStart: netip.AddrFrom4(start), DHCPRangeEnd: netip.AddrFrom4(end),
		SubnetMask:      netip.AddrFrom4([4]byte(mask)),
		ProbeDir:        probeDir,
		HTTPBindAddress: net.JoinHostPort(ip.String(), "8080"),
		TFTPBindAddress: net.JoinHostPort(ip.String(), "69"),
		URLKey:          key,
		// The operator's system namespace: its boot configurations, and the leases' ConfigMap.
		Namespace:    Namespace,
		ServerFilter: func(s *metalv1alpha1.Server) bool { return uuids[strings.ToLower(s.Spec.SystemUUID)] },
		Name:         "lab-vm-boot-service",
	}, nil
}

// startVMBootService runs Ironfleet's boot service for the VMs on a manager of its own, its
// sockets opened inside the VMs' network namespace.
func (l *Lab) startVMBootService() error {
	cfg, err := BootServiceConfig(l.vms.network, l.Opts.ProbeDir, l.vms.uuids)
	if err != nil {
		return err
	}
	if l.Opts.VirtualMedia {
		// No DHCP on the VMs' network.
		cfg.Mode, cfg.DHCPRangeStart, cfg.DHCPRangeEnd = dhcp.ModeOff, netip.Addr{}, netip.Addr{}
	}
	// The BMCs, on the host's loopback, fetch what the boot service serves them (virtual
	// media's ISOs, firmware images) from a listener of their own there.
	if cfg.MediaBindAddress, err = FreeLoopbackAddr(); err != nil {
		return err
	}
	cfg.FirmwareCacheDir = filepath.Join(l.Opts.Dir, "boot-firmware")
	svc, err := boot.New(cfg)
	if err != nil {
		return err
	}
	mgr, err := l.newBootManager()
	if err != nil {
		return err
	}
	if err := svc.SetupWithManager(mgr); err != nil {
		return err
	}
	var listeners boot.Listeners
	if err := l.vms.network.Do(func() error {
		var err error
		listeners, err = boot.OpenListeners(cfg)
		return err
	}); err != nil {
		return fmt.Errorf("opening the boot service's sockets on the VMs' network: %w", err)
	}
	if cfg.MediaBindAddress != "" {
		if listeners.Media, err = boot.OpenMediaListener(cfg); err != nil {
			return fmt.Errorf("opening the boot service's media listener: %w", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.vms.service, l.vms.stop, l.vms.done = svc, cancel, make(chan error, 2)
	go func() { l.vms.done <- mgr.Start(ctx) }()
	go func() { l.vms.done <- svc.Serve(ctx, listeners) }()
	l.vms.labelled = make(chan struct{})
	go func() {
		defer close(l.vms.labelled)
		l.labelVMServers(ctx, l.vms.uuids, l.vms.bootMACs)
	}()
	return nil
}

// BootService is Ironfleet's boot service the lab runs for its VMs (nil without VMs).
func (l *Lab) BootService() *boot.Service {
	if l.vms == nil {
		return nil
	}
	return l.vms.service
}

// VMNetwork is the VMs' private network (nil without VMs).
func (l *Lab) VMNetwork() *vm.Network {
	if l.vms == nil {
		return nil
	}
	return l.vms.network
}

// labelVMServers labels the VMs' Servers as they appear (their names are their UUIDs), so
// that sample claims can stay off them, and gives those behind IPMI BMCs their boot NIC's MAC
// (spec.bootMACAddress), which their BMCs cannot tell.
func (l *Lab) labelVMServers(ctx context.Context, uuids map[string]bool, bootMACs map[string]string) {
	pending := map[string]bool{}
	for uuid := range uuids {
		pending[uuid] = true
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for len(pending) > 0 {
		for name := range pending {
			var s metalv1alpha1.Server
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				continue
			}
			before := s.DeepCopy()
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			s.Labels[LabelVM] = "true"
			if mac := bootMACs[name]; mac != "" {
				s.Spec.BootMACAddress = mac
			}
			if err := l.Client.Patch(ctx, &s, client.MergeFrom(before)); err == nil {
				delete(pending, name)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// stopVMs ends the VMs, their boot service and their network.
func (l *Lab) stopVMs() {
	if l.vms == nil {
		return
	}
	for _, h := range l.VMs {
		_ = h.binding.Close()
		_ = h.Machine.Close()
		if h.IPMI != nil {
			_ = h.IPMI.Close()
		}
	}
	l.VMs = nil
	if l.vms.stop != nil {
		l.vms.stop()
		<-l.vms.done
		<-l.vms.done
		<-l.vms.labelled
	}
	if l.vms.registry != nil {
		_ = l.vms.registry.Close()
	}
	for _, srv := range l.vms.servers {
		_ = srv.Close()
	}
	if l.vms.oci != nil {
		l.vms.oci.close()
	}
	_ = l.vms.network.Close()
	l.vms = nil
}

// ServeToVMs serves the files of dir over HTTP on the VMs' network, at the address returned
// (http://<bridge>:<port>), until the lab stops: OS images for claims on the VMs, which reach
// nothing outside their network.
func (l *Lab) ServeToVMs(dir string, port int) (string, error) {
	if l.vms == nil {
		return "", errors.New("the lab runs no VMs")
	}
	addr := net.JoinHostPort(l.vms.network.BridgeIP().String(), fmt.Sprint(port))
	ln, err := l.vms.network.ListenTCP(addr)
	if err != nil {
		return "", err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	l.vms.servers = append(l.vms.servers, srv)
	return "http://" + addr, nil
}

// IsVM says whether a server UUID is one of the lab's VMs.
func (l *Lab) IsVM(uuid string) bool {
	return l.vms != nil && l.vms.uuids[strings.ToLower(uuid)]
}
