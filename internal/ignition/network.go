package ignition

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// maxDNSServers is how many nameservers resolv.conf takes (glibc's MAXNS).
const maxDNSServers = 3

// maxVLANID is the highest 802.1Q VLAN ID (4095 is reserved).
const maxVLANID = 4094

var macPattern = regexp.MustCompile(`^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$`)

// validateNetwork says what is wrong with a static probe network, naming the field as the
// ignition spells it (network.address, network.dns[1], ...).
func validateNetwork(n *metalv1alpha1.ProbeNetwork) error {
	if n.InterfaceMAC != "" && !macPattern.MatchString(n.InterfaceMAC) {
		return fmt.Errorf("network.interfaceMAC %q is not six colon-separated hex octets, e.g. 3c:ec:ef:01:02:03", truncate(n.InterfaceMAC, 32))
	}
	if n.VLANID < 0 || n.VLANID > maxVLANID {
		return fmt.Errorf("network.vlanID %d is not between 0 (untagged) and %d", n.VLANID, maxVLANID)
	}
	if n.Address == "" {
		return fmt.Errorf("network.address is required: the probe's address with its prefix length, e.g. 10.0.0.21/24")
	}
	prefix, err := ParseHostPrefix(n.Address)
	if err != nil {
		return fmt.Errorf("network.address: %w", err)
	}
	if n.Gateway != "" {
		gw, err := netip.ParseAddr(n.Gateway)
		if err != nil || gw.Zone() != "" {
			return fmt.Errorf("network.gateway %q is not an IP address", truncate(n.Gateway, 64))
		}
		subnet := prefix.Masked()
		if !subnet.Contains(gw) {
			return fmt.Errorf("network.gateway %s is not in network.address's subnet %s", gw, subnet)
		}
		if gw == prefix.Addr() {
			return fmt.Errorf("network.gateway %s is network.address itself", gw)
		}
		if !isHostAddr(gw, prefix.Bits()) {
			return fmt.Errorf("network.gateway %s is the network or broadcast address of %s", gw, subnet)
		}
	}
	if len(n.DNS) > maxDNSServers {
		return fmt.Errorf("network.dns has %d entries, at most %d (as resolv.conf takes)", len(n.DNS), maxDNSServers)
	}
	for i, server := range n.DNS {
		if a, err := netip.ParseAddr(server); err != nil || a.Zone() != "" {
			return fmt.Errorf("network.dns[%d] %q is not an IP address", i, truncate(server, 64))
		}
	}
	return nil
}

// ParseHostPrefix parses a static address such as 10.0.0.21/24 or 2001:db8::21/64: an IPv4
// or IPv6 unicast address with its prefix length, not the subnet's network (or, for IPv4,
// broadcast) address.
func ParseHostPrefix(s string) (netip.Prefix, error) {
	prefix, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address with a prefix length, e.g. 10.0.0.21/24", truncate(s, 64))
	}
	a := prefix.Addr()
	if a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%q is an IPv4-mapped IPv6 address: write the IPv4 address", s)
	}
	if !a.IsGlobalUnicast() {
		return netip.Prefix{}, fmt.Errorf("%s is not a unicast host address (unspecified, loopback, link-local or multicast)", a)
	}
	if !isHostAddr(a, prefix.Bits()) {
		return netip.Prefix{}, fmt.Errorf("%s is the network or broadcast address of %s, not a host address", a, prefix.Masked())
	}
	return prefix, nil
}

// isHostAddr reports whether a is neither the network address nor, for IPv4, the broadcast
// address of its subnet of the given length. Point-to-point subnets (/31, /32, /127, /128)
// have no such addresses.
func isHostAddr(a netip.Addr, bits int) bool {
	if bits >= a.BitLen()-1 {
		return true
	}
	if a == netip.PrefixFrom(a, bits).Masked().Addr() {
		return false
	}
	if a.Is4() {
		b := a.As4()
		v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
		hostMask := uint32(1)<<(32-bits) - 1
		return v&hostMask != hostMask
	}
	return true
}

// normalizeNetwork returns a copy of n in its one spelling: no surrounding space, a lower-case
// MAC. It never changes the caller's value.
func normalizeNetwork(n *metalv1alpha1.ProbeNetwork) *metalv1alpha1.ProbeNetwork {
	if n == nil {
		return nil
	}
	out := *n
	out.InterfaceMAC = strings.ToLower(strings.TrimSpace(n.InterfaceMAC))
	out.Address = strings.TrimSpace(n.Address)
	out.Gateway = strings.TrimSpace(n.Gateway)
	out.DNS = nil // an empty list is no list: it renders as none
	if len(n.DNS) > 0 {
		out.DNS = make([]string, len(n.DNS))
		for i, s := range n.DNS {
			out.DNS[i] = strings.TrimSpace(s)
		}
	}
	return &out
}
