package bmcsim

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// BMC is one simulated baseboard management controller serving Redfish on loopback. All
// methods are safe for concurrent use. A BMC costs one listener, one accept goroutine and a
// few kilobytes; resources are rendered per request, not stored.
type BMC struct {
	model  *model      // nil when serving a static mockup
	static *staticTree // non-nil when serving a static mockup
	auth   *auth
	faults atomic.Pointer[faultState]
	stats  counters
	media  *mediaStore // fetched VirtualMedia images; nil for a static mockup

	handler   http.Handler
	closing   chan struct{} // closed by Close; ends injected hangs and latency waits
	closeOnce sync.Once

	srv       *http.Server // nil in a LoopbackFleet, which serves for its BMCs
	serveDone chan struct{}
	url, host string
	caPEM     []byte

	certOnce sync.Once // a LoopbackFleet BMC's certificate, issued on first use
	cert     *tls.Certificate
	certErr  error
}

type counters struct {
	requests, sessionsCreated, sessionsDeleted, authFailures, resets, bootPatches atomic.Int64
	mediaInserts, mediaEjects                                                     atomic.Int64
	updates, biosPatches, managerPatches                                          atomic.Int64
}

// maxBody bounds request bodies; Redfish requests are small JSON documents.
const maxBody = 1 << 20

// Start builds a BMC from opts and serves it on opts.Addr (default 127.0.0.1:0).
func Start(opts Options) (*BMC, error) {
	m, err := newModel(opts)
	if err != nil {
		return nil, err
	}
	b := newBMC(m, nil, newAuth(opts.Username, opts.Password))
	b.media = newMediaStore(opts)
	if err := b.listen(opts.Addr, opts.TLS); err != nil {
		return nil, err
	}
	return b, nil
}

// StartFleet starts n BMCs, template(i) giving the options of the i-th. On error the BMCs
// already started are closed.
func StartFleet(n int, template func(i int) Options) ([]*BMC, error) {
	fleet := make([]*BMC, 0, n)
	for i := range n {
		b, err := Start(template(i))
		if err != nil {
			for _, started := range fleet {
				_ = started.Close()
			}
			return nil, fmt.Errorf("start BMC %d of %d: %w", i, n, err)
		}
		fleet = append(fleet, b)
	}
	return fleet, nil
}

func newBMC(m *model, st *staticTree, a *auth) *BMC {
	b := &BMC{model: m, static: st, auth: a, closing: make(chan struct{})}
	b.handler = http.HandlerFunc(b.serveHTTP)
	return b
}

// serveHTTP is the outermost layer: count, bound the body, inject faults, then answer.
func (b *BMC) serveHTTP(w http.ResponseWriter, r *http.Request) {
	b.stats.requests.Add(1)
	limit := int64(maxBody)
	if b.model != nil && r.Method == http.MethodPost && b.model.isPushPath(r.URL.Path) {
		limit = maxPushBytes // a firmware image (update.go)
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if b.injectFault(w, r) {
		return
	}
	if b.static != nil {
		b.serveStatic(w, r)
		return
	}
	b.serveRedfish(w, r)
}

// listen binds addr and serves in the background. HTTP/2 is not offered: BMCs speak
// HTTP/1.1, and a dropped connection must look like one to the client.
func (b *BMC) listen(addr string, useTLS bool) error {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	tcp := ln.Addr().(*net.TCPAddr)
	hostIP := tcp.IP
	if hostIP.IsUnspecified() {
		hostIP = net.IPv4(127, 0, 0, 1)
	}
	b.host = net.JoinHostPort(hostIP.String(), fmt.Sprint(tcp.Port))
	b.url = "http://" + b.host
	if useTLS {
		cert, caPEM, err := selfSignedCert(tcp.IP)
		if err != nil {
			_ = ln.Close()
			return err
		}
		ln = tls.NewListener(ln, &tls.Config{
			Certificates: []tls.Certificate{cert},
			MinVersion:   tls.VersionTLS12,
			NextProtos:   []string{"http/1.1"},
		})
		b.caPEM, b.url = caPEM, "https://"+b.host
	}
	b.srv = newHTTPServer(b.handler)
	b.serveDone = make(chan struct{})
	go func() {
		defer close(b.serveDone)
		_ = b.srv.Serve(ln)
	}()
	return nil
}

// newHTTPServer is how every simulated BMC serves: BMC-like timeouts and quiet logs.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      maxHang + 30*time.Second, // longer than any injected hang
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    64 << 10,
		// Handshake failures from clients that do not trust the self-signed certificate are
		// expected; logging each would drown test output.
		ErrorLog: log.New(io.Discard, "", 0),
	}
}

// URL is the base URL clients connect to, "https://127.0.0.1:PORT" or "http://...".
func (b *BMC) URL() string { return b.url }

// Host is "IP:PORT", the form BMC addresses usually take.
func (b *BMC) Host() string { return b.host }

// CACertPEM is the certificate to trust for this BMC; nil for plain HTTP.
func (b *BMC) CACertPEM() []byte { return b.caPEM }

// Handler is the Redfish handler with auth, faults and stats, for embedding in another server.
func (b *BMC) Handler() http.Handler { return b.handler }

// Close stops serving, cutting open connections and ending injected hangs. It is idempotent.
func (b *BMC) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closing)
		if b.srv != nil {
			err = b.srv.Close()
			<-b.serveDone
		}
		if b.media != nil {
			b.media.close(b.model.mediaFiles())
		}
	})
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// closed reports whether Close was called.
func (b *BMC) closed() bool {
	select {
	case <-b.closing:
		return true
	default:
		return false
	}
}

// Stats returns the counters and the number of live sessions.
func (b *BMC) Stats() Stats {
	return Stats{
		Requests:        b.stats.requests.Load(),
		SessionsCreated: b.stats.sessionsCreated.Load(),
		SessionsDeleted: b.stats.sessionsDeleted.Load(),
		ActiveSessions:  int64(b.auth.count(time.Now())),
		AuthFailures:    b.stats.authFailures.Load(),
		Resets:          b.stats.resets.Load(),
		BootPatches:     b.stats.bootPatches.Load(),
		MediaInserts:    b.stats.mediaInserts.Load(),
		MediaEjects:     b.stats.mediaEjects.Load(),
		Updates:         b.stats.updates.Load(),
		BIOSPatches:     b.stats.biosPatches.Load(),
		ManagerPatches:  b.stats.managerPatches.Load(),
	}
}

// ResetStats zeroes the counters; ActiveSessions is state, not a counter, and stays.
func (b *BMC) ResetStats() {
	for _, c := range []*atomic.Int64{&b.stats.requests, &b.stats.sessionsCreated, &b.stats.sessionsDeleted,
		&b.stats.authFailures, &b.stats.resets, &b.stats.bootPatches, &b.stats.mediaInserts, &b.stats.mediaEjects,
		&b.stats.updates, &b.stats.biosPatches, &b.stats.managerPatches} {
		c.Store(0)
	}
}
