package main

// The network is configured statically from the user_data, with
// github.com/vishvananda/netlink: /init never sends a DHCP packet.

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// linkPoll is how often /init looks for a NIC with a link.
const linkPoll = 100 * time.Millisecond

// configureNetwork brings lo and every Ethernet interface up, waits for the first (by name)
// whose link is up, and sets cfg's address on it (and cfg's gateway as the default route).
// It returns the interface's name.
func configureNetwork(ctx context.Context, cfg contract.TestConfig) (string, error) {
	prefix, err := netip.ParsePrefix(cfg.Address)
	if err != nil {
		return "", err
	}
	if lo, err := netlink.LinkByName("lo"); err == nil {
		_ = netlink.LinkSetUp(lo)
	}
	raised := map[string]bool{}
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return "", fmt.Errorf("listing the network interfaces: %w", err)
		}
		var withLink []string
		for _, l := range links {
			a := l.Attrs()
			if a.EncapType != "ether" || l.Type() != "device" || len(a.HardwareAddr) != 6 {
				continue
			}
			if !raised[a.Name] {
				if err := netlink.LinkSetUp(l); err != nil {
					return "", fmt.Errorf("bringing %s up: %w", a.Name, err)
				}
				raised[a.Name] = true
				continue // its link state is read again at the next look
			}
			if a.RawFlags&unix.IFF_RUNNING != 0 || a.OperState == netlink.OperUp {
				withLink = append(withLink, a.Name)
			}
		}
		if len(withLink) > 0 {
			slices.Sort(withLink)
			return withLink[0], setAddress(withLink[0], prefix, cfg.Gateway)
		}
		select {
		case <-ctx.Done():
			if len(raised) == 0 {
				return "", fmt.Errorf("no Ethernet interface appeared (is its driver in the image?): %w", ctx.Err())
			}
			return "", fmt.Errorf("no link on %d Ethernet interface(s): %w", len(raised), ctx.Err())
		case <-time.After(linkPoll):
		}
	}
}

func setAddress(name string, prefix netip.Prefix, gateway string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("finding %s: %w", name, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), 32)}}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding %s to %s: %w", prefix, name, err)
	}
	if gateway != "" {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.ParseIP(gateway)}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("adding the default route via %s: %w", gateway, err)
		}
	}
	return nil
}
