package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad flags stop the service at start-up, naming the flag, before it touches any cluster or
// socket.
func TestBadFlagsAreRefusedByName(t *testing.T) {
	dir := t.TempDir()
	shortKey := filepath.Join(dir, "short.key")
	require.NoError(t, os.WriteFile(shortKey, []byte("too short"), 0o600))
	good := []string{"--interface", "eth1", "--server-ip", "10.20.0.1", "--probe-dir", dir,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}
	full := append([]string{"--mode", "full", "--dhcp-range", "10.20.0.100-10.20.0.199", "--dhcp-subnet-mask", "255.255.255.0"}, good...)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{append([]string{"--mode", "relay"}, good...), `--mode: "relay" is not "proxy", "full" or "off"`},
		{append([]string{"--media-url", "ftp://bmc.example"}, good...), "--media-url:"},
		{append([]string{"--media-url", "http://bmc.example/?x=1"}, good...), "--media-url:"},
		{append([]string{"--media-bind-address", "no-port"}, good...), "--media-bind-address:"},
		{[]string{"--server-ip", "192.0.2.1", "--probe-dir", dir}, "--interface: no interface of this host has 192.0.2.1 (--server-ip)"},
		{[]string{"--interface", "eth1", "--probe-dir", dir}, "--server-ip: required"},
		{[]string{"--interface", "eth1", "--server-ip", "fe80::1", "--probe-dir", dir}, "--server-ip:"},
		{[]string{"--interface", "eth1", "--server-ip", "10.20.0.1"}, "--probe-dir: required"},
		{append([]string{"--public-url", "https://boot.example"}, good...), "--public-url:"},
		{append([]string{"--mode", "full"}, good...), "--dhcp-range: full mode needs a range"},
		{append([]string{"--mode", "full", "--dhcp-range", "10.20.0.100"}, good...), `--dhcp-range: "10.20.0.100" is not start-end`},
		{append([]string{"--mode", "full", "--dhcp-range", "10.20.1.100-10.20.1.199", "--dhcp-subnet-mask", "255.255.255.0"}, good...), "--dhcp-range: 10.20.1.100 is not in this host's subnet"},
		{append([]string{"--mode", "full", "--dhcp-range", "10.20.0.100-10.20.0.199"}, good...), "--dhcp-subnet-mask: full mode needs a subnet mask"},
		{append([]string{"--mode", "full", "--dhcp-range", "10.20.0.100-10.20.0.199", "--dhcp-subnet-mask", "255.0.255.0"}, good...), "--dhcp-subnet-mask: 255.0.255.0 is not a contiguous mask"},
		{append([]string{"--dhcp-router", "10.99.0.1"}, full...), "--dhcp-router: 10.99.0.1 is not in this host's subnet"},
		{append([]string{"--efi-boot-file", "grub.efi"}, good...), "--efi-boot-file:"},
		{append([]string{"--server-selector", "role in (boot"}, good...), "--server-selector:"},
		{append([]string{"--url-key-file", shortKey}, good...), "--url-key-file:"},
		{append([]string{"--url-key-file", filepath.Join(dir, "missing")}, good...), "--url-key-file:"},
		{append([]string{"--dhcp-lease-time", "10s"}, good...), "--dhcp-lease-time:"},
		{append([]string{"--namespace", ""}, good...), "--namespace: required"},
		{append([]string{"--no-such-flag"}, good...), "no-such-flag"},
	} {
		err := run(tc.args)
		if assert.Error(t, err, tc.args) {
			assert.Contains(t, err.Error(), tc.want, tc.args)
		}
	}
}

// Without --interface, the service serves the interface that holds --server-ip (a node's
// address, in config/default).
func TestTheInterfaceDefaultsToTheOneHoldingTheServerIP(t *testing.T) {
	o := options{mode: "proxy", serverIP: "127.0.0.1", probeDir: t.TempDir(), namespace: "ironfleet-system", bootOperator: "ironfleet"}
	cfg, err := configFrom(o)
	require.NoError(t, err)
	assert.Equal(t, "lo", cfg.Interface)
	o.iface = "eth7"
	cfg, err = configFrom(o)
	require.NoError(t, err)
	assert.Equal(t, "eth7", cfg.Interface, "a named interface is taken as it is")

	// With DHCP off no interface is needed, nor looked for.
	o = options{mode: "off", serverIP: "192.0.2.1", probeDir: t.TempDir(), namespace: "ironfleet-system", bootOperator: "ironfleet"}
	cfg, err = configFrom(o)
	require.NoError(t, err)
	assert.Empty(t, cfg.Interface)
}
