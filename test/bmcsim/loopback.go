package bmcsim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/ironfleet/ironfleet/internal/certs"
)

// LoopbackFleet serves many BMCs on one socket: BMC i answers at its own loopback address
// (127.1.0.1, 127.1.0.2, …) on the fleet's one port, as a rack of BMCs shares a management
// network and a port. A fleet of ten thousand BMCs then costs one listener instead of ten
// thousand file descriptors. With TLS, each BMC presents its own certificate for its address,
// issued by the fleet's CA (CACertPEM), so a client trusts the fleet with one certificate.
type LoopbackFleet struct {
	BMCs []*BMC

	byAddr    map[netip.Addr]*BMC
	ca        *certs.CA
	ln        net.Listener
	srv       *http.Server
	serveDone chan struct{}
	port      int
}

// FleetAddr is the loopback address of the fleet's i-th BMC.
func FleetAddr(i int) netip.Addr {
	n := uint32(i) + 1
	return netip.AddrFrom4([4]byte{127, 1 + byte(n>>16), byte(n >> 8), byte(n)})
}

// MaxLoopbackFleet is the largest fleet FleetAddr can place inside 127.0.0.0/8.
const MaxLoopbackFleet = 254<<16 - 1

// StartLoopbackFleet starts n BMCs, template(i) giving the options of the i-th (Addr and TLS
// are the fleet's: useTLS for all). The fleet listens on every IPv4 address of the host but
// answers only connections made to one of its BMCs' loopback addresses.
func StartLoopbackFleet(n int, useTLS bool, template func(i int) Options) (*LoopbackFleet, error) {
	if n < 1 || n > MaxLoopbackFleet {
		return nil, fmt.Errorf("a loopback fleet has 1 to %d BMCs, not %d", MaxLoopbackFleet, n)
	}
	f := &LoopbackFleet{byAddr: make(map[netip.Addr]*BMC, n)}
	ln, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		return nil, err
	}
	f.port = ln.Addr().(*net.TCPAddr).Port
	if useTLS {
		if f.ca, err = certs.NewCA("bmcsim fleet CA", 365*24*time.Hour); err != nil {
			_ = ln.Close()
			return nil, err
		}
	}
	for i := range n {
		opts := template(i)
		m, err := newModel(opts)
		if err != nil {
			_ = ln.Close()
			return nil, fmt.Errorf("BMC %d of %d: %w", i, n, err)
		}
		b := newBMC(m, nil, newAuth(opts.Username, opts.Password))
		b.media = newMediaStore(opts)
		addr := FleetAddr(i)
		b.host = netip.AddrPortFrom(addr, uint16(f.port)).String()
		b.url = "http://" + b.host
		if useTLS {
			b.url, b.caPEM = "https://"+b.host, f.ca.CertPEM()
		}
		f.BMCs = append(f.BMCs, b)
		f.byAddr[addr] = b
	}
	f.ln = &fleetListener{Listener: ln, fleet: f}
	if useTLS {
		f.ln = tls.NewListener(f.ln, &tls.Config{
			GetCertificate: f.certificate,
			MinVersion:     tls.VersionTLS12,
			NextProtos:     []string{"http/1.1"},
		})
	}
	f.srv = newHTTPServer(http.HandlerFunc(f.serveHTTP))
	f.serveDone = make(chan struct{})
	go func() {
		defer close(f.serveDone)
		_ = f.srv.Serve(f.ln)
	}()
	return f, nil
}

// Port is the fleet's one TCP port.
func (f *LoopbackFleet) Port() int { return f.port }

// CACertPEM is the CA to trust for every BMC of the fleet; nil for plain HTTP.
func (f *LoopbackFleet) CACertPEM() []byte {
	if f.ca == nil {
		return nil
	}
	return f.ca.CertPEM()
}

// bmcAt is the BMC a connection was made to, or nil.
func (f *LoopbackFleet) bmcAt(local net.Addr) *BMC {
	tcp, ok := local.(*net.TCPAddr)
	if !ok {
		return nil
	}
	addr, ok := netip.AddrFromSlice(tcp.IP)
	if !ok {
		return nil
	}
	return f.byAddr[addr.Unmap()]
}

// certificate issues each BMC its certificate on its first handshake.
func (f *LoopbackFleet) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	b := f.bmcAt(hello.Conn.LocalAddr())
	if b == nil {
		return nil, errors.New("no BMC at this address")
	}
	return b.fleetCert(f.ca)
}

func (f *LoopbackFleet) serveHTTP(w http.ResponseWriter, r *http.Request) {
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	b := f.bmcAt(local)
	if b == nil || b.closed() {
		panic(http.ErrAbortHandler) // a BMC that is off the network does not answer
	}
	b.handler.ServeHTTP(w, r)
}

// Close stops the fleet, cutting open connections and ending injected hangs.
func (f *LoopbackFleet) Close() error {
	for _, b := range f.BMCs {
		_ = b.Close()
	}
	err := f.srv.Close()
	<-f.serveDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// fleetListener drops connections that are not to one of the fleet's BMCs: the fleet binds
// every address, but only its loopback addresses answer.
type fleetListener struct {
	net.Listener
	fleet *LoopbackFleet
}

func (l *fleetListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.fleet.bmcAt(c.LocalAddr()) != nil {
			return c, nil
		}
		_ = c.Close()
	}
}

// fleetCert is the BMC's certificate for its fleet address, issued once.
func (b *BMC) fleetCert(ca *certs.CA) (*tls.Certificate, error) {
	b.certOnce.Do(func() {
		host, _, _ := net.SplitHostPort(b.host)
		certPEM, keyPEM, err := ca.Issue("bmcsim", []string{host}, 365*24*time.Hour)
		if err != nil {
			b.certErr = err
			return
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		b.cert, b.certErr = &cert, err
	})
	return b.cert, b.certErr
}
