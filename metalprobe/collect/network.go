package collect

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jaypipes/ghw"
	ghwnet "github.com/jaypipes/ghw/pkg/net"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// network fills one NetworkInterface per physical NIC (ghw: /sys/class/net, skipping lo and
// anything under /sys/devices/virtual/net). ghw gives name, MAC, speed and PCI address; link
// state (operstate) and driver (device/driver link) are read from the same sysfs directory;
// IP addresses only exist on the live system.
func (c *collector) network(_ context.Context, rep *report.Report) error {
	info, err := ghw.Network(c.ghwOptions()...)
	if err != nil {
		return err
	}
	for _, nic := range info.NICs {
		if nic == nil || nic.IsVirtual || nic.Name == "lo" {
			continue
		}
		rep.Inventory.NetworkInterfaces = append(rep.Inventory.NetworkInterfaces, c.networkInterface(nic))
	}
	if len(rep.Inventory.NetworkInterfaces) == 0 {
		return errors.New("no physical network interfaces found in /sys/class/net")
	}
	return nil
}

func (c *collector) networkInterface(nic *ghwnet.NIC) metalv1alpha1.NetworkInterface {
	name := nic.Name
	ni := metalv1alpha1.NetworkInterface{
		Name:       name,
		MACAddress: strings.ToLower(nic.MACAddress),
		SpeedMbps:  speedMbps(nic.Speed),
		Link:       linkState(c.readTrimmed("sys", "class", "net", name, "operstate")),
	}
	if ni.MACAddress == "" {
		// ghw leaves out a MAC that is not the burnt-in one (addr_assign_type != 0, e.g. set
		// by a bond or by hand). The interface is still a real port; report the current
		// address and say so.
		if mac := strings.ToLower(c.readTrimmed("sys", "class", "net", name, "address")); mac != "" {
			ni.MACAddress = mac
			c.note("network: %s: MAC %s is not the permanent address (addr_assign_type %q)", name, mac, c.readTrimmed("sys", "class", "net", name, "addr_assign_type"))
		}
	}
	if nic.PCIAddress != nil {
		ni.PCIAddress = *nic.PCIAddress
	} else {
		ni.PCIAddress = c.parentPCIAddress(name)
	}
	if target, err := os.Readlink(c.path("sys", "class", "net", name, "device", "driver")); err == nil {
		ni.Driver = filepath.Base(target)
	} else if ni.PCIAddress != "" {
		ni.Driver = c.pciDrivers[ni.PCIAddress]
	}
	if c.live {
		ni.IPAddresses = liveIPAddresses(name)
	}
	return ni
}

// parentPCIAddress finds the PCI function behind a NIC whose device is not itself on the PCI
// bus but sits one level below it, e.g. virtio-net (…/0000:00:03.0/virtio0). ghw only looks
// at the device itself.
func (c *collector) parentPCIAddress(name string) string {
	dev, err := filepath.EvalSymlinks(c.path("sys", "class", "net", name, "device"))
	if err != nil {
		return ""
	}
	parent := filepath.Base(filepath.Dir(dev))
	if ghw.PCIAddressFromString(parent) == nil {
		return ""
	}
	return parent
}

// speedMbps reads sysfs's speed ("10000") or ethtool's ("10000Mb/s"); -1 and unknown are 0.
func speedMbps(s string) int32 {
	s = strings.TrimSpace(s)
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || end == 0 && s[end] == '-') {
		end++
	}
	n, err := strconv.ParseInt(s[:end], 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return int32(n)
}

// linkState maps the kernel's operstate (RFC 2863) to Up, Down or Unknown.
func linkState(operstate string) metalv1alpha1.LinkState {
	switch strings.ToLower(operstate) {
	case "up":
		return metalv1alpha1.LinkUp
	case "down", "lowerlayerdown", "notpresent":
		return metalv1alpha1.LinkDown
	}
	return metalv1alpha1.LinkUnknown
}

// liveIPAddresses lists an interface's addresses (without prefix length), leaving out IPv6
// link-local ones, which only restate the MAC.
func liveIPAddresses(name string) []string {
	iface, err := net.InterfaceByName(name)
	if err != nil {
		return nil
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		var ip net.IP
		switch v := a.(type) {
		case *net.IPNet:
			ip = v.IP
		case *net.IPAddr:
			ip = v.IP
		}
		if ip == nil || ip.IsLinkLocalUnicast() && ip.To4() == nil {
			continue
		}
		out = append(out, ip.String())
	}
	return out
}
