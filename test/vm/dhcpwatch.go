package vm

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// PacketWatch records packets of one kind a machine sends on the network's bridge, by the
// machine's hardware address, independently of whatever answers them: it reads the bridge's
// frames with a packet socket, so that a test can say that a machine sent no DHCP at all (one
// that boots from its disk with a static address, say), or no TFTP (one that boots by UEFI
// HTTP boot).
type PacketWatch struct {
	fd    int
	done  chan struct{}
	match func(pkt []byte, from *unix.SockaddrLinklayer) (net.HardwareAddr, bool)

	mu   sync.Mutex
	seen map[string][]time.Time
}

// DHCPWatch is a PacketWatch of DHCP requests.
type DHCPWatch = PacketWatch

// WatchDHCP starts watching the bridge for DHCP requests (IPv4 UDP to port 67), by the
// requests' client hardware address.
func (n *Network) WatchDHCP() (*PacketWatch, error) {
	return n.watch("DHCP", func(pkt []byte, _ *unix.SockaddrLinklayer) (net.HardwareAddr, bool) { return dhcpClient(pkt) })
}

// WatchTFTP starts watching the bridge for TFTP requests (IPv4 UDP to port 69: every TFTP
// transfer starts with one), by the frame's source hardware address.
func (n *Network) WatchTFTP() (*PacketWatch, error) {
	return n.watch("TFTP", func(pkt []byte, from *unix.SockaddrLinklayer) (net.HardwareAddr, bool) {
		if from == nil || from.Halen != 6 || udpDstPort(pkt) != 69 {
			return nil, false
		}
		return net.HardwareAddr(append([]byte(nil), from.Addr[:6]...)), true
	})
}

func (n *Network) watch(what string, match func([]byte, *unix.SockaddrLinklayer) (net.HardwareAddr, bool)) (*PacketWatch, error) {
	return n.watchProtocol(what, unix.ETH_P_IP, match)
}

// watchProtocol is watch on a packet socket of protocol: ETH_P_IP sees the IPv4 packets that
// arrive on the bridge (from the VMs); ETH_P_ALL also those the host sends out on it (the
// kernel hands outgoing frames to ETH_P_ALL sockets only), and packets of other protocols,
// which match must tell apart.
func (n *Network) watchProtocol(what string, protocol uint16, match func([]byte, *unix.SockaddrLinklayer) (net.HardwareAddr, bool)) (*PacketWatch, error) {
	w := &PacketWatch{done: make(chan struct{}), seen: map[string][]time.Time{}, match: match}
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(BridgeName)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(protocol)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(protocol), Ifindex: ifi.Index}); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("binding to %s: %w", BridgeName, err)
		}
		// Reads wake up now and then, so that Close is noticed.
		tv := unix.Timeval{Usec: 200_000}
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			_ = unix.Close(fd)
			return err
		}
		w.fd = fd
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("watching %s on %s: %w", what, n.name, err)
	}
	go w.read()
	return w, nil
}

func (w *PacketWatch) read() {
	defer unix.Close(w.fd)
	buf := make([]byte, 2048)
	for {
		select {
		case <-w.done:
			return
		default:
		}
		n, from, err := unix.Recvfrom(w.fd, buf, 0)
		if err != nil {
			continue // a timeout, or an interrupted read: look at done again
		}
		ll, _ := from.(*unix.SockaddrLinklayer)
		if mac, ok := w.match(buf[:n], ll); ok {
			w.mu.Lock()
			w.seen[mac.String()] = append(w.seen[mac.String()], time.Now())
			w.mu.Unlock()
		}
	}
}

// udpOf is the UDP header and payload of an IPv4 packet; nil when it is not UDP.
func udpOf(pkt []byte) []byte {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != unix.IPPROTO_UDP {
		return nil
	}
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) < ihl+8 {
		return nil
	}
	return pkt[ihl:]
}

// udpDstPort is the destination port of an IPv4 UDP packet; 0 when it is none.
func udpDstPort(pkt []byte) uint16 {
	if udp := udpOf(pkt); udp != nil {
		return binary.BigEndian.Uint16(udp[2:4])
	}
	return 0
}

// dhcpClient is the client hardware address of an IPv4 packet that is a BOOTP request to
// port 67.
func dhcpClient(pkt []byte) (net.HardwareAddr, bool) {
	udp := udpOf(pkt)
	if len(udp) < 8+44 || binary.BigEndian.Uint16(udp[2:4]) != 67 {
		return nil, false
	}
	bootp := udp[8:]
	if bootp[0] != 1 || bootp[2] != 6 { // BOOTREQUEST, a 6-byte hardware address
		return nil, false
	}
	return net.HardwareAddr(append([]byte(nil), bootp[28:34]...)), true
}

// Seen is when the machine with mac sent the packets watched for since the watch began.
func (w *PacketWatch) Seen(mac string) []time.Time {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.seen[hw.String()]...)
}

// Close stops watching.
func (w *PacketWatch) Close() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
