package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPickNIC(t *testing.T) {
	mac := func(s string) net.HardwareAddr { m, _ := net.ParseMAC(s); return m }
	ifaces := []net.Interface{
		{Name: "lo", Flags: net.FlagLoopback},
		{Name: "eth1", HardwareAddr: mac("52:54:00:00:00:02")},
		{Name: "eth0", HardwareAddr: mac("52:54:00:00:00:01")},
		{Name: "ib0", HardwareAddr: make(net.HardwareAddr, 20)},
	}
	assert.Equal(t, "eth1", pickNIC(ifaces, mac("52:54:00:00:00:02")))
	assert.Equal(t, "", pickNIC(ifaces, mac("52:54:00:00:00:09")), "the boot NIC has not appeared yet")
	assert.Equal(t, "eth0", pickNIC(ifaces, nil), "without BOOTIF: the first Ethernet NIC by name")
	assert.Equal(t, "", pickNIC(ifaces[:1], nil))
}
