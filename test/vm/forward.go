package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Forwarder relays TCP connections made inside a Network to a target in the host's
// namespace, so a VM can reach a server listening on the host's loopback (a registry, an API
// server) without any route out of the namespace.
type Forwarder struct {
	ln     net.Listener
	target string
	net    *Network

	mu     sync.Mutex
	conns  map[net.Conn]bool
	closed bool
	wg     sync.WaitGroup
}

// forwardDialTimeout bounds the dial to the target; the target is local, so this is generous.
const forwardDialTimeout = 10 * time.Second

// Forward listens on listenAddr inside the namespace ("10.213.1.1:8443") and relays each
// connection to target ("127.0.0.1:34567") in the host's namespace. The listener is opened
// inside (Do); the dials happen on ordinary goroutines, which are in the host's namespace.
func (n *Network) Forward(listenAddr, target string) (*Forwarder, error) {
	ln, err := n.ListenTCP(listenAddr)
	if err != nil {
		return nil, fmt.Errorf("forward %s to %s: %w", listenAddr, target, err)
	}
	f := &Forwarder{ln: ln, target: target, net: n, conns: map[net.Conn]bool{}}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = ln.Close()
		return nil, fmt.Errorf("forward %s to %s: network %s is closed", listenAddr, target, n.name)
	}
	n.forwards[f] = true
	n.mu.Unlock()
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// Addr is where the forwarder listens inside the namespace.
func (f *Forwarder) Addr() net.Addr { return f.ln.Addr() }

func (f *Forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.ln.Accept()
		if err != nil {
			return // closed
		}
		if !f.track(in) {
			_ = in.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(in)
			f.relay(in)
		}()
	}
}

// relay copies both ways, passing each side's end of stream on as a half-close, so
// request/response protocols that close their write side first still work.
func (f *Forwarder) relay(in net.Conn) {
	d := net.Dialer{Timeout: forwardDialTimeout}
	out, err := d.DialContext(context.Background(), "tcp", f.target)
	if err != nil {
		return // the VM sees its connection closed, as with a refused one
	}
	if !f.track(out) {
		_ = out.Close()
		return
	}
	defer f.untrack(out)
	var copies sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		defer copies.Done()
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	copies.Add(2)
	go pipe(out, in)
	go pipe(in, out)
	copies.Wait()
}

func (f *Forwarder) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = true
	return true
}

func (f *Forwarder) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// Close stops listening, cuts open connections and waits for the relays to end.
func (f *Forwarder) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	conns := f.conns
	f.conns = map[net.Conn]bool{}
	f.mu.Unlock()
	err := f.ln.Close()
	for c := range conns {
		_ = c.Close()
	}
	f.wg.Wait()
	f.net.mu.Lock()
	delete(f.net.forwards, f)
	f.net.mu.Unlock()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}
