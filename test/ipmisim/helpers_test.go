package ipmisim_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ipmisim"
)

const (
	user = "admin"
	pass = "s3cret-Pw"
)

func testOptions(t *testing.T) ipmisim.Options {
	return ipmisim.Options{
		Dir: t.TempDir(), Username: user, Password: pass,
		GUID:          "3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0",
		FRU:           ipmisim.FRU{Manufacturer: "Ironfleet Labs", Product: "IF-1000", Serial: "SN-IPMI-0001", PartNumber: "PN-7"},
		MAC:           "52:54:00:12:34:56",
		FirmwareMajor: 9, FirmwareMinor: 8, ManufacturerID: 4753, ProductID: 0xf02,
	}
}

// start runs a BMC closed when the test ends, showing its log when the test failed.
func start(t *testing.T, o ipmisim.Options) *ipmisim.BMC {
	t.Helper()
	ipmisim.RequireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := ipmisim.Start(ctx, o)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		if t.Failed() {
			data, _ := os.ReadFile(b.LogFile())
			t.Logf("ipmi_sim log:\n%s", data)
		}
	})
	return b
}

// ipmitool runs ipmitool over lanplus, cipher suite 3, against addr (host:port) and returns
// its combined output.
func ipmitoolAt(t *testing.T, addr, password string, extra []string, args ...string) (string, error) {
	t.Helper()
	host, port, ok := strings.Cut(addr, ":")
	require.True(t, ok)
	_, err := strconv.Atoi(port)
	require.NoError(t, err)
	all := append([]string{"-I", "lanplus", "-H", host, "-p", port, "-U", user, "-P", password, "-C", "3"}, extra...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ipmitool", append(all, args...)...).CombinedOutput()
	return string(out), err
}

// ipmitool runs a command that must succeed.
func ipmitool(t *testing.T, b *ipmisim.BMC, args ...string) string {
	t.Helper()
	out, err := ipmitoolAt(t, b.Addr(), pass, nil, args...)
	require.NoError(t, err, "ipmitool %v: %s", args, out)
	return out
}

func waitFor(t *testing.T, within time.Duration, msg string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, within, 20*time.Millisecond, msg)
}
