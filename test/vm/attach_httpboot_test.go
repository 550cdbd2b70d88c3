package vm_test

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/vm"
)

// requestLog is an HTTP/1.1 server's record of the requests it answered, each "METHOD path".
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	l.seen = append(l.seen, r.Method+" "+r.URL.Path)
	l.mu.Unlock()
	http.NotFound(w, r) // the request is the proof; an ISO is not needed for it
}

func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// serveHTTP runs an HTTP/1.1 server (keep-alive, as OVMF's HTTP boot needs) on the network's
// bridge, recording what it is asked for.
func serveHTTP(t *testing.T, n *vm.Network) (string, *requestLog) {
	t.Helper()
	ln, err := n.ListenTCP(net.JoinHostPort(n.BridgeIP().String(), "0"))
	require.NoError(t, err)
	log := &requestLog{}
	srv := &http.Server{Handler: log, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("HTTP server: %v", err)
		}
	}()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), log
}

// TestUefiHttpBootOfAURIReachesTheServer: a client sets a one-time UEFI HTTP boot of a URI
// on the BMC, as the operator does, and powers the system on; the VM's OVMF boots that URI:
// it asks DHCP for an address only (the server offers no boot file) and requests the URI's
// path from the HTTP server on the bridge, with no TFTP.
func TestUefiHttpBootOfAURIReachesTheServer(t *testing.T) {
	def := testDefinition("httpuri", vm.UEFI)
	def.Disks = def.Disks[:1]
	def.NICs[0].FirmwarePXE = true // OVMF's own network stack, with its HTTP boot
	h := startVMBehindBMC(t, def)
	serveDHCP(t, h.network)
	base, requests := serveHTTP(t, h.network)
	tftp, err := h.network.WatchTFTP()
	require.NoError(t, err)
	defer tftp.Close()

	requested := func(path string) bool {
		for _, r := range requests.requests() {
			if strings.HasSuffix(r, " "+path) {
				return true
			}
		}
		return false
	}
	boot := func(path string) {
		t.Helper()
		require.NoError(t, h.system(t).SetBoot(redfish.Boot{
			BootSourceOverrideTarget: redfish.UefiHTTPBootSourceOverrideTarget, BootSourceOverrideEnabled: redfish.OnceBootSourceOverrideEnabled,
			BootSourceOverrideMode: redfish.UEFIBootSourceOverrideMode, HTTPBootURI: base + path,
		}))
		assert.Equal(t, base+path, h.system(t).Boot.HTTPBootURI, "the BMC shows the URI")
	}

	// From Off: QEMU starts with the URI as BootNext.
	first := "/boot/0123456789abcdef/probe.iso"
	boot(first)
	start := time.Now()
	h.reset(t, redfish.OnResetType)
	assert.Equal(t, vm.BootNetwork, h.vm.BootDevice())
	target, enabled := h.bmc.BootOverride(h.system(t).ID)
	assert.Equal(t, bmcsim.BootUefiHttp, target)
	assert.Equal(t, "Disabled", enabled, "the override was used")
	waitFor(t, 60*time.Second, "the firmware requests "+first, func() bool { return requested(first) })
	t.Logf("%s requested %s after power-on: %v", def.Name, time.Since(start).Round(100*time.Millisecond), requests.requests())
	for _, r := range requests.requests() {
		assert.Contains(t, []string{"HEAD " + first, "GET " + first}, r, "only the URI is asked for")
	}
	assert.Empty(t, tftp.Seen(def.NICs[0].MAC), "no TFTP: the firmware booted the URI, not PXE")

	// Running, already booting the network: not a reset in place, which would leave QEMU
	// holding the old store; QEMU is stopped, the URI written, QEMU started again.
	second := "/boot/fedcba9876543210/other.iso"
	boot(second)
	pid := h.vm.PID()
	start = time.Now()
	h.reset(t, redfish.ForceRestartResetType)
	assert.NotEqual(t, pid, h.vm.PID(), "QEMU was started again")
	waitFor(t, 60*time.Second, "the firmware requests "+second, func() bool { return requested(second) })
	t.Logf("%s requested %s after the restart", def.Name, time.Since(start).Round(100*time.Millisecond))
	assert.Empty(t, tftp.Seen(def.NICs[0].MAC), "no TFTP")

	h.reset(t, redfish.ForceOffResetType) // the store is read with QEMU off, as it is written
	next, err := vm.HTTPBootNext(h.vm.FirmwareVars())
	require.NoError(t, err)
	assert.Empty(t, next, "the firmware consumed BootNext as it booted it")
	assert.True(t, consoleHas(h.vm, "Start HTTP Boot over IPv4"), "OVMF says how it boots")
}

// TestBootHTTPURINeedsUEFI: a BIOS VM has no variable store to write the URI into; the
// binding boots such a VM from the network instead (BootDeviceFor).
func TestBootHTTPURINeedsUEFI(t *testing.T) {
	requireQEMU(t)
	def := testDefinition("httpuri-bios", vm.BIOS)
	def.NICs = nil
	m, err := vm.New(def, vm.Options{Dir: t.TempDir()})
	require.NoError(t, err)
	defer m.Close()
	err = m.BootHTTPURI("http://10.0.0.1/x.iso")
	require.Error(t, err)
	assert.False(t, m.Running())
	assert.Contains(t, fmt.Sprint(err), "UEFI")
	assert.Equal(t, vm.BootNetwork, vm.BootDeviceFor(bmcsim.BootUefiHttp, false))
}
