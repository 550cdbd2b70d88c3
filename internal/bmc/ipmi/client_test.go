package ipmi

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestReferenceBMCNegotiatesSuite17(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)

	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	assert.Equal(t, []types.AuthAlg{types.AuthAlg_HMAC_SHA256}, r.authAlgs(), "suite 17 (RAKP-HMAC-SHA256) when the BMC offers it")
	assert.Equal(t, []bmc.SystemInfo{{
		URI: SystemURI, ID: "system", UUID: "3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0",
		Manufacturer: "Ironfleet Labs", Model: "IF-2000", SerialNumber: "SN-REF-0001",
		PowerState: metalv1alpha1.PowerStateOff,
	}}, systems)

	r.received(types.CommandGetFRUInventoryAreaInfo)
	_, err = c.Systems(ctx)
	require.NoError(t, err)
	assert.Empty(t, r.received(types.CommandGetFRUInventoryAreaInfo), "FRU is read once per client")

	assertManager(t, c, bmc.ManagerInfo{Manufacturer: "Dell", Model: "0x0100", FirmwareVersion: "2.15", PowerState: metalv1alpha1.PowerStateOn}, "52:54:00:ab:cd:ef")
}

// assertManager checks what Manager and MACAddress read.
func assertManager(t *testing.T, c *Client, want bmc.ManagerInfo, wantMAC string) {
	t.Helper()
	ctx := testContext(t)
	manager, err := c.Manager(ctx)
	require.NoError(t, err)
	want.MACAddress = wantMAC // Manager reads it too
	assert.Equal(t, want, manager)
	mac, err := c.MACAddress(ctx)
	require.NoError(t, err)
	assert.Equal(t, wantMAC, mac)
}

func TestReferenceBMCSuite3Only(t *testing.T) {
	r := startRefBMC(t, refOptions{suites: []types.CipherSuiteID{types.CipherSuiteID3}, noGUID: true})
	c := dialRef(t, r)
	systems, err := c.Systems(testContext(t))
	require.NoError(t, err)
	assert.Equal(t, []types.AuthAlg{types.AuthAlg_HMAC_SHA1}, r.authAlgs(), "falls back to suite 3")
	assert.Empty(t, systems[0].UUID, "no Get System GUID: no UUID")
}

func TestReferenceBMCWrongPassword(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	start := time.Now()
	_, err := Connector(fastOptions)(testContext(t), r.target("wrong-password"))
	var be *bmc.Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, be.Reason, "%v", err)
	assert.NotContains(t, err.Error(), "wrong-password")
	assert.Less(t, time.Since(start), 2*time.Second, "one connect, no retry storm")
}

func TestReferenceBMCPowerAndBootBytes(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	setBoot := func() [][]byte { return r.received(types.CommandSetSystemBootOptions) }
	controls := func() [][]byte { return r.received(types.CommandChassisControl) }

	// No boot flags readable yet (the mock answers 0x80): legacy.
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x04, 0, 0, 0}}, setBoot())

	// The BMC now holds EFI flags: the EFI bit is kept.
	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BIOSBootType: types.BIOSBootTypeEFI}))
	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x08, 0, 0, 0}}, setBoot())
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x14, 0, 0, 0}}, setBoot())

	// A one-time override is pending: power on does not overwrite it.
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Empty(t, setBoot())
	assert.Equal(t, [][]byte{{0x01}}, controls())
	state, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.PowerStateOn, state)

	// After a power action, the persistent disk override is re-sent before each restart.
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerForceRestart))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x08, 0, 0, 0}}, setBoot())
	assert.Equal(t, [][]byte{{0x03}}, controls(), "hard reset when on")

	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerGracefulShutdown))
	assert.Equal(t, [][]byte{{0x05}}, controls())
	assert.Empty(t, setBoot(), "nothing re-sent before a shutdown")
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOff))
	assert.Equal(t, [][]byte{{0x00}}, controls())

	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerForceRestart))
	assert.Equal(t, [][]byte{{0x01}}, controls(), "power up when off")
	assert.Len(t, setBoot(), 2)
}

func TestReferenceBMCUnsupportedAndWrongSystem(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)

	_, err := c.Inventory(ctx, SystemURI)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Contains(t, err.Error(), "FRU only")
	_, err = c.VirtualMedia(ctx, SystemURI)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	require.ErrorIs(t, c.InsertMedia(ctx, SystemURI, "http://x/a.iso"), bmc.ErrUnsupported)
	require.ErrorIs(t, c.EjectMedia(ctx, SystemURI), bmc.ErrUnsupported)
	assert.Equal(t, metalv1alpha1.BMCReasonVirtualMediaUnsupported, bmc.Reason(c.EjectMedia(ctx, SystemURI)))
	require.ErrorIs(t, c.SetPower(ctx, SystemURI, "Nap"), bmc.ErrUnsupported)
	require.ErrorIs(t, c.SetBootOnce(ctx, SystemURI, "Floppy"), bmc.ErrUnsupported)

	_, err = c.PowerState(ctx, "/redfish/v1/Systems/1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such system")
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))

	c.Close()
	c.Close() // go-ipmi's Close panics the second time; ours must not
	_, err = c.PowerState(ctx, SystemURI)
	require.Error(t, err)
}

func TestReferenceBMCRestartReconnects(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	_, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err)

	r.restart() // the BMC forgets the session
	state, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err, "the session is re-established")
	assert.Equal(t, metalv1alpha1.PowerStateOff, state)
}

func TestReferenceBMCGoneIsUnreachable(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	r.stop()
	requireUnreachableWithin(t, c, 3*time.Second)
}

// requireUnreachableWithin reads the power state under a deadline of d: it must fail as
// Unreachable, and not much after the deadline.
func requireUnreachableWithin(t *testing.T, c *Client, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	_, err := c.PowerState(ctx, SystemURI)
	require.Error(t, err)
	assert.Equal(t, metalv1alpha1.BMCReasonUnreachable, bmc.Reason(err), "%v", err)
	assert.Less(t, time.Since(start), d+500*time.Millisecond, "bounded by the context")
}

func TestEndpointParsing(t *testing.T) {
	for _, tc := range []struct {
		endpoint string
		host     string
		port     int
	}{
		{"ipmi://10.0.0.5:623", "10.0.0.5", 623},
		{"ipmi://[fd00::5]:6230", "fd00::5", 6230},
		{"ipmi://bmc.example:623", "bmc.example", 623},
	} {
		host, port, err := parseEndpoint(bmc.Address{Type: "ipmi", Endpoint: tc.endpoint})
		require.NoError(t, err, tc.endpoint)
		assert.Equal(t, tc.host, host)
		assert.Equal(t, tc.port, port)
	}
	for _, bad := range []string{"ipmi://10.0.0.5", "https://10.0.0.5:623", "ipmi://:623", "ipmi://h:0", "::"} {
		_, _, err := parseEndpoint(bmc.Address{Type: "ipmi", Endpoint: bad})
		assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err), bad)
	}
	_, _, err := parseEndpoint(bmc.Address{Type: "redfish", Endpoint: "ipmi://h:623"})
	assert.Equal(t, metalv1alpha1.BMCReasonUnsupportedProtocol, bmc.Reason(err))
}

// TestIpmitoolSuite17AgainstReferenceBMC checks the reference BMC with a third-party client,
// so suite 17 is not proven only by go-ipmi against itself.
func TestIpmitoolSuite17AgainstReferenceBMC(t *testing.T) {
	ipmitool := requireTool(t, "ipmitool")
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))

	out, err := exec.CommandContext(ctx, ipmitool, "-I", "lanplus", "-C", "17", "-H", "127.0.0.1", "-p", strconv.Itoa(r.port),
		"-U", refUser, "-P", refPassword, "chassis", "power", "status").CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "Chassis Power is on", strings.TrimSpace(string(out)))
	assert.Contains(t, r.authAlgs(), types.AuthAlg_HMAC_SHA256)
}
