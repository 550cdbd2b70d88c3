package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Why a Network answers router solicitations: iPXE's "Configuring (net0 ...)" waits for
// DHCPv4 and for IPv6 autoconfiguration, and on a segment without an IPv6 router the latter
// ends only when its router solicitations time out, about 13 s per boot. Any router
// advertisement ends it at once. Ours says as little as possible: router lifetime 0 (we are
// not a default router), no prefix options (no addresses, no on-link routes), M and O flags
// 0 (no DHCPv6) and current hop limit 0 (unspecified), so no guest takes a route, an address
// or a setting from it; iPXE and Linux simply finish IPv6 autoconfiguration with link-local
// addresses only.

var (
	allNodes   = net.ParseIP("ff02::1")
	allRouters = net.ParseIP("ff02::2")
)

// routerAdvertisement is the one message the responder sends (RFC 4861 4.2). The kernel fills
// in the checksum: it does so for every ICMPv6 raw socket.
func routerAdvertisement() []byte {
	body := make([]byte, 12) // cur hop limit, flags (M, O), router lifetime, reachable time, retrans timer: all 0
	msg := icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: body}}
	b, err := msg.Marshal(nil)
	if err != nil {
		panic(err) // a fixed message always marshals
	}
	return b
}

// raResponder answers ICMPv6 router solicitations on the bridge with routerAdvertisement.
type raResponder struct {
	conn *ipv6.PacketConn
	done sync.WaitGroup
}

// bridgeIPv6Settings prepare the bridge's IPv6 before it comes up: a link-local address to
// send from, usable at once (no duplicate address detection: nothing else on the segment is
// ours to clash with, and DAD would hold the address back a second or more), and no
// autoconfiguration of its own (no router solicitations sent, no advertisements accepted).
var bridgeIPv6Settings = map[string]string{
	"disable_ipv6":  "0",
	"accept_dad":    "0",
	"dad_transmits": "0",
	"accept_ra":     "0",
	"autoconf":      "0",
}

// setIPv6Sysctls writes sysctls of an interface; like disableIPv6 it must run inside Do.
func setIPv6Sysctls(ifname string, settings map[string]string) error {
	for key, value := range settings {
		path := "/proc/sys/net/ipv6/conf/" + ifname + "/" + key
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", path, err)
		}
	}
	return nil
}

// startRouterAdvertisements opens a raw ICMPv6 socket on the bridge inside the namespace and
// answers each router solicitation with a router advertisement to all nodes (ff02::1). The
// answer goes to all nodes, not back to the solicitor: a reply to a link-local address needs
// its zone, which the net package would resolve by name in the host's namespace.
func (n *Network) startRouterAdvertisements() (*raResponder, error) {
	var conn *ipv6.PacketConn
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(BridgeName)
		if err != nil {
			return err
		}
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var sockErr error
			err := c.Control(func(fd uintptr) {
				sockErr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, BridgeName)
			})
			return errors.Join(err, sockErr)
		}}
		pc, err := lc.ListenPacket(context.Background(), "ip6:ipv6-icmp", "::")
		if err != nil {
			return err
		}
		conn = ipv6.NewPacketConn(pc)
		var filter ipv6.ICMPFilter
		filter.SetAll(true)
		filter.Accept(ipv6.ICMPTypeRouterSolicitation)
		err = errors.Join(
			conn.SetICMPFilter(&filter),
			// Solicitations go to all routers, a group the bridge joins only when forwarding.
			conn.JoinGroup(ifi, &net.IPAddr{IP: allRouters}),
			conn.SetMulticastInterface(ifi),
			conn.SetMulticastHopLimit(255), // RFC 4861: receivers drop NDP with any other
			conn.SetMulticastLoopback(false),
		)
		if err != nil {
			_ = conn.Close()
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("router advertisements on %s in %s: %w", BridgeName, n.name, err)
	}
	r := &raResponder{conn: conn}
	r.done.Add(1)
	go r.serve()
	return r, nil
}

func (r *raResponder) serve() {
	defer r.done.Done()
	ra := routerAdvertisement()
	buf := make([]byte, 1500)
	for {
		size, _, _, err := r.conn.ReadFrom(buf)
		if err != nil {
			return // closed
		}
		// The filter passes only solicitations; a malformed one is answered all the same.
		if size < 8 || ipv6.ICMPType(buf[0]) != ipv6.ICMPTypeRouterSolicitation || buf[1] != 0 {
			continue
		}
		// Fails while the bridge has no link-local address yet (no port up); the
		// solicitor's retransmission comes later.
		_, _ = r.conn.WriteTo(ra, nil, &net.IPAddr{IP: allNodes})
	}
}

func (r *raResponder) close() error {
	err := r.conn.Close()
	r.done.Wait()
	return err
}
