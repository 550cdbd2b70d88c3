package vm_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/ironfleet/ironfleet/test/vm"
)

func namespaceExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

func TestNetworkHasABridgeAndTapsOnlyInsideItsNamespace(t *testing.T) {
	n := newNetwork(t)
	require.True(t, strings.HasPrefix(n.Name(), vm.NamespacePrefix+fmt.Sprint(os.Getpid())+"-"), n.Name())
	require.True(t, namespaceExists(n.Name()), "ip netns can see it")
	require.True(t, n.Subnet().Contains(n.BridgeIP()))

	tap, err := n.AddTap()
	require.NoError(t, err)
	assert.Equal(t, []string{tap}, n.Taps())

	require.NoError(t, n.Do(func() error {
		br, err := netlink.LinkByName(vm.BridgeName)
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(br, netlink.FAMILY_V4)
		if err != nil {
			return err
		}
		require.Len(t, addrs, 1)
		assert.Equal(t, n.BridgeIP().String(), addrs[0].IP.String())
		if addrs, err = netlink.AddrList(br, netlink.FAMILY_V6); err != nil {
			return err
		}
		for _, a := range addrs { // for router advertisements; none until a port is up
			assert.True(t, a.IP.IsLinkLocalUnicast(), "IPv6 on the bridge is link-local only, not %s", a.IP)
		}
		tapAddrs, err := netlink.AddrList(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Name: tap}}, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		assert.Empty(t, tapAddrs, "IPv6 stays off on the taps")
		link, err := netlink.LinkByName(tap)
		if err != nil {
			return err
		}
		assert.Equal(t, br.Attrs().Index, link.Attrs().MasterIndex, "the tap is a port of the bridge")
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		assert.NotZero(t, lo.Attrs().Flags&net.FlagUp, "lo is up")
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		assert.ElementsMatch(t, []string{"lo", vm.BridgeName, tap}, names, "no uplink, no veth")
		return nil
	}))

	// None of it exists in the host's namespace.
	_, err = net.InterfaceByName(tap)
	assert.Error(t, err)
	hostAddrs, err := net.InterfaceAddrs()
	require.NoError(t, err)
	for _, a := range hostAddrs {
		assert.NotContains(t, a.String(), n.BridgeIP().String())
	}

	f, err := n.OpenTap(tap)
	require.NoError(t, err, "a descriptor for QEMU")
	require.NoError(t, f.Close())
	_, err = n.OpenTap("eth0")
	assert.Error(t, err, "only the network's own taps")
	require.NoError(t, n.RemoveTap(tap))
	assert.Empty(t, n.Taps())
}

func TestListenersOpenedInsideServeInsideAndForwardReachesHostLoopback(t *testing.T) {
	n := newNetwork(t)
	ln, err := n.ListenTCP(n.BridgeIP().String() + ":0")
	require.NoError(t, err, "bound to the bridge address, which only exists inside")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = c.Write([]byte("hello from inside\n"))
			_ = c.Close()
		}
	}()
	var greeting string
	require.NoError(t, n.Do(func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		greeting, err = bufio.NewReader(c).ReadString('\n')
		return err
	}))
	assert.Equal(t, "hello from inside\n", greeting)

	udp, err := n.ListenUDP(":0")
	require.NoError(t, err)
	require.NoError(t, udp.Close())

	// A registry on the host's loopback, reached from inside through the forwarder.
	registry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "registry saw "+r.URL.Path)
	}))
	defer registry.Close()
	fwd, err := n.Forward(n.BridgeIP().String()+":0", registry.Listener.Addr().String())
	require.NoError(t, err)
	get := func() (string, error) {
		var conn net.Conn
		// Dial from inside, as a VM would; the request itself can then go from anywhere.
		if err := n.Do(func() (err error) {
			conn, err = net.DialTimeout("tcp", fwd.Addr().String(), 5*time.Second)
			return err
		}); err != nil {
			return "", err
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /reports HTTP/1.1\r\nHost: registry\r\nConnection: close\r\n\r\n"); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	body, err := get()
	require.NoError(t, err)
	assert.Equal(t, "registry saw /reports", body)

	require.NoError(t, fwd.Close())
	_, err = get()
	assert.Error(t, err, "a closed forwarder refuses")
}

func TestCloseRemovesTheNamespaceAndStopsItsVMs(t *testing.T) {
	requireRoot(t)
	n, err := vm.NewNetwork(vm.NetworkOptions{})
	require.NoError(t, err)
	_, err = n.AddTap()
	require.NoError(t, err)
	left := newVM(t, testDefinition("left-running", vm.BIOS), n)
	require.NoError(t, left.Start(vm.BootDisk))

	require.NoError(t, n.Close())
	assert.False(t, namespaceExists(n.Name()))
	waitFor(t, 10*time.Second, "a QEMU holding the network's tap is stopped", func() bool { return !left.Running() })
	require.NoError(t, n.Close(), "idempotent")
	assert.Error(t, n.Do(func() error { return nil }), "nothing runs in a closed network")
}

func TestCleanupStaleRemovesWhatADeadRunLeft(t *testing.T) {
	requireRoot(t)
	live := newNetwork(t) // ours: must survive

	// A dead run: a pid that has exited, its namespace, a process inside it, and a QEMU
	// stand-in outside it that still carries the dead run's mark. Made under the cleanup lock,
	// so that another process's cleanup (other packages' tests run at the same time) does not
	// take it half made.
	unlock, err := vm.LockCleanup()
	require.NoError(t, err)
	deadRun := exec.Command("true")
	require.NoError(t, deadRun.Run())
	deadPid := deadRun.Process.Pid
	stale := fmt.Sprintf("%s%d-1", vm.NamespacePrefix, deadPid)
	require.NoError(t, exec.Command("ip", "netns", "add", stale).Run())
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", stale).Run() })
	inside := exec.Command("ip", "netns", "exec", stale, "sleep", "300")
	require.NoError(t, inside.Start())
	orphan := exec.Command("sleep", "300")
	orphan.Env = append(os.Environ(), fmt.Sprintf("IRONFLEET_VM_OWNER=%d", deadPid))
	require.NoError(t, orphan.Start())
	t.Cleanup(func() { _ = inside.Process.Kill(); _ = orphan.Process.Kill() })
	require.Eventually(t, func() bool { return inNamespaceOtherThanOurs(inside.Process.Pid) }, 10*time.Second, 10*time.Millisecond,
		"ip netns exec entered the stale namespace")
	unlock()

	require.NoError(t, vm.CleanupStale())
	assert.False(t, namespaceExists(stale), "the dead run's namespace is gone")
	assert.True(t, namespaceExists(live.Name()), "a live run's namespace stays")
	for name, cmd := range map[string]*exec.Cmd{"process inside the namespace": inside, "orphaned QEMU": orphan} {
		err := cmd.Wait()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s: %v", name, err)
		assert.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), name)
	}
}

// inNamespaceOtherThanOurs says whether pid has entered another network namespace and run its
// command there (ip netns exec … sleep: setns, then exec).
func inNamespaceOtherThanOurs(pid int) bool {
	theirs, err1 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	ours, err2 := os.Readlink("/proc/self/ns/net")
	comm, err3 := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err1 == nil && err2 == nil && err3 == nil && theirs != ours && strings.TrimSpace(string(comm)) == "sleep"
}

// A function run in the namespace that ends its goroutine (a failed require does) still
// returns from Do, with an error, instead of hanging the test until its timeout.
func TestDoReturnsWhenTheFunctionEndsItsGoroutine(t *testing.T) {
	n := newNetwork(t)
	err := n.Do(func() error { runtime.Goexit(); return nil })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ended its goroutine")
	require.NoError(t, n.Do(func() error { return nil }), "the network is still usable")
}
