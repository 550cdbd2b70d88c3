package vm_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"

	"github.com/ironfleet/ironfleet/test/vm"
)

// icmp6On opens a raw ICMPv6 socket bound to ifname; call it inside Network.Do.
func icmp6On(ifname string) (*ipv6.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var sockErr error
		err := c.Control(func(fd uintptr) {
			sockErr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, ifname)
		})
		return errors.Join(err, sockErr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, err
	}
	return ipv6.NewPacketConn(pc), nil
}

func TestBridgeAnswersRouterSolicitationsWithAnAdvertisementThatConfiguresNothing(t *testing.T) {
	n := newNetwork(t)
	// A stand-in guest: a veth pair inside the namespace, one end a port of the bridge with
	// IPv6 off like the taps, the other end the guest's interface.
	var conn *ipv6.PacketConn
	require.NoError(t, n.Do(func() error {
		br, err := netlink.LinkByName(vm.BridgeName)
		if err != nil {
			return err
		}
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "port0", MasterIndex: br.Attrs().Index}, PeerName: "guest0"}
		if err := netlink.LinkAdd(veth); err != nil {
			return err
		}
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/port0/disable_ipv6", []byte("1"), 0o644); err != nil {
			return err
		}
		// The guest's link-local address, without waiting for duplicate address detection.
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/guest0/accept_dad", []byte("0"), 0o644); err != nil {
			return err
		}
		for _, name := range []string{"port0", "guest0"} {
			link, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return err
			}
		}
		guest, err := net.InterfaceByName("guest0")
		if err != nil {
			return err
		}
		if conn, err = icmp6On("guest0"); err != nil {
			return err
		}
		var filter ipv6.ICMPFilter
		filter.SetAll(true)
		filter.Accept(ipv6.ICMPTypeRouterAdvertisement)
		return errors.Join(conn.SetICMPFilter(&filter), conn.SetMulticastInterface(guest),
			conn.SetMulticastHopLimit(255), conn.SetControlMessage(ipv6.FlagHopLimit, true))
	}))
	defer conn.Close()

	rs, err := (&icmp.Message{Type: ipv6.ICMPTypeRouterSolicitation, Body: &icmp.RawBody{Data: make([]byte, 4)}}).Marshal(nil)
	require.NoError(t, err)
	var (
		ra       *icmp.Message
		hopLimit int
		from     net.Addr
	)
	buf := make([]byte, 1500)
	deadline := time.Now().Add(10 * time.Second)
	for ra == nil && time.Now().Before(deadline) {
		// Solicit again until answered: the bridge and the guest have their link-local
		// addresses only once their links are up, which can take a moment.
		_, _ = conn.WriteTo(rs, nil, &net.IPAddr{IP: net.ParseIP("ff02::2")})
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(300*time.Millisecond)))
		size, cm, src, err := conn.ReadFrom(buf)
		if err != nil {
			continue
		}
		if ra, err = icmp.ParseMessage(58, buf[:size]); err != nil {
			t.Fatalf("parse %x: %v", buf[:size], err)
		}
		hopLimit, from = cm.HopLimit, src
	}
	require.NotNil(t, ra, "no router advertisement within 10 s")
	require.Equal(t, ipv6.ICMPTypeRouterAdvertisement, ra.Type)
	body := ra.Body.(*icmp.RawBody).Data
	require.Len(t, body, 12, "no options: no prefix, no MTU, no link-layer address")
	assert.Zero(t, body[0], "current hop limit unspecified")
	assert.Zero(t, body[1]&0xc0, "M and O flags clear: no DHCPv6")
	assert.Zero(t, binary.BigEndian.Uint16(body[2:4]), "router lifetime 0: not a default router")
	assert.Equal(t, 255, hopLimit, "NDP demands hop limit 255")
	assert.True(t, from.(*net.IPAddr).IP.IsLinkLocalUnicast(), "sent from the bridge's link-local address, got %v", from)

	require.NoError(t, n.Do(func() error {
		br, err := netlink.LinkByName(vm.BridgeName)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			assert.True(t, a.IP.IsLinkLocalUnicast(), "the bridge has only a link-local IPv6 address, not %s", a.IP)
		}
		// The guest's Linux stack accepted the advertisement (accept_ra is on by default)
		// and took no default route and no address from it.
		routes, err := netlink.RouteList(nil, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, r := range routes {
			assert.False(t, r.Dst == nil || r.Dst.IP.IsUnspecified(), "no default route: %v", r)
		}
		guest, err := netlink.LinkByName("guest0")
		if err != nil {
			return err
		}
		if addrs, err = netlink.AddrList(guest, netlink.FAMILY_V6); err != nil {
			return err
		}
		for _, a := range addrs {
			assert.True(t, a.IP.IsLinkLocalUnicast(), "the guest got no address: %s", a.IP)
		}
		return nil
	}))
}

// serveDHCP answers DHCPv4 on the network's bridge with an address from its subnet, enough
// for iPXE's DHCP to finish. It tells iPXE not to wait for ProxyDHCP (option 175,
// encapsulated 176 = 1), so the time left in "Configuring" is IPv6's.
func serveDHCP(t *testing.T, n *vm.Network) {
	t.Helper()
	conn, err := n.ListenUDPOnBridge(":67")
	require.NoError(t, err)
	server := n.BridgeIP().AsSlice()
	client := n.BridgeIP().Next().Next().AsSlice()
	handler := func(c net.PacketConn, _ net.Addr, req *dhcpv4.DHCPv4) {
		var kind dhcpv4.MessageType
		switch req.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			kind = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			kind = dhcpv4.MessageTypeAck
		default:
			return
		}
		resp, err := dhcpv4.NewReplyFromRequest(req, dhcpv4.WithMessageType(kind), dhcpv4.WithYourIP(client),
			dhcpv4.WithServerIP(server), dhcpv4.WithOption(dhcpv4.OptServerIdentifier(server)),
			dhcpv4.WithNetmask(net.CIDRMask(n.Subnet().Bits(), 32)), dhcpv4.WithLeaseTime(3600),
			dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(175), []byte{176, 1, 1}))
		if err == nil {
			_, _ = c.WriteTo(resp.ToBytes(), &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort})
		}
	}
	s, err := server4.NewServer("", nil, handler, server4.WithConn(conn))
	require.NoError(t, err)
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Close() })
}

// ipxeConfigured boots a BIOS VM from the network and returns how long after QEMU's start
// iPXE's "Configuring (net0 ...)" line appeared and ended in "ok".
func ipxeConfigured(t *testing.T, opts vm.NetworkOptions) (started, ok time.Duration) {
	requireRoot(t)
	n, err := vm.NewNetwork(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, n.Close()) })
	serveDHCP(t, n)
	def := testDefinition("ra", vm.BIOS)
	def.Disks = nil
	m := newVM(t, def, n)
	start := time.Now()
	require.NoError(t, m.Start(vm.BootNetwork))
	configuring := func(done bool) bool {
		lines, _ := vm.ReadConsole(m.ConsoleLog())
		for _, l := range lines {
			if strings.Contains(l, "Configuring (net0") && (!done || strings.HasSuffix(l, " ok")) {
				return true
			}
		}
		return false
	}
	waitFor(t, 60*time.Second, "iPXE configuring net0", func() bool { return configuring(false) })
	started = time.Since(start)
	waitFor(t, 60*time.Second, `iPXE's "Configuring (net0 ...) ok"`, func() bool { return configuring(true) })
	ok = time.Since(start)
	// iPXE then lists net0's addresses; the IPv6 one comes last.
	waitFor(t, 10*time.Second, "iPXE's net0 addresses", func() bool { return consoleHas(m, "net0: fe80::") })
	lines, _ := vm.ReadConsole(m.ConsoleLog())
	for _, l := range lines {
		if !strings.Contains(l, "net0") {
			continue
		}
		t.Logf("console: %s", l)
		if f := strings.Fields(l); len(f) == 2 && f[0] == "net0:" { // "net0: fe80::5054:ff:feaa:1/64"
			addr, err := netip.ParsePrefix(f[1])
			assert.True(t, err != nil || addr.Addr().Is4() || addr.Addr().IsLinkLocalUnicast(),
				"iPXE took no IPv6 address beyond link-local: %s", l)
		}
	}
	return started, ok
}

func TestIPXEConfiguresAtOnceWithRouterAdvertisements(t *testing.T) {
	started, ok := ipxeConfigured(t, vm.NetworkOptions{})
	t.Logf("with router advertisements: Configuring at %s, ok at %s after QEMU start (%s configuring)",
		started.Round(10*time.Millisecond), ok.Round(10*time.Millisecond), (ok - started).Round(10*time.Millisecond))
	// Without advertisements iPXE waits ~13 s here for a router (see NoRouterAdvertisements).
	assert.Less(t, ok-started, 12*time.Second, "iPXE finished IPv6 autoconfiguration without waiting for a router")

	if os.Getenv("IRONFLEET_VM_RA_BASELINE") != "" { // the figure to compare with, ~15 s more
		started, ok := ipxeConfigured(t, vm.NetworkOptions{NoRouterAdvertisements: true})
		t.Logf("without router advertisements: Configuring at %s, ok at %s after QEMU start (%s configuring)",
			started.Round(10*time.Millisecond), ok.Round(10*time.Millisecond), (ok - started).Round(10*time.Millisecond))
	}
}
