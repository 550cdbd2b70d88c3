package lab

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// With Options.VirtualMedia, the lab's VMs boot the probe from virtual media on a network
// without DHCP, as sites that cannot run DHCP or PXE on the server network do:
//
//   - each VM sits alone behind a BMC of its own (a generic Redfish BMC after the fleet's), so
//     no simulated host shares a BMC that boots by VirtualMedia;
//   - the lab makes those BMCs itself, by address (spec.access), with spec.bootMethod
//     VirtualMedia and a static spec.probeNetwork on the VMs' bridge;
//   - Ironfleet's boot service runs with DHCP off, and serves the BMCs the per-boot ISOs on the
//     host's loopback (its media listener), as a site serves them on the BMC network;
//   - each VM has a CD drive: the BMC fetches the ISO the operator inserts, and the VM boots it.

// vmBMCName is the name of the BMC (and its BMCSecret) of VM i in a virtual-media lab.
func vmBMCName(i int) string { return fmt.Sprintf("lab-vm-bmc-%02d", i) }

// vmProbeAddress is VM i's static probe address on the VMs' bridge: .50 + i, in its subnet.
func vmProbeAddress(subnet netip.Prefix, i int) netip.Prefix {
	a := subnet.Masked().Addr().As4()
	a[3] = byte(50 + i)
	return netip.PrefixFrom(netip.AddrFrom4(a), subnet.Bits())
}

// vmBMCOptions are the options of the BMC of VM i: a generic Redfish BMC with the VM's one
// system.
func (l *Lab) vmBMCOptions(i int) bmcsim.Options {
	spec := l.vmSystemSpec(i)
	quirks, _ := bmcsim.ProfileQuirks(bmcsim.ProfileGeneric) // a profile bmcsim has
	addQuirks(&quirks, l.Opts.BMCQuirks)
	return bmcsim.Options{
		Username: labUser, Password: Password,
		SerialNumber: fmt.Sprintf("LAB-VM-BMC-%02d", i),
		Profile:      bmcsim.ProfileGeneric, Quirks: &quirks, Systems: []bmcsim.SystemSpec{spec},
	}
}

// With Options.URIBoot, the same BMC of its own per VM boots by UefiHttp instead: no CD drive,
// no static network (the boot service's DHCP gives the VM an address, and nothing to boot), and
// the VM's firmware fetches the ISO from the boot service's public URL on the bridge.

// createVMBMCs makes the BMCs of a virtual-media (or URI-boot) lab's VMs, by address: booting by
// VirtualMedia with each VM's static probe network (its first NIC, its address on the bridge,
// the bridge as gateway), or by UefiHttp with DHCP.
func (l *Lab) createVMBMCs(ctx context.Context) error {
	if l.vms == nil || !l.Opts.bmcPerVM() {
		return nil
	}
	for i, h := range l.VMs {
		name := vmBMCName(i)
		secret := &metalv1alpha1.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: metalv1alpha1.BMCSecretSpec{Username: labUser, Password: Password}}
		if err := l.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		host, port, err := net.SplitHostPort(h.BMC.Host())
		if err != nil {
			return err
		}
		var p int32
		if _, err := fmt.Sscan(port, &p); err != nil {
			return err
		}
		b := &metalv1alpha1.BMC{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: metalv1alpha1.BMCSpec{
				Access:       &metalv1alpha1.BMCAccess{Address: macdb.Address(macdb.ProtocolRedfish, "https", host, p)},
				BMCSecretRef: metalv1alpha1.LocalObjectReference{Name: name},
				BootMethod:   metalv1alpha1.BootMethodVirtualMedia,
				ProbeNetwork: &metalv1alpha1.ProbeNetwork{
					InterfaceMAC: h.Def.NICs[0].MAC,
					Address:      vmProbeAddress(l.vms.network.Subnet(), i).String(),
					Gateway:      l.vms.network.BridgeIP().String(),
				},
			}}
		if l.Opts.URIBoot {
			b.Spec.BootMethod, b.Spec.ProbeNetwork = metalv1alpha1.BootMethodUefiHttp, nil
		}
		if err := l.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}
