package ipmisim

import (
	"errors"
	"net"
	"slices"
	"sync"
)

// Proxy is a UDP fault proxy between IPMI clients and one BMC: it listens on
// 127.0.0.1:0, forwards each client's datagrams to the upstream over a socket of its own per
// client, and drops what it is told to. No root, no tc.
type Proxy struct {
	conn     *net.UDPConn
	upstream *net.UDPAddr

	mu        sync.Mutex
	dropReq   int
	dropResp  int
	blackhole bool
	requests  [][]byte
	clients   map[string]*net.UDPConn // client address → upstream socket
	closed    bool
	wg        sync.WaitGroup
}

// NewProxy starts a proxy to upstream (host:port).
func NewProxy(upstream string) (*Proxy, error) {
	up, err := net.ResolveUDPAddr("udp", upstream)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	p := &Proxy{conn: conn, upstream: up, clients: map[string]*net.UDPConn{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is where clients send to: "127.0.0.1:<port>".
func (p *Proxy) Addr() string { return p.conn.LocalAddr().String() }

// DropRequests drops the next n client→BMC datagrams.
func (p *Proxy) DropRequests(n int) { p.mu.Lock(); p.dropReq = n; p.mu.Unlock() }

// DropResponses drops the next n BMC→client datagrams.
func (p *Proxy) DropResponses(n int) { p.mu.Lock(); p.dropResp = n; p.mu.Unlock() }

// Blackhole drops everything, both ways, while on.
func (p *Proxy) Blackhole(on bool) { p.mu.Lock(); p.blackhole = on; p.mu.Unlock() }

// Requests are copies of the client→BMC datagrams seen, dropped ones included, oldest first.
func (p *Proxy) Requests() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([][]byte, len(p.requests))
	for i, r := range p.requests {
		out[i] = slices.Clone(r)
	}
	return out
}

// pass decides whether a datagram goes through, counting drops down.
func (p *Proxy) pass(request bool, data []byte) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if request {
		p.requests = append(p.requests, slices.Clone(data))
	}
	switch {
	case p.blackhole:
		return false
	case request && p.dropReq > 0:
		p.dropReq--
		return false
	case !request && p.dropResp > 0:
		p.dropResp--
		return false
	}
	return true
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, client, err := p.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if !p.pass(true, buf[:n]) {
			continue
		}
		up, err := p.upstreamFor(client)
		if err != nil {
			continue
		}
		_, _ = up.Write(buf[:n])
	}
}

// upstreamFor returns the client's upstream socket, making it and its reader the first time.
func (p *Proxy) upstreamFor(client *net.UDPAddr) (*net.UDPConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, net.ErrClosed
	}
	if up, ok := p.clients[client.String()]; ok {
		return up, nil
	}
	up, err := net.DialUDP("udp", nil, p.upstream)
	if err != nil {
		return nil, err
	}
	p.clients[client.String()] = up
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP unreachable while the BMC restarts
			}
			if p.pass(false, buf[:n]) {
				_, _ = p.conn.WriteToUDP(buf[:n], client)
			}
		}
	}()
	return up, nil
}

// Close stops the proxy. It is idempotent.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	for _, up := range p.clients {
		_ = up.Close()
	}
	p.mu.Unlock()
	err := p.conn.Close()
	p.wg.Wait()
	return err
}
