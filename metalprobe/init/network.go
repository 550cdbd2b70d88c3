package main

// The network comes up with github.com/insomniacslk/dhcp's nclient4 for the DHCP exchange and
// github.com/vishvananda/netlink to configure the result. u-root's pkg/dhclient wraps the same
// two libraries but configures every interface it is given for v4 and v6 and hides the lease;
// /init needs one NIC, IPv4, and the lease's DNS servers for resolv.conf, which nclient4 hands
// over directly, with fewer dependencies in the binary.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
)

// nicPollInterval is how often /init looks for the boot NIC while its driver probes.
const nicPollInterval = 100 * time.Millisecond

// waitForNIC returns the name of the interface with the boot MAC once its driver has created
// it. Without a BOOTIF it takes the first Ethernet interface by name, once one appears.
func waitForNIC(ctx context.Context, mac net.HardwareAddr) (string, error) {
	ticker := time.NewTicker(nicPollInterval)
	defer ticker.Stop()
	for {
		ifaces, err := net.Interfaces()
		if err == nil {
			if name := pickNIC(ifaces, mac); name != "" {
				return name, nil
			}
		}
		select {
		case <-ctx.Done():
			if mac == nil {
				return "", fmt.Errorf("no Ethernet interface appeared: %w", ctx.Err())
			}
			return "", fmt.Errorf("no interface with MAC %s appeared (is its driver in the image?): %w", mac, ctx.Err())
		case <-ticker.C:
		}
	}
}

// pickNIC chooses the interface with MAC mac, or without one the first Ethernet interface
// (6-byte address, not loopback) by name.
func pickNIC(ifaces []net.Interface, mac net.HardwareAddr) string {
	var candidates []string
	for _, iface := range ifaces {
		if iface.Flags&net.FlagLoopback != 0 || len(iface.HardwareAddr) != 6 {
			continue
		}
		if mac != nil && bytes.Equal(iface.HardwareAddr, mac) {
			return iface.Name
		}
		candidates = append(candidates, iface.Name)
	}
	if mac != nil || len(candidates) == 0 {
		return ""
	}
	slices.Sort(candidates)
	return candidates[0]
}

// dhcpAttemptTimeout bounds one DHCP exchange; bringUpNetwork repeats it until ctx ends.
const dhcpAttemptTimeout = 15 * time.Second

// bringUpNetwork brings lo and the NIC up, leases an IPv4 address with DHCP and configures
// it: address, default route, and /etc/resolv.conf for a registry named by host name. It
// returns the lease's address for the console.
func bringUpNetwork(ctx context.Context, name string, log func(string, ...any)) (string, error) {
	for _, n := range []string{"lo", name} {
		link, err := netlink.LinkByName(n)
		if err != nil {
			return "", fmt.Errorf("finding %s: %w", n, err)
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return "", fmt.Errorf("bringing %s up: %w", n, err)
		}
	}
	var lease *nclient4.Lease
	for attempt := 1; ; attempt++ {
		var err error
		if lease, err = dhcpExchange(ctx, name); err == nil {
			break
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("DHCP on %s: %w (last attempt: %v)", name, ctx.Err(), err)
		}
		log("DHCP on %s, attempt %d: %v", name, attempt, err)
	}
	return applyLease(name, lease.ACK)
}

func dhcpExchange(ctx context.Context, name string) (*nclient4.Lease, error) {
	client, err := nclient4.New(name, nclient4.WithTimeout(4*time.Second), nclient4.WithRetry(3))
	if err != nil {
		return nil, fmt.Errorf("opening a DHCP socket: %w", err)
	}
	defer func() { _ = client.Close() }()
	ctx, cancel := context.WithTimeout(ctx, dhcpAttemptTimeout)
	defer cancel()
	return client.Request(ctx)
}

// applyLease configures the interface from a DHCP ACK.
func applyLease(name string, ack *dhcpv4.DHCPv4) (string, error) {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", name, err)
	}
	ip := ack.YourIPAddr.To4()
	mask := ack.SubnetMask()
	if ip == nil || mask == nil {
		return "", errors.New("DHCP lease without an IPv4 address and subnet mask")
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: mask}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return "", fmt.Errorf("adding %s to %s: %w", addr.IPNet, name, err)
	}
	if routers := ack.Router(); len(routers) > 0 {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: routers[0]}
		if err := netlink.RouteReplace(route); err != nil {
			return "", fmt.Errorf("adding the default route via %s: %w", routers[0], err)
		}
	}
	if dns := ack.DNS(); len(dns) > 0 {
		servers := make([]string, len(dns))
		for i, server := range dns {
			servers[i] = server.String()
		}
		if err := writeResolvConf(servers); err != nil {
			return "", err
		}
	}
	return addr.IPNet.String(), nil
}
