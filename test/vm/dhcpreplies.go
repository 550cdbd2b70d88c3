package vm

import (
	"encoding/binary"
	"net"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/sys/unix"
)

// WatchDHCPReplies starts watching the bridge for DHCP replies (IPv4 UDP from port 67 to port
// 68, BOOTREPLY), by the client hardware address they answer: what DHCP told a machine. It sees
// the replies the host sends out on the bridge (the lab's boot service's) as well as those
// arriving from a port.
func (n *Network) WatchDHCPReplies() (*PacketWatch, error) {
	return n.watchProtocol("DHCP replies", unix.ETH_P_ALL, func(pkt []byte, ll *unix.SockaddrLinklayer) (net.HardwareAddr, bool) {
		if ll == nil || ll.Protocol != htons(unix.ETH_P_IP) {
			return nil, false
		}
		reply, ok := dhcpReply(pkt)
		if !ok {
			return nil, false
		}
		return reply.ClientHWAddr, true
	})
}

// WatchDHCPBootOffers starts watching the bridge for DHCP replies that offer something to boot:
// a boot file (the BOOTP file field or option 67), a TFTP server name (option 66) or a PXE or
// HTTP boot class (option 60), by the client hardware address they answer.
func (n *Network) WatchDHCPBootOffers() (*PacketWatch, error) {
	return n.watchProtocol("DHCP boot offers", unix.ETH_P_ALL, func(pkt []byte, ll *unix.SockaddrLinklayer) (net.HardwareAddr, bool) {
		if ll == nil || ll.Protocol != htons(unix.ETH_P_IP) {
			return nil, false
		}
		reply, ok := dhcpReply(pkt)
		if !ok || !offersBoot(reply) {
			return nil, false
		}
		return reply.ClientHWAddr, true
	})
}

// dhcpReply decodes an IPv4 packet that is a BOOTREPLY from port 67 to port 68.
func dhcpReply(pkt []byte) (*dhcpv4.DHCPv4, bool) {
	udp := udpOf(pkt)
	if len(udp) < 8+44 || binary.BigEndian.Uint16(udp[0:2]) != 67 || binary.BigEndian.Uint16(udp[2:4]) != 68 {
		return nil, false
	}
	m, err := dhcpv4.FromBytes(udp[8:])
	if err != nil || m.OpCode != dhcpv4.OpcodeBootReply || len(m.ClientHWAddr) != 6 {
		return nil, false
	}
	return m, true
}

func offersBoot(m *dhcpv4.DHCPv4) bool {
	return m.BootFileName != "" || m.Options.Has(dhcpv4.OptionBootfileName) ||
		m.Options.Has(dhcpv4.OptionTFTPServerName) || m.ClassIdentifier() != ""
}
