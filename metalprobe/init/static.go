package main

// A static network for virtual-media boots (ignition.Config.Network): no DHCP packet is ever
// sent. The NIC is the one with the configured MAC, or the first that gets a link; an optional
// 802.1Q VLAN link goes on top of it; the address, the default route and resolv.conf are set
// with netlink and a file write, as applyLease does for a lease.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// resolvConfPath is where /init writes the DNS servers (a variable: tests write elsewhere).
var resolvConfPath = "/etc/resolv.conf"

// isNIC says whether /init may choose a link as the server's NIC: an Ethernet interface of a
// driver (netlink kind "device"), or a veth (what containers and the package's tests have).
// VLAN, bridge, bond and other virtual links never are one, the VLAN link /init adds included.
func isNIC(link netlink.Link) bool {
	a := link.Attrs()
	if a.Flags&net.FlagLoopback != 0 || len(a.HardwareAddr) != 6 {
		return false
	}
	return link.Type() == "device" || link.Type() == "veth"
}

func hasCarrier(link netlink.Link) bool { return link.Attrs().RawFlags&unix.IFF_LOWER_UP != 0 }

// waitForLink brings NICs up and returns the first one with a link (carrier): the NIC with
// MAC mac, or without one any NIC, the first by name among those that got a link at the
// same poll. NICs it brought up and did not choose are set down again. It polls until ctx
// ends, taking NICs whose drivers come late too.
func waitForLink(ctx context.Context, mac net.HardwareAddr) (netlink.Link, error) {
	ticker := time.NewTicker(nicPollInterval)
	defer ticker.Stop()
	raised := map[string]bool{} // NICs this call set up
	lowerOthers := func(chosen string) {
		for name := range raised {
			if name == chosen {
				continue
			}
			if link, err := netlink.LinkByName(name); err == nil {
				_ = netlink.LinkSetDown(link)
			}
		}
	}
	var seen []string
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("listing network interfaces: %w", err)
		}
		var up []netlink.Link
		seen = seen[:0]
		for _, link := range links {
			a := link.Attrs()
			if !isNIC(link) || mac != nil && !slices.Equal(a.HardwareAddr, mac) {
				continue
			}
			seen = append(seen, a.Name)
			if hasCarrier(link) {
				up = append(up, link)
				continue
			}
			if a.Flags&net.FlagUp == 0 {
				if err := netlink.LinkSetUp(link); err != nil {
					return nil, fmt.Errorf("bringing %s up: %w", a.Name, err)
				}
				raised[a.Name] = true
			}
		}
		if len(up) > 0 {
			slices.SortFunc(up, func(a, b netlink.Link) int { return strings.Compare(a.Attrs().Name, b.Attrs().Name) })
			lowerOthers(up[0].Attrs().Name)
			return up[0], nil
		}
		select {
		case <-ctx.Done():
			lowerOthers("")
			switch {
			case mac != nil && len(seen) == 0:
				return nil, fmt.Errorf("no interface with MAC %s appeared (is its driver in the image?): %w", mac, ctx.Err())
			case mac != nil:
				return nil, fmt.Errorf("%s (MAC %s) got no link: is it cabled, is its switch port up? %w", seen[0], mac, ctx.Err())
			case len(seen) == 0:
				return nil, fmt.Errorf("no Ethernet interface appeared: %w", ctx.Err())
			default:
				return nil, fmt.Errorf("none of %s got a link: %w", strings.Join(seen, ", "), ctx.Err())
			}
		case <-ticker.C:
		}
	}
}

// vlanLinkName names the VLAN link on parent: parent.vid as ip(8) would, or vlan<vid> when
// that is longer than an interface name may be (15 bytes).
func vlanLinkName(parent string, vid int) string {
	if name := fmt.Sprintf("%s.%d", parent, vid); len(name) < unix.IFNAMSIZ {
		return name
	}
	return fmt.Sprintf("vlan%d", vid)
}

// configureStatic configures n on the NIC nic, which is up with a link: the VLAN link when
// n.VLANID is set (up, on top of nic), the address, the default route via n.Gateway and
// resolvConfPath from n.DNS. It returns the interface that carries the address and a
// description for the console ("static 10.0.0.21/24 on eth0.42 via 10.0.0.1").
func configureStatic(nic netlink.Link, n *metalv1alpha1.ProbeNetwork) (netlink.Link, string, error) {
	prefix, err := ignition.ParseHostPrefix(n.Address)
	if err != nil { // Validate checked it: never here
		return nil, "", fmt.Errorf("network.address: %w", err)
	}
	if lo, err := netlink.LinkByName("lo"); err != nil {
		return nil, "", fmt.Errorf("finding lo: %w", err)
	} else if err := netlink.LinkSetUp(lo); err != nil {
		return nil, "", fmt.Errorf("bringing lo up: %w", err)
	}
	link := nic
	if n.VLANID > 0 {
		if link, err = addVLAN(nic, int(n.VLANID)); err != nil {
			return nil, "", err
		}
	}
	name := link.Attrs().Name
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}}
	if prefix.Addr().Is6() {
		// Usable at once: duplicate address detection would hold the address tentative (not
		// a source) for a second or more, and the address is the operator's to keep unique.
		addr.Flags = unix.IFA_F_NODAD
	}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return nil, "", fmt.Errorf("adding %s to %s: %w", prefix, name, err)
	}
	desc := "static " + prefix.String() + " on " + name
	if n.Gateway != "" {
		gw := net.ParseIP(n.Gateway)
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw}); err != nil {
			return nil, "", fmt.Errorf("adding the default route via %s on %s: %w", n.Gateway, name, err)
		}
		desc += " via " + n.Gateway
	}
	if len(n.DNS) > 0 {
		if err := writeResolvConf(n.DNS); err != nil {
			return nil, "", err
		}
	}
	return link, desc, nil
}

// addVLAN adds the 802.1Q link with VLAN ID vid on parent (or takes the one already there) and
// brings it up.
func addVLAN(parent netlink.Link, vid int) (netlink.Link, error) {
	name := vlanLinkName(parent.Attrs().Name, vid)
	vlan := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index}, VlanId: vid}
	if err := netlink.LinkAdd(vlan); err != nil && !errors.Is(err, unix.EEXIST) {
		if errors.Is(err, unix.EOPNOTSUPP) {
			return nil, fmt.Errorf("adding VLAN %d on %s: the kernel has no 802.1Q support (module 8021q): %w", vid, parent.Attrs().Name, err)
		}
		return nil, fmt.Errorf("adding VLAN %d on %s: %w", vid, parent.Attrs().Name, err)
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("finding %s: %w", name, err)
	}
	if v, ok := link.(*netlink.Vlan); !ok || v.VlanId != vid || v.ParentIndex != parent.Attrs().Index {
		return nil, fmt.Errorf("%s exists and is not VLAN %d on %s", name, vid, parent.Attrs().Name)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return nil, fmt.Errorf("bringing %s up: %w", name, err)
	}
	return link, nil
}

// writeResolvConf writes one nameserver line per server.
func writeResolvConf(servers []string) error {
	var conf strings.Builder
	for _, server := range servers {
		fmt.Fprintf(&conf, "nameserver %s\n", server)
	}
	if err := os.WriteFile(resolvConfPath, []byte(conf.String()), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", resolvConfPath, err)
	}
	return nil
}

// parseNetworkMAC is network.interfaceMAC as a hardware address; nil when it is empty.
func parseNetworkMAC(n *metalv1alpha1.ProbeNetwork) (net.HardwareAddr, error) {
	if n == nil || n.InterfaceMAC == "" {
		return nil, nil
	}
	mac, err := net.ParseMAC(n.InterfaceMAC)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("network.interfaceMAC %q is not a MAC address", n.InterfaceMAC)
	}
	return mac, nil
}
