package dhcp

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The socket loop answers over loopback, and counts what it ignores by reason.
func TestServerAnswersAndCounts(t *testing.T) {
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	ignored := map[Reason]int{}
	replies := 0
	s := &Server{Handler: newHandler(ModeProxy),
		OnIgnored: func(r Reason) { mu.Lock(); ignored[r]++; mu.Unlock() },
		OnReply:   func(Mode, *dhcpv4.DHCPv4) { mu.Lock(); replies++; mu.Unlock() },
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, conn, PortDHCP) }()

	client, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer client.Close()
	send := func(b []byte) {
		_, err := client.WriteTo(b, conn.LocalAddr())
		require.NoError(t, err)
	}
	send([]byte("not dhcp"))
	send(discover(t, unknownMAC, pxe(iana.INTEL_X86PC)...).ToBytes())
	send(discover(t, knownMAC).ToBytes())
	req := discover(t, knownMAC, pxe(iana.INTEL_X86PC)...)
	send(req.ToBytes())

	require.NoError(t, client.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 1500)
	n, _, err := client.ReadFrom(buf)
	require.NoError(t, err)
	offer, err := dhcpv4.FromBytes(buf[:n])
	require.NoError(t, err)
	assert.Equal(t, req.TransactionID, offer.TransactionID)
	assert.Equal(t, FileBIOS, offer.BootFileName)

	// Packets are handled in order: by the time the reply came, the others were counted. The
	// reply itself is counted once it was sent, which may be just after the client read it.
	mu.Lock()
	assert.Equal(t, map[Reason]int{IgnoredMalformed: 1, IgnoredUnknownMAC: 1, IgnoredNotPXE: 1}, ignored)
	mu.Unlock()
	assert.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return replies == 1 }, 5*time.Second, 10*time.Millisecond, "one reply counted")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}

func TestReplyAddress(t *testing.T) {
	peer := &net.UDPAddr{IP: net.ParseIP("10.20.0.50"), Port: 68}
	m := func(mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
		d, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithMessageType(dhcpv4.MessageTypeOffer)}, mods...)...)
		require.NoError(t, err)
		return d
	}
	assert.Equal(t, "255.255.255.255:68", replyAddress(m(), &net.UDPAddr{IP: net.IPv4zero, Port: 68}, PortDHCP).String())
	assert.Equal(t, "10.20.0.50:68", replyAddress(m(dhcpv4.WithClientIP(peer.IP)), peer, PortDHCP).String())
	assert.Equal(t, "255.255.255.255:68", replyAddress(m(dhcpv4.WithClientIP(peer.IP), dhcpv4.WithBroadcast(true)), peer, PortDHCP).String())
	assert.Equal(t, "10.30.0.1:67", replyAddress(m(dhcpv4.WithGatewayIP(net.ParseIP("10.30.0.1"))), peer, PortDHCP).String())
	assert.Equal(t, "10.20.0.50:4011", replyAddress(m(), &net.UDPAddr{IP: peer.IP, Port: 4011}, PortPXE).String())
}
