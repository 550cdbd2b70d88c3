package vm

import (
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// DHCPWatch records every DHCP (BOOTP) request a client sends on the network's bridge, by
// the client's hardware address, independently of whatever DHCP server answers it: it reads
// the bridge's frames with a packet socket, so that a test can say that a machine sent no
// DHCP at all (one that boots from its disk with a static address, say).
type DHCPWatch struct {
	fd   int
	done chan struct{}

	mu   sync.Mutex
	seen map[string][]time.Time
}

// WatchDHCP starts watching the bridge for DHCP requests (IPv4 UDP to port 67).
func (n *Network) WatchDHCP() (*DHCPWatch, error) {
	w := &DHCPWatch{done: make(chan struct{}), seen: map[string][]time.Time{}}
	err := n.Do(func() error {
		ifi, err := net.InterfaceByName(BridgeName)
		if err != nil {
			return err
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(htons(unix.ETH_P_IP)))
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: ifi.Index}); err != nil {
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
		return nil, fmt.Errorf("watching DHCP on %s: %w", n.name, err)
	}
	go w.read()
	return w, nil
}

func (w *DHCPWatch) read() {
	defer unix.Close(w.fd)
	buf := make([]byte, 2048)
	for {
		select {
		case <-w.done:
			return
		default:
		}
		n, _, err := unix.Recvfrom(w.fd, buf, 0)
		if err != nil {
			continue // a timeout, or an interrupted read: look at done again
		}
		if mac, ok := dhcpClient(buf[:n]); ok {
			w.mu.Lock()
			w.seen[mac.String()] = append(w.seen[mac.String()], time.Now())
			w.mu.Unlock()
		}
	}
}

// dhcpClient is the client hardware address of an IPv4 packet that is a BOOTP request to
// port 67.
func dhcpClient(pkt []byte) (net.HardwareAddr, bool) {
	if len(pkt) < 20 || pkt[0]>>4 != 4 || pkt[9] != unix.IPPROTO_UDP {
		return nil, false
	}
	ihl := int(pkt[0]&0x0f) * 4
	if len(pkt) < ihl+8+44 {
		return nil, false
	}
	udp := pkt[ihl:]
	if binary.BigEndian.Uint16(udp[2:4]) != 67 {
		return nil, false
	}
	bootp := udp[8:]
	if bootp[0] != 1 || bootp[2] != 6 { // BOOTREQUEST, a 6-byte hardware address
		return nil, false
	}
	return net.HardwareAddr(append([]byte(nil), bootp[28:34]...)), true
}

// Seen is when the client with mac sent DHCP requests since the watch began.
func (w *DHCPWatch) Seen(mac string) []time.Time {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Time(nil), w.seen[hw.String()]...)
}

// Close stops watching.
func (w *DHCPWatch) Close() {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
