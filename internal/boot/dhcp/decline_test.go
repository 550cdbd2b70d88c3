package dhcp

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func decline(t *testing.T, mac net.HardwareAddr, ip netip.Addr) *dhcpv4.DHCPv4 {
	t.Helper()
	return discover(t, mac, dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.IP(ip.AsSlice()))))
}

// A storm of DECLINEs, from every MAC the service knows (a spoofer sends them), for every
// address of the range, sets no free address aside: each is still offered afterwards.
func TestDeclineStormReservesNothing(t *testing.T) {
	macs := make([]net.HardwareAddr, 50)
	for i := range macs {
		macs[i] = net.HardwareAddr{0x52, 0x54, 0x00, 0xd0, 0x00, byte(i)}
	}
	h := newHandler(ModeFull)
	h.Lookup = lookupOf(func(net.HardwareAddr) bool { return true }, plainBoot) // the spoofer knows the servers' MACs
	// One client holds a lease; the storm must not take it either.
	leased := requireReply(t, handle(h, discover(t, knownMAC), PortDHCP), dhcpv4.MessageTypeOffer)
	req, err := dhcpv4.NewRequestFromOffer(leased)
	require.NoError(t, err)
	ack := requireReply(t, handle(h, req, PortDHCP), dhcpv4.MessageTypeAck)
	held := addrOf(ack.YourIPAddr)

	for _, mac := range macs {
		for a := rangeStart; a.Compare(rangeEnd) <= 0; a = a.Next() {
			d := handle(h, decline(t, mac, a), PortDHCP)
			require.Nil(t, d.Reply)
			require.Equal(t, IgnoredDecline, d.Ignored, "%s declining %s", mac, a)
			require.NotEmpty(t, d.Detail)
		}
	}
	assert.Equal(t, knownMAC.String(), h.Leases.Holder(held), "the lease is still its client's")
	// Every other address is still free: 99 new clients get 99 different addresses.
	seen := map[netip.Addr]bool{held: true}
	for i := 0; i < 99; i++ {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xe0, 0x00, byte(i)}
		offer := requireReply(t, handle(h, discover(t, mac), PortDHCP), dhcpv4.MessageTypeOffer)
		ip := addrOf(offer.YourIPAddr)
		require.False(t, seen[ip], "%s offered twice", ip)
		seen[ip] = true
	}
	assert.Equal(t, IgnoredNoAddress, handle(h, discover(t, unknownMAC), PortDHCP).Ignored, "the range is full only now")
}

// A DECLINE is honoured from the client the address was acknowledged to, for that address,
// within declineWindow of the ACK; a client can set aside at most maxDeclinesPerMAC addresses.
func TestDeclineWithinItsExchange(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	table := NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, func() time.Time { return now })
	lease := func(mac net.HardwareAddr) netip.Addr {
		ip, ok := table.Offer(mac, netip.Addr{})
		require.True(t, ok)
		require.True(t, table.Commit(mac, ip))
		return ip
	}

	a := lease(knownMAC)
	assert.Error(t, table.Decline(otherMAC, a), "another MAC's lease")
	assert.Error(t, table.Decline(knownMAC, a.Next()), "an address not leased to it")
	require.NoError(t, table.Decline(knownMAC, a))
	assert.Empty(t, table.Holder(a))
	again, ok := table.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.NotEqual(t, a, again, "a declined address is set aside")

	// Only offered, never acknowledged: not its lease's exchange yet.
	o, ok := table.Offer(otherMAC, netip.Addr{})
	require.True(t, ok)
	assert.Error(t, table.Decline(otherMAC, o))

	// Past the window after the ACK: refused.
	b := lease(otherMAC)
	now = now.Add(declineWindow + time.Second)
	assert.Error(t, table.Decline(otherMAC, b))
	assert.Equal(t, otherMAC.String(), table.Holder(b))

	// One client looping through exchanges sets aside at most maxDeclinesPerMAC addresses.
	honoured := 0
	for i := 0; i < 10; i++ {
		if table.Decline(knownMAC, lease(knownMAC)) == nil {
			honoured++
		}
	}
	assert.Equal(t, maxDeclinesPerMAC-1, honoured, "one was declined above")
}

// Snapshot and Restore carry a table across a restart: what was leased stays leased to its MAC,
// declined addresses stay set aside, and what the restored table holds itself wins.
func TestSnapshotRestore(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	first := NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, clock)
	changes := 0
	first.Notify(func() { changes++ })
	a, _ := first.Offer(knownMAC, netip.Addr{})
	assert.Equal(t, 0, changes, "an offer is not worth keeping")
	require.True(t, first.Commit(knownMAC, a))
	b, _ := first.Offer(otherMAC, netip.Addr{})
	require.True(t, first.Commit(otherMAC, b))
	require.NoError(t, first.Decline(otherMAC, b))
	assert.Equal(t, 3, changes)
	snap := first.Snapshot()
	require.Len(t, snap, 2)

	restarted := NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, clock)
	assert.Equal(t, 2, restarted.Restore(snap))
	assert.Equal(t, knownMAC.String(), restarted.Holder(a))
	// A third MAC asking for either address gets another one.
	third := net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x03}
	for _, ip := range []netip.Addr{a, b} {
		got, ok := restarted.Offer(third, ip)
		require.True(t, ok)
		assert.NotEqual(t, ip, got, fmt.Sprintf("%s was leased or declined before the restart", ip))
	}
	got, ok := restarted.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, a, got, "a MAC gets its lease back")

	// What the table holds wins over a snapshot; expired entries are not restored.
	other := NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, clock)
	require.True(t, other.Commit(third, a))
	assert.Equal(t, 1, other.Restore(snap), "only the declined address")
	assert.Equal(t, third.String(), other.Holder(a))
	now = now.Add(2 * time.Hour)
	assert.Equal(t, 0, NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, clock).Restore(snap))
}
