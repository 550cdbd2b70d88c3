package boot

import (
	"context"
	"net/http"
	"time"
)

// httpTimeouts bound what a client of the boot service's HTTP server may hold (docs/boot.md).
// A response has no deadline as a whole: firmware and BMCs fetch artifacts and ISOs of hundreds
// of MiB over slow links, and any fixed write timeout would cut some legitimate transfer. Instead
// a response must make progress: each write has stall to go through, so a client that stops
// reading is cut off, and one that reads slowly is not.
type httpTimeouts struct {
	// readHeader bounds the reading of a request's header (slowloris).
	readHeader time.Duration
	// idle bounds how long a kept-alive connection waits for its next request.
	idle time.Duration
	// body bounds the reading of a request's body, for the requests that have one.
	body time.Duration
	// stall bounds how long one write of a response may wait for the client to read.
	stall time.Duration
}

var defaultHTTPTimeouts = httpTimeouts{readHeader: 10 * time.Second, idle: 2 * time.Minute, body: 30 * time.Second, stall: time.Minute}

// maxWriteChunk is the most one deadline covers: a larger write is made in pieces of it, each
// with its own.
const maxWriteChunk = 64 << 10

// newHTTPServer is the boot service's HTTP server for handler, with t's timeouts.
func newHTTPServer(handler http.Handler, t httpTimeouts) *http.Server {
	return &http.Server{
		Handler:           withDeadlines(handler, t),
		ReadHeaderTimeout: t.readHeader,
		IdleTimeout:       t.idle,
		MaxHeaderBytes:    64 << 10,
		// No ReadTimeout or WriteTimeout: they bound a whole request and response (and a
		// read deadline that passes while a response is written cancels its context).
	}
}

// withDeadlines sets a request's read deadline when it has a body, and a write deadline that
// each write of the response pushes back by t.stall.
func withDeadlines(next http.Handler, t httpTimeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(t.body))
		}
		sw := &stallWriter{ResponseWriter: w, rc: rc, stall: t.stall}
		sw.extend()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), extendKey{}, sw.extend)))
	})
}

// extendKey is the context key of a response's stallWriter.extend.
type extendKey struct{}

// extendWriteDeadline pushes back the write deadline of the response whose request's context
// is ctx, for a handler that waited (a firmware image's download) before it answers: an answer
// without a body (HEAD, 304) has no write to push it back, and would find the deadline passed.
func extendWriteDeadline(ctx context.Context) {
	if extend, ok := ctx.Value(extendKey{}).(func()); ok {
		extend()
	}
}

// stallWriter is a response whose write deadline each write pushes back.
type stallWriter struct {
	http.ResponseWriter
	rc    *http.ResponseController
	stall time.Duration
}

func (s *stallWriter) extend() { _ = s.rc.SetWriteDeadline(time.Now().Add(s.stall)) }

func (s *stallWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), maxWriteChunk)]
		s.extend()
		n, err := s.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}

// Unwrap lets http.ResponseController reach the server's own response.
func (s *stallWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
