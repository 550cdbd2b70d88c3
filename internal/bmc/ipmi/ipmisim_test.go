package ipmi

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/ipmisim"
)

// These tests drive OpenIPMI's ipmi_sim (test/ipmisim), a BMC implementation that is not
// go-ipmi's: it has no suite 17, so the client falls back to suite 3.

const (
	simUser     = "admin"
	simPassword = "s3cret-Pw"
	simUUID     = "3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0"
)

func startSim(t *testing.T) *ipmisim.BMC {
	t.Helper()
	ipmisim.RequireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := ipmisim.Start(ctx, ipmisim.Options{
		Dir: t.TempDir(), Username: simUser, Password: simPassword, GUID: simUUID,
		FRU:           ipmisim.FRU{Manufacturer: "Ironfleet Labs", Product: "IF-1000", Serial: "SN-IPMI-0001"},
		MAC:           "52:54:00:12:34:56",
		FirmwareMajor: 9, FirmwareMinor: 8, ManufacturerID: 4753, ProductID: 0xf02,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = sim.Close()
		if t.Failed() {
			data, _ := os.ReadFile(sim.LogFile())
			t.Logf("ipmi_sim log:\n%s", data)
		}
	})
	return sim
}

// simTarget addresses addr ("host:port", the sim's or a proxy's).
func simTarget(addr, password string) bmc.Target {
	return lanTarget(addr, simUser, password)
}

func dialSim(t *testing.T, addr string, o Options) *Client {
	t.Helper()
	c, err := Dial(testContext(t), simTarget(addr, simPassword), o)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func newProxy(t *testing.T, upstream string) *ipmisim.Proxy {
	t.Helper()
	p, err := ipmisim.NewProxy(upstream)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// openSessionProposals returns the authentication, integrity and confidentiality algorithms
// of every RMCP+ Open Session Request among datagrams. Offsets: RMCP header 4 bytes, then the
// IPMI v2.0 session header (auth type 0x06, payload type, session ID 4, sequence 4, length 2),
// payload at 16; in the payload (IPMI v2.0 table 13-9) the authentication payload starts at
// byte 8 (type 0x00) with its algorithm at byte 12, integrity (0x01) at 16/20, confidentiality
// (0x02) at 24/28.
func openSessionProposals(t *testing.T, datagrams [][]byte) [][3]byte {
	var out [][3]byte
	for _, d := range datagrams {
		if len(d) < 16 || d[4] != 0x06 || d[5]&0x3f != 0x10 {
			continue
		}
		p := d[16:]
		require.GreaterOrEqual(t, len(p), 32, "Open Session Request payload")
		require.Equal(t, []byte{0x00, 0x01, 0x02}, []byte{p[8], p[16], p[24]}, "payload types where table 13-9 puts them")
		out = append(out, [3]byte{p[12] & 0x3f, p[20] & 0x3f, p[28] & 0x3f})
	}
	return out
}

var (
	suite17Proposal = [3]byte{0x03, 0x04, 0x01} // RAKP-HMAC-SHA256, HMAC-SHA256-128, AES-CBC-128
	suite3Proposal  = [3]byte{0x01, 0x01, 0x01} // RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128
)

func TestSimIdentityPowerAndBoot(t *testing.T) {
	sim := startSim(t)
	proxy := newProxy(t, sim.Addr())
	c := dialSim(t, proxy.Addr(), fastOptions)
	ctx := testContext(t)

	assert.Equal(t, [][3]byte{suite17Proposal, suite3Proposal}, openSessionProposals(t, proxy.Requests()),
		"17 proposed first, refused by ipmi_sim, then 3: nothing else")

	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	assert.Equal(t, []bmc.SystemInfo{{
		URI: SystemURI, ID: "system", UUID: simUUID,
		Manufacturer: "Ironfleet Labs", Model: "IF-1000", SerialNumber: "SN-IPMI-0001",
		PowerState: metalv1alpha1.PowerStateOff,
	}}, systems)

	assertManager(t, c, bmc.ManagerInfo{Manufacturer: "MontaVista (OpenIPMI)", Model: "0x0f02", FirmwareVersion: "9.08", PowerState: metalv1alpha1.PowerStateOn}, "52:54:00:12:34:56")

	require.NoError(t, c.SetBootOnce(ctx, SystemURI, bmc.BootPXE, ""))
	assert.Equal(t, "pxe", sim.BootDevice())
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Equal(t, "On", sim.PowerState())
	assert.Equal(t, "none", sim.BootDevice(), "consumed by the power-on")
	state, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.PowerStateOn, state)

	// ipmi_sim forgets "persistent": the client re-sends it before the restart.
	require.NoError(t, c.SetBootPersistent(ctx, SystemURI, bmc.BootDisk, ""))
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerForceRestart))
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOff))
	assert.Equal(t, "Off", sim.PowerState())
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))
	assert.Equal(t, []string{"set boot pxe", "set power 1", "set boot default", "set boot default", "set reset 1", "set power 0", "set boot default", "set power 1"},
		sim.Log())

	// A third-party client sees the same machine over suite 3.
	out := ipmitool(t, sim, "-C", "3", "chassis", "power", "status")
	assert.Equal(t, "Chassis Power is on", strings.TrimSpace(out))
	// ipmitool 1.8.19 prints the GUID's wire bytes; decoded in SMBIOS order they are the UUID.
	out = ipmitool(t, sim, "-C", "3", "mc", "guid")
	fields := strings.Fields(out)
	require.NotEmpty(t, fields)
	wire, err := hex.DecodeString(fields[len(fields)-1])
	require.NoError(t, err, out)
	uuid, err := DecodeSystemGUID(wire)
	require.NoError(t, err)
	assert.Equal(t, systems[0].UUID, uuid)
}

func ipmitool(t *testing.T, sim *ipmisim.BMC, args ...string) string {
	t.Helper()
	base := []string{"-I", "lanplus", "-H", "127.0.0.1", "-p", strconv.Itoa(sim.Port()), "-U", simUser, "-P", simPassword}
	out, err := exec.CommandContext(testContext(t), "ipmitool", append(base, args...)...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return string(out)
}

func TestSimWrongPasswordNeverSuite0(t *testing.T) {
	sim := startSim(t)
	proxy := newProxy(t, sim.Addr())

	// The witness: ipmi_sim lets suite 0 in with any password.
	out, err := exec.CommandContext(testContext(t), "ipmitool", "-I", "lanplus", "-C", "0", "-H", "127.0.0.1",
		"-p", strconv.Itoa(sim.Port()), "-U", simUser, "-P", "wrong-password", "chassis", "power", "status").CombinedOutput()
	require.NoError(t, err, "ipmi_sim accepts suite 0 with a wrong password: %s", out)

	start := time.Now()
	_, err = Connector(fastOptions)(testContext(t), simTarget(proxy.Addr(), "wrong-password"))
	var be *bmc.Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, metalv1alpha1.BMCReasonAuthenticationFailed, be.Reason, "%v", err)
	assert.NotContains(t, err.Error(), "wrong-password")
	assert.Less(t, time.Since(start), 15*time.Second, "one connect, not a retry loop (loose: a loaded CI machine)")
	assert.Equal(t, [][3]byte{suite17Proposal, suite3Proposal}, openSessionProposals(t, proxy.Requests()),
		"17 refused, one login with 3, suite 0 never proposed")
}

func TestSimDroppedPacketsAreRetried(t *testing.T) {
	sim := startSim(t)
	proxy := newProxy(t, sim.Addr())
	c := dialSim(t, proxy.Addr(), Options{Timeout: 300 * time.Millisecond, Retries: 3})
	ctx := testContext(t)

	logins := len(openSessionProposals(t, proxy.Requests()))
	proxy.DropRequests(2)
	_, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	proxy.DropResponses(2)
	_, err = c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	assert.Len(t, openSessionProposals(t, proxy.Requests()), logins,
		"resent on the same session: no new Open Session (logging in again would hide missing retries)")
}

func TestSimBlackholeIsUnreachableThenRecovers(t *testing.T) {
	sim := startSim(t)
	proxy := newProxy(t, sim.Addr())
	c := dialSim(t, proxy.Addr(), Options{Timeout: 200 * time.Millisecond, Retries: 2})

	proxy.Blackhole(true) // longer than timeout × attempts: 600 ms
	requireUnreachableWithin(t, c, 3*time.Second)

	proxy.Blackhole(false)
	state, err := c.PowerState(testContext(t), SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.PowerStateOff, state)
}

func TestSimRestartMidSession(t *testing.T) {
	sim := startSim(t)
	c := dialSim(t, sim.Addr(), Options{Timeout: 200 * time.Millisecond, Retries: 1})
	ctx := testContext(t)
	require.NoError(t, c.SetPower(ctx, SystemURI, bmc.PowerOn))

	require.NoError(t, sim.Restart())
	state, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err, "the session is re-established")
	assert.Equal(t, metalv1alpha1.PowerStateOn, state)
}

// TestSimSessionEndsBeforeGoIPMIsKeepalive: no session lives to see go-ipmi's keepalive fire
// (see defaultSessionEnd). An idle session is logged out at its end without any call; the next
// call logs in anew; a call after the reuse window logs in anew too. Each works.
func TestSimSessionEndsBeforeGoIPMIsKeepalive(t *testing.T) {
	keepalive := time.Duration(client.DefaultKeepAliveIntervalSec) * time.Second
	assert.LessOrEqual(t, defaultSessionEnd+keepaliveMargin, keepalive, "a session ends before go-ipmi's keepalive first fires")
	assert.Less(t, defaultSessionReuse, defaultSessionEnd)

	sim := startSim(t)
	proxy := newProxy(t, sim.Addr())
	c := dialSim(t, proxy.Addr(), Options{Timeout: 300 * time.Millisecond, sessionReuse: 300 * time.Millisecond, sessionEnd: 2 * time.Second})
	ctx := testContext(t)
	perLogin := len(openSessionProposals(t, proxy.Requests())) // suite 17 refused, then 3
	require.Positive(t, perLogin)
	sent := len(proxy.Requests())

	current := func() *session {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.sess
	}
	require.Eventually(t, func() bool { return current() == nil }, 10*time.Second, 20*time.Millisecond,
		"the idle session is logged out at its end")
	assert.Greater(t, len(proxy.Requests()), sent, "the logout went to the BMC")

	state, err := c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	assert.Equal(t, metalv1alpha1.PowerStateOff, state)
	assert.Len(t, openSessionProposals(t, proxy.Requests()), 2*perLogin, "logged in anew")

	s := current()
	require.NotNil(t, s)
	require.Eventually(t, func() bool { return time.Now().After(s.reuseUntil) }, 10*time.Second, 20*time.Millisecond)
	_, err = c.PowerState(ctx, SystemURI)
	require.NoError(t, err)
	assert.Len(t, openSessionProposals(t, proxy.Requests()), 3*perLogin, "a call after the reuse window logs in anew")
	assert.NotSame(t, s, current())
}
