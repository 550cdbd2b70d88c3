package vm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"syscall"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Do runs fn on an OS thread inside the network namespace and returns its error. The thread
// is locked for fn's duration and moved back afterwards (or discarded when it cannot be), so
// no other goroutine ever runs inside by accident.
//
// Sockets fn opens stay in the namespace for their whole life, wherever they are used
// later: a listener opened in Do accepts connections from the VMs while being served by
// ordinary goroutines. Goroutines fn starts, and processes it starts without care, do not
// inherit the namespace reliably; open sockets in fn, use them outside.
func (n *Network) Do(fn func() error) error {
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return fmt.Errorf("network %s is closed", n.name)
	}
	done := make(chan error, 1)
	go func() {
		// fn may end its goroutine instead of returning (runtime.Goexit: a test's failed
		// require inside fn): the deferred send still answers Do, and the thread, still
		// locked, ends with the goroutine rather than going back to the pool inside the
		// namespace.
		result := fmt.Errorf("the function run in network namespace %s ended its goroutine instead of returning", n.name)
		defer func() { done <- result }()
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			result = fmt.Errorf("read the current network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			runtime.UnlockOSThread()
			result = fmt.Errorf("enter network namespace %s: %w", n.name, err)
			return
		}
		fnErr := fn()
		if err := netns.Set(orig); err != nil {
			// Leave the thread locked: Go ends it with this goroutine instead of reusing a
			// thread that is still inside the namespace.
			result = errors.Join(fnErr, fmt.Errorf("leave network namespace %s: %w", n.name, err))
			return
		}
		runtime.UnlockOSThread()
		result = fnErr
	}()
	return <-done
}

// ListenTCP listens on addr ("10.213.1.1:80", ":8080") inside the namespace.
func (n *Network) ListenTCP(addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.Do(func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on tcp %s in %s: %w", addr, n.name, err)
	}
	return ln, nil
}

// ListenUDP listens on addr (":67", "10.213.1.1:69") inside the namespace.
func (n *Network) ListenUDP(addr string) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := n.Do(func() error {
		udpAddr, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			return err
		}
		conn, err = net.ListenUDP("udp4", udpAddr)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen on udp %s in %s: %w", addr, n.name, err)
	}
	return conn, nil
}

// ListenUDPOnBridge listens on addr (":67") inside the namespace with the socket bound to the
// bridge device. That is what a DHCP server needs: its answers go to 255.255.255.255, and a
// namespace without a default route has no route for the limited broadcast unless the
// socket names its device (sendto fails with "network is unreachable").
func (n *Network) ListenUDPOnBridge(addr string) (*net.UDPConn, error) {
	var conn *net.UDPConn
	err := n.Do(func() error {
		lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
			var sockErr error
			err := c.Control(func(fd uintptr) {
				sockErr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, BridgeName)
			})
			return errors.Join(err, sockErr)
		}}
		pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
		if err != nil {
			return err
		}
		conn = pc.(*net.UDPConn)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listen on udp %s on %s in %s: %w", addr, BridgeName, n.name, err)
	}
	return conn, nil
}
