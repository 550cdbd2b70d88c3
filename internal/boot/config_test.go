package boot_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
)

// offConfig is a DHCP-less service on loopback: no interface, no range.
func offConfig() boot.Config {
	return boot.Config{Mode: dhcp.ModeOff, ServerIP: netip.MustParseAddr("127.0.0.1"),
		HTTPBindAddress: "127.0.0.1:0", TFTPBindAddress: "127.0.0.1:0", PublicURL: "http://127.0.0.1:8080",
		ProbeDir: "/nonexistent", URLKey: []byte("0123456789abcdef0123456789abcdef")}
}

func configField(err error) string {
	var ce *boot.ConfigError
	if errors.As(err, &ce) {
		return ce.Field
	}
	return ""
}

func TestModeOffNeedsNoRangeNorInterface(t *testing.T) {
	s, err := boot.New(offConfig())
	require.NoError(t, err)
	assert.Equal(t, dhcp.ModeOff, s.Config().Mode)

	_, err = boot.New(boot.Config{Mode: "relay", ServerIP: netip.MustParseAddr("127.0.0.1"), ProbeDir: "/x", URLKey: make([]byte, 32)})
	assert.Equal(t, "Mode", configField(err))
	assert.ErrorContains(t, err, `"off"`)
}

// ModeOff opens no DHCP socket at all; TFTP and HTTP still listen. The media listener is
// opened on its own (in whatever network namespace the caller is in).
func TestOpenListenersWithDHCPOff(t *testing.T) {
	cfg := offConfig()
	cfg.MediaBindAddress = "127.0.0.1:0"
	l, err := boot.OpenListeners(cfg)
	require.NoError(t, err)
	defer l.Close()
	assert.Nil(t, l.DHCP)
	assert.Nil(t, l.PXE)
	assert.NotNil(t, l.TFTP)
	assert.NotNil(t, l.HTTP)
	assert.Nil(t, l.Media, "OpenListeners leaves the media listener to OpenMediaListener")

	l.Media, err = boot.OpenMediaListener(cfg)
	require.NoError(t, err)
	require.NotNil(t, l.Media)
	assert.Equal(t, "127.0.0.1", l.Media.Addr().(*net.TCPAddr).IP.String())

	none, err := boot.OpenMediaListener(offConfig())
	assert.NoError(t, err)
	assert.Nil(t, none, "no MediaBindAddress, no listener")

	taken := offConfig()
	taken.MediaBindAddress = l.Media.Addr().String()
	_, err = boot.OpenMediaListener(taken)
	assert.Equal(t, "MediaBindAddress", configField(err))

	// DHCP modes still need the interface.
	proxy := offConfig()
	proxy.Mode = dhcp.ModeProxy
	_, err = boot.OpenListeners(proxy)
	assert.Equal(t, "Interface", configField(err))
}

func TestMediaURL(t *testing.T) {
	for _, tc := range []struct {
		url, bind, want string
	}{
		{"", "", "http://127.0.0.1:8080"},                                     // PublicURL
		{"", "127.0.0.1:9191", "http://127.0.0.1:9191"},                       // where the media listener is
		{"", "0.0.0.0:9191", "http://127.0.0.1:8080"},                         // no host to name: PublicURL
		{"", "127.0.0.1:0", "http://127.0.0.1:8080"},                          // no port to name
		{"https://bmc-net.example:8443/", "", "https://bmc-net.example:8443"}, // behind a TLS proxy
		{"http://192.0.2.10:9090", "127.0.0.1:9191", "http://192.0.2.10:9090"},
	} {
		cfg := offConfig()
		cfg.MediaURL, cfg.MediaBindAddress = tc.url, tc.bind
		s, err := boot.New(cfg)
		require.NoError(t, err, tc)
		assert.Equal(t, tc.want, s.Config().MediaURL, tc)
	}
	for _, bad := range []string{"ftp://x", "http://", "http://x/?a=b", "http://x/#f", "x:9090"} {
		cfg := offConfig()
		cfg.MediaURL = bad
		_, err := boot.New(cfg)
		assert.Equal(t, "MediaURL", configField(err), bad)
	}
	cfg := offConfig()
	cfg.MediaBindAddress = "no-port"
	_, err := boot.New(cfg)
	assert.Equal(t, "MediaBindAddress", configField(err))
}

// Serve refuses sockets that contradict the config, before anything else, closing them.
func TestServeRefusesListenersThatContradictTheConfig(t *testing.T) {
	s, err := boot.New(offConfig())
	require.NoError(t, err)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dhcpConn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	err = s.Serve(context.Background(), boot.Listeners{HTTP: httpL, DHCP: dhcpConn})
	assert.ErrorContains(t, err, "DHCP mode off")
	_, err = dhcpConn.WriteTo([]byte("x"), dhcpConn.LocalAddr())
	assert.ErrorIs(t, err, net.ErrClosed, "closed")

	cfg := offConfig()
	cfg.MediaBindAddress = "127.0.0.1:9"
	s, err = boot.New(cfg)
	require.NoError(t, err)
	httpL, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	err = s.Serve(context.Background(), boot.Listeners{HTTP: httpL})
	assert.ErrorContains(t, err, "OpenMediaListener")
}

func TestMediaSecretName(t *testing.T) {
	assert.Equal(t, "s1-discovery-boot-media", boot.MediaSecretName("s1-discovery"))
	long := ""
	for len(long) < 250 {
		long += "abcdefghij"
	}
	name := boot.MediaSecretName(long)
	assert.Len(t, name, 253)
	assert.Contains(t, name, "-boot-media")
	assert.NotEqual(t, name, boot.MediaSecretName(long+"x"), "distinct names stay distinct")
}

// Full mode keeps its leases in a ConfigMap of Namespace, which must fit them.
func TestFullModeNeedsANamespaceAndARangeThatFits(t *testing.T) {
	cfg := testConfig("ns", nil)
	_, err := boot.New(cfg)
	require.NoError(t, err)
	cfg.Namespace = ""
	_, err = boot.New(cfg)
	assert.Equal(t, "Namespace", configField(err))

	cfg = testConfig("ns", nil)
	cfg.SubnetMask = netip.MustParseAddr("255.255.0.0")
	cfg.DHCPRangeStart, cfg.DHCPRangeEnd = netip.MustParseAddr("10.20.0.1"), netip.MustParseAddr("10.20.63.255")
	_, err = boot.New(cfg)
	require.NoError(t, err, "16,383 addresses")
	cfg.DHCPRangeEnd = netip.MustParseAddr("10.20.64.1")
	_, err = boot.New(cfg)
	assert.Equal(t, "DHCPRange", configField(err))
}

// The firmware cache directory defaults to one of the service's own under the system's
// temporary directory; a relative one, a negative size bound or timeout are refused by name.
func TestFirmwareConfig(t *testing.T) {
	s, err := boot.New(offConfig())
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(os.TempDir(), "ironfleet-boot-service-firmware"), s.Config().FirmwareCacheDir)
	assert.Equal(t, int64(boot.DefaultFirmwareMaxBytes), s.Config().FirmwareMaxBytes)
	for field, mutate := range map[string]func(*boot.Config){
		"FirmwareCacheDir":     func(c *boot.Config) { c.FirmwareCacheDir = "relative/dir" },
		"FirmwareMaxBytes":     func(c *boot.Config) { c.FirmwareMaxBytes = -1 },
		"FirmwareFetchTimeout": func(c *boot.Config) { c.FirmwareFetchTimeout = -time.Second },
	} {
		cfg := offConfig()
		mutate(&cfg)
		_, err := boot.New(cfg)
		assert.Equal(t, field, configField(err), err)
	}
}
