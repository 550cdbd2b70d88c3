package ipmi

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	gbmc "github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/ipmisim"
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

// TestReferenceBMCWithoutHardResetIsPowerCycled: ForceRestart on a BMC that refuses a hard
// reset (invalid data field) power-cycles the host instead.
func TestReferenceBMCWithoutHardResetIsPowerCycled(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	r.received(types.CommandChassisControl)
	r.hardResetCC.Store(0xcc)
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerForceRestart))
	assert.Equal(t, [][]byte{{0x03}, {0x02}}, r.received(types.CommandChassisControl), "hard reset refused, then power cycle")
}

func TestReferenceBMCPowerAndBootBytes(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	setBoot := func() [][]byte { return r.received(types.CommandSetSystemBootOptions) }
	controls := func() [][]byte { return r.received(types.CommandChassisControl) }

	// No boot flags readable yet (the mock answers 0x80): legacy.
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x04, 0, 0, 0}}, setBoot())

	// The BMC now holds valid EFI flags: the EFI bit is kept.
	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeEFI}))
	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x08, 0, 0, 0}}, setBoot())
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd, ""))
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
	require.ErrorIs(t, c.SetBootOnce(ctx, SystemURI, "Floppy", ""), bmc.ErrUnsupported)
	_, err = c.FirmwareInventory(ctx, SystemURI)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Contains(t, err.Error(), "no firmware inventory")
	_, err = c.BIOSSettings(ctx, SystemURI)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
	_, err = c.BIOSSettings(ctx, "/redfish/v1/Systems/1")
	assert.Contains(t, err.Error(), "no such system")

	_, err = c.PowerState(ctx, "/redfish/v1/Systems/1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no such system")
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))

	c.Close()
	c.Close() // go-ipmi's Close panics the second time; ours must not
	_, err = c.PowerState(ctx, SystemURI)
	require.Error(t, err)
	assert.Equal(t, metalv1alpha1.BMCReasonUnreachable, bmc.Reason(err), "transient: the caller fetches the new client")
	assert.Contains(t, err.Error(), "IPMI client was replaced")
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
	ipmisim.RequireTools(t)
	ipmitool := "ipmitool"
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

// TestReferenceBMCEFIBitNeedsValidBit: the BMC's EFI bit counts only when its flags are valid;
// otherwise the mode this client last sent or read valid is kept, legacy at first.
func TestReferenceBMCEFIBitNeedsValidBit(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	ctx := testContext(t)
	setBoot := func() [][]byte { return r.received(types.CommandSetSystemBootOptions) }
	staleEFI := &types.BootOptionParam_BootFlags{BIOSBootType: types.BIOSBootTypeEFI} // valid bit clear

	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, staleEFI))
	c := dialRef(t, r)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x04, 0, 0, 0}}, setBoot(), "stale EFI bit ignored: legacy")

	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeEFI}))
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x04, 0, 0, 0}}, setBoot(), "valid EFI flags: EFI")

	// The flags expired (or were consumed) and read back without their valid bit, the EFI bit
	// cleared: the client keeps the mode it last used.
	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{}))
	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x08, 0, 0, 0}}, setBoot(), "remembered EFI")

	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BootFlagsValid: true}))
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x14, 0, 0, 0}}, setBoot(), "valid legacy flags: legacy")
	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, staleEFI))
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x14, 0, 0, 0}}, setBoot(), "remembered legacy, stale EFI bit ignored")
}

// TestReferenceBMCEFIBitFollowsTheMode: a mode asked for decides the EFI bit on the wire, against
// valid BMC flags that say the opposite (so a client still taking the BMC's bit fails), for the
// one-time and persistent overrides and the persistent one re-sent before a power-on; the BMC's
// flags are not read for it.
func TestReferenceBMCEFIBitFollowsTheMode(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	ctx := testContext(t)
	c := dialRef(t, r)
	setBoot := func() [][]byte { return r.received(types.CommandSetSystemBootOptions) }
	getBoot := func() [][]byte { return r.received(types.CommandGetSystemBootOptions) }
	bmcFlags := func(efi bool) {
		t.Helper()
		typ := types.BIOSBootTypeLegacy
		if efi {
			typ = types.BIOSBootTypeEFI
		}
		require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: typ}))
	}

	bmcFlags(true)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, metalv1alpha1.BootModeLegacy))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x04, 0, 0, 0}}, setBoot(), "Legacy: EFI bit clear though the BMC's valid flags say EFI")
	assert.Empty(t, getBoot(), "a mode asked for: the BMC's flags are not read")

	bmcFlags(false)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, metalv1alpha1.BootModeUEFI))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x04, 0, 0, 0}}, setBoot(), "UEFI: EFI bit set though the BMC's valid flags say legacy")
	bmcFlags(false)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd, metalv1alpha1.BootModeUEFISecureBoot))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x14, 0, 0, 0}}, setBoot(), "UEFISecureBoot: EFI bit set")

	// A persistent Legacy disk, re-sent before the power-on in Legacy, whatever the BMC has.
	bmcFlags(true)
	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, metalv1alpha1.BootModeLegacy))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xc0, 0x08, 0, 0, 0}}, setBoot())
	bmcFlags(true)
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xc0, 0x08, 0, 0, 0}}, setBoot(), "re-sent in the mode it was set for")

	// No mode: today's rule, the BMC's valid EFI bit.
	bmcFlags(true)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x04, 0, 0, 0}}, setBoot(), "no mode: the BMC's valid EFI bit")
	assert.Len(t, getBoot(), 1, "read for it")
}

// TestReferenceBMCSupermicroUEFIDisk: a BMC whose Get Device ID says Supermicro (IANA 10876)
// gets Supermicro's UEFI hard disk selector (0x24) for a UEFI disk boot on the wire: once, set
// persistent, re-sent before a power-on, and with the mode taken from the BMC's own valid EFI
// flags; Legacy disk, and UEFI PXE and CD, are the standard bytes. Get Device ID is read once.
// The same requests to the default (Dell) reference BMC send the standard disk selector.
func TestReferenceBMCSupermicroUEFIDisk(t *testing.T) {
	r := startRefBMC(t, refOptions{manufacturerID: IANASupermicro})
	ctx := testContext(t)
	c := dialRef(t, r)
	setBoot := func() [][]byte { return r.received(types.CommandSetSystemBootOptions) }

	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootDisk, metalv1alpha1.BootModeUEFI))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x24, 0, 0, 0}}, setBoot(), "UEFI disk once: Supermicro's selector")
	assert.Len(t, r.received(types.CommandGetDeviceID), 1, "the manufacturer is read for it")

	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, metalv1alpha1.BootModeUEFISecureBoot))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x24, 0, 0, 0}}, setBoot(), "UEFISecureBoot disk persistent")
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x24, 0, 0, 0}}, setBoot(), "re-sent before the power-on with it")

	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeEFI}))
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootDisk, ""))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x24, 0, 0, 0}}, setBoot(), "no mode, the BMC's valid EFI bit: UEFI, so Supermicro's selector")

	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootDisk, metalv1alpha1.BootModeLegacy))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0x80, 0x08, 0, 0, 0}}, setBoot(), "Legacy disk: the standard selector")
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, metalv1alpha1.BootModeUEFI))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x04, 0, 0, 0}}, setBoot(), "UEFI PXE: standard")
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootCd, metalv1alpha1.BootModeUEFI))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xa0, 0x14, 0, 0, 0}}, setBoot(), "UEFI CD: standard")
	assert.Empty(t, r.received(types.CommandGetDeviceID), "the manufacturer is read once per client")

	dell := startRefBMC(t, refOptions{})
	dc := dialRef(t, dell)
	require.NoError(t, dc.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, metalv1alpha1.BootModeUEFI))
	assert.Equal(t, [][]byte{{0x03, 0x08}, {0x05, 0xe0, 0x08, 0, 0, 0}}, dell.received(types.CommandSetSystemBootOptions), "another vendor: the standard disk selector")
}

// TestReferenceBMCBootModeReadsTheValidFlags: BootMode is the EFI bit of valid flags, unknown
// without the valid bit, and unknown for flags this client sent on a guess.
func TestReferenceBMCBootModeReadsTheValidFlags(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	ctx := testContext(t)
	c := dialRef(t, r)
	for _, tc := range []struct {
		flags types.BootOptionParam_BootFlags
		want  metalv1alpha1.BootMode
	}{
		{types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeEFI}, metalv1alpha1.BootModeUEFI},
		{types.BootOptionParam_BootFlags{BootFlagsValid: true, BIOSBootType: types.BIOSBootTypeLegacy}, metalv1alpha1.BootModeLegacy},
		{types.BootOptionParam_BootFlags{BIOSBootType: types.BIOSBootTypeEFI}, ""},
		{types.BootOptionParam_BootFlags{}, ""},
	} {
		require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &tc.flags))
		got, err := c.BootMode(ctx, SystemURI)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%+v", tc.flags)
	}
	_, err := c.BootMode(ctx, "/redfish/v1/Systems/1")
	assert.Error(t, err, "IPMI has one system")

	// A client that knows no mode sends the legacy guess; read back, that is no one's word.
	guessing := dialRef(t, r)
	require.NoError(t, r.hal.Chassis().SetBootFlags(ctx, &types.BootOptionParam_BootFlags{}))
	require.NoError(t, guessing.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	flags, err := r.hal.Chassis().GetBootFlags(ctx)
	require.NoError(t, err)
	require.True(t, flags.BootFlagsValid, "the BMC holds the flags sent")
	got, err := guessing.BootMode(ctx, SystemURI)
	require.NoError(t, err)
	assert.Empty(t, got, "its own guess, read back: unknown")
	require.NoError(t, guessing.SetBootOnce(ctx, SystemURI, bmc.BootPXE, metalv1alpha1.BootModeLegacy))
	got, err = guessing.BootMode(ctx, SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.BootModeLegacy, got, "flags sent for a mode asked for are the BMC's word")
}

// TestReferenceBMCOverIPv6 logs in to a BMC at [::1]: go-ipmi dials "host:port" with Sprintf,
// so the client must hand it the address bracketed.
func TestReferenceBMCOverIPv6(t *testing.T) {
	if pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		_ = pc.Close()
	}
	r := startRefBMC(t, refOptions{ipv6: true})
	target := r.target(refPassword)
	require.Equal(t, "ipmi://[::1]:"+strconv.Itoa(r.port), target.Address.Endpoint)
	c, err := Dial(testContext(t), target, fastOptions)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	state, err := c.PowerState(testContext(t), SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.PowerStateOff, state)
	assert.Equal(t, []types.AuthAlg{types.AuthAlg_HMAC_SHA256}, r.authAlgs())

	assert.Equal(t, "[fd00::6]", dialHost("fd00::6"))
	assert.Equal(t, "10.0.0.6", dialHost("10.0.0.6"))
	assert.Equal(t, "bmc.example", dialHost("bmc.example"))
}

// payloads counts the RMCP+ session-setup messages of payloadType (0x10 Open Session Request,
// 0x12 RAKP Message 1) among datagrams.
func payloads(datagrams [][]byte, payloadType byte) int {
	n := 0
	for _, d := range datagrams {
		if len(d) >= 16 && d[4] == 0x06 && d[5]&0x3f == payloadType {
			n++
		}
	}
	return n
}

// TestReferenceBMCWrongPasswordIsOneLogin: with suites 3 and 17 offered, a wrong password is
// one login attempt (suite 17), not a second one with suite 3 that go-ipmi would make.
func TestReferenceBMCWrongPasswordIsOneLogin(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	proxy := newProxy(t, r.addr())
	_, err := Dial(testContext(t), refTarget(proxy.Addr(), "wrong-password"), fastOptions)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, bmc.Reason(err), "%v", err)
	assert.Contains(t, err.Error(), "rejected the credentials")
	assert.NotContains(t, err.Error(), "wrong-password")
	assert.Equal(t, 1, payloads(proxy.Requests(), 0x10), "one Open Session")
	assert.Equal(t, 1, payloads(proxy.Requests(), 0x12), "one RAKP exchange")
	assert.Equal(t, [][3]byte{suite17Proposal}, openSessionProposals(t, proxy.Requests()))
}

// TestReferenceBMCOperatorUser: a user limited to OPERATOR cannot log in asking for
// ADMINISTRATOR (said so, not as a wrong password), and can with ?privilegelevel=OPERATOR.
func TestReferenceBMCOperatorUser(t *testing.T) {
	r := startRefBMC(t, refOptions{userPrivilege: gbmc.PrivilegeLevelOperator})
	proxy := newProxy(t, r.addr())
	target := refTarget(proxy.Addr(), refPassword)
	_, err := Dial(testContext(t), target, fastOptions)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, bmc.Reason(err), "%v", err)
	assert.Contains(t, err.Error(), "refused the ADMINISTRATOR privilege level")
	assert.Contains(t, err.Error(), "?privilegelevel=OPERATOR")
	assert.NotContains(t, err.Error(), "rejected the credentials")
	assert.Equal(t, [][3]byte{suite17Proposal}, openSessionProposals(t, proxy.Requests()), "not retried with suite 3")

	target.Address.PrivilegeLevel = "OPERATOR"
	c, err := Dial(testContext(t), target, fastOptions)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testContext(t)
	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Equal(t, [][]byte{{0x01}}, r.received(types.CommandChassisControl))

	target.Address.PrivilegeLevel = "SUPERUSER"
	_, err = Dial(ctx, target, fastOptions)
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
}

// TestOverlongPasswordRefusedBeforeSending: IPMI 2.0 passwords are at most 20 bytes.
func TestOverlongPasswordRefusedBeforeSending(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	proxy := newProxy(t, r.addr())
	password := "twenty-one-bytes-pw!!"
	require.Len(t, password, 21)
	_, err := Dial(testContext(t), refTarget(proxy.Addr(), password), fastOptions)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, bmc.Reason(err), "%v", err)
	assert.Contains(t, err.Error(), "at most 20 bytes")
	assert.NotContains(t, err.Error(), password)
	assert.Empty(t, proxy.Requests(), "nothing sent")

	_, err = Dial(testContext(t), refTarget(proxy.Addr(), "twenty-bytes-pw!!!!!"), fastOptions)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, bmc.Reason(err))
	assert.Contains(t, err.Error(), "rejected the credentials", "20 bytes are sent (and are wrong here)")
}

// TestReferenceBMCFRUFailures: FRU data the BMC says is absent is remembered as empty; any other
// refusal leaves the identity empty this time and is read again next time.
func TestReferenceBMCFRUFailures(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	areaInfo := func() int { return len(r.received(types.CommandGetFRUInventoryAreaInfo)) }
	manufacturer := func(c *Client) string {
		systems, err := c.Systems(ctx)
		require.NoError(t, err)
		return systems[0].Manufacturer
	}

	r.fruCC.Store(0xC0) // node busy
	assert.Empty(t, manufacturer(c))
	assert.Equal(t, 1, areaInfo())
	r.fruCC.Store(0)
	assert.Equal(t, "Ironfleet Labs", manufacturer(c), "read again")
	assert.Equal(t, 1, areaInfo())

	c2 := dialRef(t, r)
	r.fruCC.Store(0xCB) // not present
	assert.Empty(t, manufacturer(c2))
	assert.Equal(t, 1, areaInfo())
	r.fruCC.Store(0)
	assert.Empty(t, manufacturer(c2), "absent FRU remembered")
	assert.Zero(t, areaInfo())
}

// TestReferenceBMCFRUThatNeverEnds: a BMC whose Read FRU Data answers a full datagram but
// claims to return no bytes is read once, not until the call's deadline (go-ipmi's GetFRUData
// would read on, its buffer growing by every datagram): the identity stays empty, and the
// next call reads again.
func TestReferenceBMCFRUThatNeverEnds(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	c := dialRef(t, r)
	ctx := testContext(t)
	r.fruLies.Store(true)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	assert.Empty(t, systems[0].Manufacturer)
	assert.Len(t, r.received(types.CommandReadFRUData), 1, "one answer that claims nothing ends the read")

	r.fruLies.Store(false)
	systems, err = c.Systems(ctx)
	require.NoError(t, err)
	assert.Equal(t, "Ironfleet Labs", systems[0].Manufacturer, "read again")
}

// TestReferenceBMCMACLookupWithoutAnswer: an unanswered request in the optional MAC lookup
// gives "" once for the client's life, and neither tears the session down nor logs in again.
func TestReferenceBMCMACLookupWithoutAnswer(t *testing.T) {
	r := startRefBMC(t, refOptions{})
	proxy := newProxy(t, r.addr())
	c, err := Dial(testContext(t), refTarget(proxy.Addr(), refPassword), fastOptions)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	ctx := testContext(t)

	proxy.Blackhole(true)
	mac, err := c.MACAddress(ctx)
	proxy.Blackhole(false)
	require.NoError(t, err)
	assert.Empty(t, mac)
	assert.Len(t, r.received(types.CommandGetChannelInfo), 0, "nothing got through")

	manager, err := c.Manager(ctx)
	require.NoError(t, err)
	assert.Equal(t, "Dell", manager.Manufacturer)
	assert.Empty(t, manager.MACAddress, "unknown, kept for the client's life")
	assert.Empty(t, r.received(types.CommandGetChannelInfo), "not probed again")
	assert.Empty(t, r.received(types.CommandGetLanConfigParam))
	assert.Equal(t, 1, payloads(proxy.Requests(), 0x10), "still the first session")
}
