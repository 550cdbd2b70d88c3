package install

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/node"
)

// bootServiceHearsDHCP checks that the installed boot service's DHCP is up on the node's network,
// with the privileges and host networking its manifests give it: a PXE client's DHCPDISCOVER,
// sent from a MAC no server has through a tap on the node's bridge (as a host's NIC would send
// it), is received and refused as an unknown MAC, which its metrics count. No server of the
// fleet is booted by it, and nothing leaves the node's network namespace.
func bootServiceHearsDHCP(t *testing.T, n *node.Node, explain func() string) {
	t.Helper()
	tap, err := n.Network().AddTap()
	require.NoError(t, err)
	t.Cleanup(func() { _ = n.Network().RemoveTap(tap) })
	f, err := n.Network().OpenTap(tap)
	require.NoError(t, err)
	defer f.Close()
	mac := net.HardwareAddr{0x02, 0x00, 0x5e, 0x19, 0x00, 0x01}
	discover, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")))
	require.NoError(t, err)
	frame := dhcpFrame(mac, discover.ToBytes())

	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: n.Dial}}
	metrics := "http://" + net.JoinHostPort(n.IP().String(), "8082") + "/metrics"
	unknown := regexp.MustCompile(`(?m)^ironfleet_boot_dhcp_ignored_total\{reason="unknown_mac"\} (\d+)`)
	var last string
	eventually(t, time.Minute, func() bool {
		// The tap's frames are a NIC's: each poll sends one more, until the service counts one.
		if _, err := f.Write(frame); err != nil {
			last = "writing to the tap: " + err.Error()
			return false
		}
		resp, err := hc.Get(metrics)
		if err != nil {
			last = err.Error()
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		m := unknown.FindSubmatch(body)
		if m == nil {
			last = fmt.Sprintf("%d, no unknown_mac count in %d bytes", resp.StatusCode, len(body))
			return false
		}
		count, _ := strconv.Atoi(string(m[1]))
		return count > 0
	}, func() string { return "\nlast: " + last + explain() }, "the boot service hears a PXE client's DHCPDISCOVER on the node's network and refuses its unknown MAC")
}

// dhcpFrame is a DHCP client's broadcast from mac, as the tap takes it: a virtio-net header
// (the node's taps are made for QEMU's vhost, IFF_VNET_HDR; zero: no offloads), then Ethernet,
// IPv4 from 0.0.0.0 to 255.255.255.255, UDP 68 to 67, and the DHCP message.
func dhcpFrame(mac net.HardwareAddr, payload []byte) []byte {
	const vnetHeader, ethHeader, ipHeader, udpHeader = 10, 14, 20, 8
	b := make([]byte, vnetHeader+ethHeader+ipHeader+udpHeader+len(payload))
	eth := b[vnetHeader:]
	copy(eth[0:6], net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	copy(eth[6:12], mac)
	binary.BigEndian.PutUint16(eth[12:14], 0x0800) // IPv4
	ip := eth[ethHeader:]
	ip[0] = 0x45 // version 4, 5 words
	binary.BigEndian.PutUint16(ip[2:4], uint16(ipHeader+udpHeader+len(payload)))
	ip[8], ip[9] = 64, 17 // TTL, UDP
	copy(ip[16:20], net.IPv4bcast.To4())
	var sum uint32
	for i := 0; i < ipHeader; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i : i+2]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:12], ^uint16(sum))
	udp := ip[ipHeader:]
	binary.BigEndian.PutUint16(udp[0:2], 68)
	binary.BigEndian.PutUint16(udp[2:4], 67)
	binary.BigEndian.PutUint16(udp[4:6], uint16(udpHeader+len(payload))) // checksum 0: none (IPv4)
	copy(udp[udpHeader:], payload)
	return b
}
