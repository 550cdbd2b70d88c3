package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/ipmisim"
	"github.com/ironfleet/ironfleet/test/vm"
)

// With Options.IPMIVMs, the lab adds real VMs whose BMCs speak only IPMI, as older and
// white-box servers do:
//
//   - each VM has an IPMI BMC of its own, OpenIPMI's ipmi_sim, at a loopback address of its own
//     on UDP 623 (ipmiAddr), with the VM's identity: its System GUID is the VM's SMBIOS UUID,
//     its FRU the VM's manufacturer, product and serial;
//   - the VM is connected to it in-band too (QEMU's ipmi-bmc-extern and a KCS interface), and
//     its chassis commands (power, boot device) are carried out on the VM;
//   - it is enrolled like a site's: an Endpoint with the BMC's MAC and IP, matched by the lab's
//     MAC-prefix database, whose IPMI entry lists a wrong default credential first;
//   - it boots the probe by PXE from Ironfleet's boot service, like the Redfish VMs.

// ipmiPrefix is the MAC prefix of the lab's IPMI BMCs in the lab's MAC-prefix database.
const ipmiPrefix = "02:1f:c0"

// ipmiPort is the IPMI LAN port the lab's IPMI BMCs listen on: the standard one, each BMC at
// its own loopback address.
const ipmiPort = 623

// ipmiBMCName is the name of IPMI host j's Endpoint, and so of its BMC.
func ipmiBMCName(j int) string { return fmt.Sprintf("lab-ipmi-bmc-%02d", j) }

// ipmiAddr is IPMI host j's BMC address: 127.254.x.y, outside the Redfish fleet's addresses
// (bmcsim.FleetAddr) for any fleet up to 16 million BMCs.
func ipmiAddr(j int) netip.Addr {
	n := j + 1
	return netip.AddrFrom4([4]byte{127, 254, byte(n >> 8), byte(n)})
}

// ipmiMAC is the MAC of IPMI host j's BMC.
func ipmiMAC(j int) string {
	return fmt.Sprintf("%s:%02x:%02x:%02x", ipmiPrefix, j>>16&0xff, j>>8&0xff, j&0xff)
}

// CanRunIPMI says whether this machine can run the lab's IPMI hosts: besides what VMs need,
// OpenIPMI's ipmi_sim.
func CanRunIPMI() error {
	if err := CanRunVMs(); err != nil {
		return err
	}
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		return errors.New("IPMI hosts need OpenIPMI's ipmi_sim (apt-get install openipmi)")
	}
	return nil
}

// vmIndices are the VMDefinition indices of the lab's VMs: the Redfish ones first, 0 to
// VMs-1, then the IPMI ones from the next even index on, so that the first IPMI host boots
// SeaBIOS (the shape the tenant image boots) whatever the number of Redfish VMs.
func (l *Lab) vmIndices() []int {
	out := make([]int, 0, l.Opts.vmCount())
	for i := range l.Opts.redfishVMs() {
		out = append(out, i)
	}
	base := l.Opts.redfishVMs() + l.Opts.redfishVMs()%2
	for j := range l.Opts.IPMIVMs {
		out = append(out, base+j)
	}
	return out
}

// startIPMIVM makes IPMI host j (VM definition i) and its ipmi_sim, and binds the two.
func (l *Lab) startIPMIVM(j, i int) error {
	def := l.vmDefinition(i)
	dir, err := filepath.Abs(filepath.Join(l.Opts.Dir, "vms", def.Name))
	if err != nil {
		return err
	}
	sim, err := ipmisim.Start(context.Background(), ipmisim.Options{
		Dir:      filepath.Join(dir, "ipmi"),
		Addr:     net.JoinHostPort(ipmiAddr(j).String(), fmt.Sprint(ipmiPort)),
		Username: labUser, Password: Password,
		GUID:      def.SMBIOS.UUID,
		FRU:       ipmisim.FRU{Manufacturer: def.SMBIOS.Manufacturer, Product: def.SMBIOS.Product, Serial: def.SMBIOS.Serial},
		MAC:       ipmiMAC(j),
		VMChardev: true,
		// Get Device ID says what it is: OpenIPMI (IANA 4753, MontaVista's), release 2.0.33.
		ManufacturerID: 4753, ProductID: 0x0f02, FirmwareMajor: 2, FirmwareMinor: 33,
	})
	if err != nil {
		return fmt.Errorf("starting the IPMI BMC of VM %s: %w", def.Name, err)
	}
	machine, err := vm.New(def, vm.Options{Dir: dir, Network: l.vms.network, IPMIChardev: sim.VMAddr()})
	if err != nil {
		_ = sim.Close()
		return fmt.Errorf("making VM %s: %w", def.Name, err)
	}
	binding, err := vm.AttachIPMI(sim, machine)
	if err != nil {
		_ = machine.Close()
		_ = sim.Close()
		return err
	}
	l.VMs = append(l.VMs, &VMHost{Def: def, Machine: machine, IPMI: sim, binding: binding})
	return nil
}

// ipmiVendorEntry is the MAC-prefix database entry of the lab's IPMI BMCs: protocol IPMI on
// the standard port, a wrong default credential first.
func ipmiVendorEntry() string {
	return fmt.Sprintf("- macPrefix: %q\n  manufacturer: OpenIPMI\n  protocol: IPMI\n  port: %d\n  defaultCredentials:\n  - {username: %s, password: %s}\n  - {username: %s, password: %s}\n",
		ipmiPrefix, ipmiPort, labUser, WrongPassword, labUser, Password)
}

// createIPMIEndpoints creates the Endpoints of the lab's IPMI BMCs, as the out-of-band
// network's DHCP would report them.
func (l *Lab) createIPMIEndpoints(ctx context.Context) error {
	for j, h := range l.IPMIHosts() {
		ep := &metalv1alpha1.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: ipmiBMCName(j)},
			Spec: metalv1alpha1.EndpointSpec{MACAddress: ipmiMAC(j), IP: ipmiAddr(j).String()}}
		if err := l.Client.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the Endpoint of VM %s's IPMI BMC: %w", h.Def.Name, err)
		}
	}
	return nil
}

// IPMIHosts are the lab's VMs behind IPMI BMCs, in order.
func (l *Lab) IPMIHosts() []*VMHost {
	var out []*VMHost
	for _, h := range l.VMs {
		if h.IPMI != nil {
			out = append(out, h)
		}
	}
	return out
}

// IPMIBMCName is the name of the BMC (and Endpoint) of the lab's IPMI host h.
func (l *Lab) IPMIBMCName(h *VMHost) string {
	for j, x := range l.IPMIHosts() {
		if x == h {
			return ipmiBMCName(j)
		}
	}
	return ""
}

// BMCKind says what a VM sits behind, for the lab's messages.
func (h *VMHost) BMCKind() string {
	if h.IPMI != nil {
		return "IPMI (ipmi_sim at " + strings.TrimPrefix(h.IPMI.Address(), "ipmi://") + ")"
	}
	return "Redfish"
}
