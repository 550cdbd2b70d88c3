package ipmisim_test

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ipmisim"
)

// recorder keeps the PowerActions a BMC emits.
type recorder struct {
	mu      sync.Mutex
	actions []ipmisim.PowerAction
}

func (r *recorder) add(a ipmisim.PowerAction) {
	r.mu.Lock()
	r.actions = append(r.actions, a)
	r.mu.Unlock()
}

// got is the actions so far as "action From>To boot".
func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, a := range r.actions {
		out = append(out, a.Action+" "+a.From+">"+a.To+" "+a.Boot)
	}
	return out
}

func TestIpmitoolPowersAndSetsTheBootDevice(t *testing.T) {
	b := start(t, testOptions(t))
	var r recorder
	b.OnPowerAction(r.add)

	assert.Contains(t, ipmitool(t, b, "chassis", "power", "status"), "Chassis Power is off")
	assert.Equal(t, "none", b.BootDevice())

	ipmitool(t, b, "chassis", "bootdev", "pxe")
	assert.Equal(t, "pxe", b.BootDevice())
	assert.Contains(t, ipmitool(t, b, "chassis", "bootparam", "get", "5"), "Force PXE")

	ipmitool(t, b, "chassis", "power", "on")
	assert.Equal(t, "On", b.PowerState())
	assert.Equal(t, "none", b.BootDevice(), "the device is next boot only")
	assert.Contains(t, ipmitool(t, b, "chassis", "power", "status"), "Chassis Power is on")

	ipmitool(t, b, "chassis", "power", "reset")
	ipmitool(t, b, "chassis", "bootdev", "cdrom")
	ipmitool(t, b, "chassis", "power", "reset")
	ipmitool(t, b, "chassis", "power", "soft")
	assert.Equal(t, "On", b.PowerState(), "a soft shutdown leaves the host on until it goes off")
	ipmitool(t, b, "chassis", "power", "off")
	assert.Equal(t, "Off", b.PowerState())
	assert.Contains(t, ipmitool(t, b, "chassis", "power", "status"), "Chassis Power is off")
	// Reset and soft while off ask nothing of the host.
	_, _ = ipmitoolAt(t, b.Addr(), pass, nil, "chassis", "power", "reset")
	assert.Equal(t, "Off", b.PowerState())

	assert.Equal(t, []string{
		"on Off>On pxe",
		"reset On>On default",
		"reset On>On cdrom",
		"shutdown On>On ",
		"off On>Off ",
	}, r.got())
	assert.Equal(t, []string{"set boot pxe", "set power 1", "set reset 1", "set boot cdrom", "set reset 1", "set shutdown 1", "set power 0", "set reset 1"}, b.Log())

	// A power cycle is off, then on once ipmi_sim sees the host off (its 1 s timer).
	ipmitool(t, b, "chassis", "power", "on")
	ipmitool(t, b, "chassis", "power", "cycle")
	waitFor(t, 10*time.Second, "the cycle's power on", func() bool { return len(r.got()) == 8 })
	assert.Equal(t, []string{"on Off>On default", "off On>Off ", "on Off>On default"}, r.got()[5:])
	assert.Equal(t, "On", b.PowerState())

	// The host powering off by itself: ipmi_sim reads it.
	b.SetPowerState("Off")
	assert.Contains(t, ipmitool(t, b, "chassis", "power", "status"), "Chassis Power is off")
	assert.Len(t, r.got(), 8, "SetPowerState emits nothing")
}

func TestIpmitoolReadsTheIdentity(t *testing.T) {
	b := start(t, testOptions(t))
	assert.Equal(t, "ipmi://"+b.Addr(), b.Address())
	assert.True(t, strings.HasPrefix(b.Addr(), "127.0.0.1:"))

	guid := ipmitool(t, b, "mc", "guid")
	assert.Contains(t, strings.ToUpper(strings.ReplaceAll(guid, "-", "")), "0F1E2D3C4B5A69788796A5B4C3D2E1F0", guid)

	fru := ipmitool(t, b, "fru", "print", "0")
	for _, want := range []string{"Ironfleet Labs", "IF-1000", "SN-IPMI-0001", "PN-7"} {
		assert.Contains(t, fru, want)
	}
	assert.Regexp(t, `Product Manufacturer\s*:\s*Ironfleet Labs`, fru)
	assert.Regexp(t, `Board Serial\s*:\s*SN-IPMI-0001`, fru)

	info := ipmitool(t, b, "mc", "info")
	assert.Regexp(t, `Firmware Revision\s*:\s*9\.08`, info)
	assert.Regexp(t, `Manufacturer ID\s*:\s*4753`, info)
	assert.Regexp(t, `Product ID\s*:\s*3842`, info)

	assert.Regexp(t, `MAC Address\s*:\s*52:54:00:12:34:56`, ipmitool(t, b, "lan", "print", "1"))
}

func TestWrongPasswordIsRefused(t *testing.T) {
	b := start(t, testOptions(t))
	out, err := ipmitoolAt(t, b.Addr(), "wrong-password", []string{"-R", "1", "-N", "1"}, "chassis", "power", "on")
	require.Error(t, err, out)
	assert.Contains(t, out, "Unable to establish IPMI v2 / RMCP+ session")
	assert.Equal(t, "Off", b.PowerState())
	assert.Empty(t, b.Log())
}

func TestRestartKeepsPortConfigAndHostState(t *testing.T) {
	b := start(t, testOptions(t))
	ipmitool(t, b, "chassis", "power", "on")
	ipmitool(t, b, "chassis", "bootdev", "pxe")
	addr, pid := b.Addr(), b.PID()
	require.NotZero(t, pid)

	require.NoError(t, b.Restart())
	assert.Equal(t, addr, b.Addr())
	assert.NotEqual(t, pid, b.PID(), "a new ipmi_sim")
	assert.Contains(t, ipmitool(t, b, "chassis", "power", "status"), "Chassis Power is on")
	assert.Equal(t, "pxe", b.BootDevice())
	assert.Regexp(t, `Firmware Revision\s*:\s*9\.08`, ipmitool(t, b, "mc", "info"))
}

func TestCloseKillsIpmiSim(t *testing.T) {
	ipmisim.RequireTools(t)
	b, err := ipmisim.Start(t.Context(), testOptions(t))
	require.NoError(t, err)
	pid := b.PID()
	require.NotZero(t, pid)
	require.NoError(t, b.Close())
	require.NoError(t, b.Close(), "idempotent")
	assert.Zero(t, b.PID())
	assert.Error(t, ipmisim.Ping(t.Context(), b.Addr()), "nobody answers")
	assert.Error(t, b.Restart())
}

func TestProxyDropsAndBlackholes(t *testing.T) {
	b := start(t, testOptions(t))
	p, err := ipmisim.NewProxy(b.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })

	out, err := ipmitoolAt(t, p.Addr(), pass, nil, "chassis", "power", "status")
	require.NoError(t, err, out)
	seen := len(p.Requests())
	assert.Positive(t, seen)

	// Single drops are retried by the client.
	p.DropRequests(1)
	out, err = ipmitoolAt(t, p.Addr(), pass, []string{"-R", "3", "-N", "1"}, "chassis", "power", "status")
	require.NoError(t, err, out)
	p.DropResponses(1)
	out, err = ipmitoolAt(t, p.Addr(), pass, []string{"-R", "3", "-N", "1"}, "chassis", "power", "status")
	require.NoError(t, err, out)

	p.Blackhole(true)
	before := len(p.Requests())
	out, err = ipmitoolAt(t, p.Addr(), pass, []string{"-R", "1", "-N", "1"}, "chassis", "power", "status")
	require.Error(t, err, out)
	assert.Greater(t, len(p.Requests()), before, "the requests reached the proxy")
	p.Blackhole(false)
	out, err = ipmitoolAt(t, p.Addr(), pass, []string{"-R", "1", "-N", "1"}, "chassis", "power", "status")
	require.NoError(t, err, out)
	assert.Contains(t, out, "Chassis Power is off")
}

func TestStartFailsClearlyWhenThePortIsTaken(t *testing.T) {
	ipmisim.RequireTools(t)
	taken, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	o := testOptions(t)
	o.Addr = taken.LocalAddr().String()
	start := time.Now()
	_, err = ipmisim.Start(t.Context(), o)
	require.Error(t, err)
	t.Logf("after %s: %v", time.Since(start), err)
	assert.Contains(t, err.Error(), o.Addr)
}

func TestCleanupStaleKillsOnlyOrphans(t *testing.T) {
	// A dead owner: a process that has exited and been reaped.
	dead := exec.Command("true")
	require.NoError(t, dead.Run())
	orphan := exec.Command("sleep", "60")
	orphan.Env = append(os.Environ(), "IRONFLEET_IPMISIM_OWNER="+strconv.Itoa(dead.Process.Pid))
	owned := exec.Command("sleep", "60")
	owned.Env = append(os.Environ(), "IRONFLEET_IPMISIM_OWNER="+strconv.Itoa(os.Getpid()))
	for _, c := range []*exec.Cmd{orphan, owned} {
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		require.NoError(t, c.Start())
	}
	t.Cleanup(func() { _ = owned.Process.Kill(); _ = owned.Wait() })
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()

	require.NoError(t, ipmisim.CleanupStale())
	select {
	case err := <-exited:
		assert.ErrorContains(t, err, "killed")
	case <-time.After(10 * time.Second):
		_ = orphan.Process.Kill()
		t.Fatal("the orphan survived CleanupStale")
	}
	assert.NoError(t, owned.Process.Signal(syscall.Signal(0)), "a live owner's process is left alone")
}
