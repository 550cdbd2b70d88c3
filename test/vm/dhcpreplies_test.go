package vm

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ipv4UDP wraps payload in an IPv4 and UDP header, as the bridge's packet socket reads it.
func ipv4UDP(src, dst uint16, payload []byte) []byte {
	pkt := make([]byte, 28, 28+len(payload))
	pkt[0], pkt[9] = 0x45, 17
	binary.BigEndian.PutUint16(pkt[20:], src)
	binary.BigEndian.PutUint16(pkt[22:], dst)
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(payload)))
	return append(pkt, payload...)
}

func TestDHCPRepliesAreToldApartByWhatTheyOffer(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x1f, 0, 7}
	reply := func(mods ...dhcpv4.Modifier) []byte {
		m, err := dhcpv4.New(append([]dhcpv4.Modifier{dhcpv4.WithHwAddr(mac), dhcpv4.WithReply(&dhcpv4.DHCPv4{OpCode: dhcpv4.OpcodeBootRequest, ClientHWAddr: mac}),
			dhcpv4.WithMessageType(dhcpv4.MessageTypeOffer), dhcpv4.WithYourIP(net.IPv4(10, 0, 0, 9))}, mods...)...)
		require.NoError(t, err)
		return m.ToBytes()
	}
	addressOnly := ipv4UDP(67, 68, reply())
	m, ok := dhcpReply(addressOnly)
	require.True(t, ok)
	assert.Equal(t, mac.String(), m.ClientHWAddr.String())
	assert.False(t, offersBoot(m), "an address only")
	for name, mod := range map[string]dhcpv4.Modifier{
		"file field": func(d *dhcpv4.DHCPv4) { d.BootFileName = "snponly.efi" },
		"option 67":  dhcpv4.WithOption(dhcpv4.OptBootFileName("http://10.0.0.1/x.efi")),
		"option 66":  dhcpv4.WithOption(dhcpv4.OptTFTPServerName("10.0.0.1")),
		"option 60":  dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient")),
	} {
		m, ok := dhcpReply(ipv4UDP(67, 68, reply(mod)))
		require.True(t, ok, name)
		assert.True(t, offersBoot(m), name)
	}
	_, ok = dhcpReply(ipv4UDP(68, 67, reply()))
	assert.False(t, ok, "a request's ports")
	req, err := dhcpv4.NewDiscovery(mac)
	require.NoError(t, err)
	_, ok = dhcpReply(ipv4UDP(67, 68, req.ToBytes()))
	assert.False(t, ok, "a BOOTREQUEST")
	_, ok = dhcpReply([]byte{0x45})
	assert.False(t, ok, "truncated")
}
