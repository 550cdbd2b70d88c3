package vm

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// tapFlags are the flags every tap is created and opened with. IFF_VNET_HDR lets QEMU pass
// virtio-net offloads through; QEMU reads the flag back from the descriptor.
const tapFlags = unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR

// AddTap creates a persistent tap on the bridge and returns its name. It is persistent so it
// stays on the bridge while its VM is off or restarting: QEMU opens it anew at each start
// and its carrier follows QEMU's life. Taps die with the namespace.
func (n *Network) AddTap() (string, error) {
	n.mu.Lock()
	name := fmt.Sprintf("tap%d", n.nextTap)
	n.nextTap++
	n.mu.Unlock()
	err := n.Do(func() error {
		br, err := netlink.LinkByName(BridgeName)
		if err != nil {
			return fmt.Errorf("find bridge: %w", err)
		}
		tap := &netlink.Tuntap{
			LinkAttrs: netlink.LinkAttrs{Name: name, MasterIndex: br.Attrs().Index},
			Mode:      netlink.TUNTAP_MODE_TAP,
			Flags:     netlink.TUNTAP_NO_PI | netlink.TUNTAP_VNET_HDR,
		}
		if err := netlink.LinkAdd(tap); err != nil {
			return fmt.Errorf("add tap: %w", err)
		}
		if !n.ipv6 {
			if err := disableIPv6(name); err != nil {
				return err
			}
		}
		return netlink.LinkSetUp(tap)
	})
	if err != nil {
		return "", fmt.Errorf("add tap %s to %s: %w", name, n.name, err)
	}
	n.mu.Lock()
	n.taps[name] = true
	n.mu.Unlock()
	return name, nil
}

// OpenTap opens a descriptor on a tap of this network, for QEMU to inherit. /dev/net/tun
// binds a descriptor to the tap of that name in the namespace of the thread that opens it,
// hence Do; the descriptor then works from any namespace, so QEMU itself needs none.
func (n *Network) OpenTap(name string) (*os.File, error) {
	n.mu.Lock()
	known := n.taps[name]
	n.mu.Unlock()
	if !known {
		return nil, fmt.Errorf("network %s has no tap %q", n.name, name)
	}
	var f *os.File
	err := n.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			_ = unix.Close(fd)
			return err
		}
		ifr.SetUint16(tapFlags)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			_ = unix.Close(fd)
			return fmt.Errorf("attach to tap: %w", err)
		}
		f = os.NewFile(uintptr(fd), "tap:"+name)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("open tap %s in %s: %w", name, n.name, err)
	}
	return f, nil
}

// RemoveTap deletes a tap, when its VM is gone for good.
func (n *Network) RemoveTap(name string) error {
	n.mu.Lock()
	known, closed := n.taps[name], n.closed
	delete(n.taps, name)
	n.mu.Unlock()
	if !known || closed { // a closed network's taps went with its namespace
		return nil
	}
	err := n.Do(func() error {
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return netlink.LinkDel(link)
	})
	if err != nil {
		return fmt.Errorf("remove tap %s from %s: %w", name, n.name, err)
	}
	return nil
}

// Taps lists the network's taps.
func (n *Network) Taps() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Sorted(maps.Keys(n.taps))
}
