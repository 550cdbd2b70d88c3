package boot

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testTimeouts are the boot service's timeouts, short enough for a test.
var testTimeouts = httpTimeouts{readHeader: time.Second, idle: time.Second, body: time.Second, stall: time.Second}

// smallBuffers makes a socket's kernel buffers 32 KiB (the kernel doubles it), so that what a
// server writes reaches the client about as fast as the client reads it, not megabytes ahead.
func smallBuffers(opt int) func(string, string, syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 32<<10) }); cerr != nil {
			return cerr
		}
		return err
	}
}

// served is what the test handler saw of one request.
type served struct {
	written int64
	err     error
}

// serveBig starts the boot service's HTTP server on loopback, serving /big (size random bytes,
// through http.ServeContent as the artifacts and ISOs are) and POST /post (a body read whole).
// Each request's outcome arrives on the channel.
func serveBig(t *testing.T, size int) (addr string, content []byte, outcomes chan served) {
	t.Helper()
	content = make([]byte, size)
	_, _ = rand.Read(content)
	outcomes = make(chan served, 16)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /big", func(w http.ResponseWriter, r *http.Request) {
		cw := &countingWriter{ResponseWriter: w}
		http.ServeContent(cw, r, "big", time.Time{}, bytes.NewReader(content))
		var err error
		if cw.n < int64(size) {
			err = errors.New("cut off")
		}
		outcomes <- served{written: cw.n, err: err}
	})
	mux.HandleFunc("POST /post", func(w http.ResponseWriter, r *http.Request) {
		n, err := io.Copy(io.Discard, r.Body)
		outcomes <- served{written: n, err: err}
		w.WriteHeader(http.StatusNoContent)
	})
	lc := net.ListenConfig{Control: smallBuffers(syscall.SO_SNDBUF)}
	l, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := newHTTPServer(mux, testTimeouts)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String(), content, outcomes
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: smallBuffers(syscall.SO_RCVBUF)}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedByServer says whether the server closed c within 10 seconds: reading it reaches the end
// rather than the test's own deadline.
func closedByServer(t *testing.T, c net.Conn) bool {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestASlowDownloadIsNotCutOff: a client that reads a large artifact slowly but steadily gets all
// of it, though the transfer lasts several times the stall timeout (a fixed write timeout that
// long would have cut it).
func TestASlowDownloadIsNotCutOff(t *testing.T) {
	const size = 4 << 20
	addr, content, outcomes := serveBig(t, size)
	c := dial(t, addr)
	_, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: boot\r\n\r\n")
	require.NoError(t, err)
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	// 64 KiB every 50 ms: 1.3 MiB/s, the artifact in about 3 s.
	var got bytes.Buffer
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := io.CopyN(&got, resp.Body, 64<<10)
		if err == io.EOF || (err == nil && n == 0) {
			break
		}
		require.NoError(t, err)
		<-tick.C
	}
	elapsed := time.Since(start)
	assert.True(t, bytes.Equal(content, got.Bytes()), "the whole artifact arrived intact (%d of %d bytes)", got.Len(), size)
	assert.Greater(t, elapsed, 2*testTimeouts.stall, "the transfer outlasted the stall timeout")
	out := <-outcomes
	assert.NoError(t, out.err)
	assert.EqualValues(t, size, out.written)
}

// TestAClientThatStopsReadingIsCutOff: a client that asks for a large artifact and reads none
// of it is cut off once the server's writes stall, and its connection closed.
func TestAClientThatStopsReadingIsCutOff(t *testing.T) {
	const size = 16 << 20
	addr, _, outcomes := serveBig(t, size)
	c := dial(t, addr)
	_, err := io.WriteString(c, "GET /big HTTP/1.1\r\nHost: boot\r\n\r\n")
	require.NoError(t, err)
	var out served
	select {
	case out = <-outcomes:
	case <-time.After(10 * time.Second):
		t.Fatal("the server still writes to a client that reads nothing")
	}
	assert.Error(t, out.err)
	assert.Less(t, out.written, int64(size), "the server gave up part-way")
	assert.True(t, closedByServer(t, c), "and closed the connection")
}

// TestSlowAndIdleClientsAreCutOff: a header that never ends, a body that never ends, and a
// kept-alive connection that asks nothing more are each closed by the server.
func TestSlowAndIdleClientsAreCutOff(t *testing.T) {
	addr, _, outcomes := serveBig(t, 1<<10)

	header := dial(t, addr)
	_, err := io.WriteString(header, "GET /big HTTP/1.1\r\nHost: boot\r\n")
	require.NoError(t, err)
	assert.True(t, closedByServer(t, header), "a header that never ends")

	body := dial(t, addr)
	_, err = io.WriteString(body, "POST /post HTTP/1.1\r\nHost: boot\r\nContent-Length: 100\r\n\r\n0123456789")
	require.NoError(t, err)
	select {
	case out := <-outcomes:
		var ne net.Error
		assert.True(t, errors.As(out.err, &ne) && ne.Timeout(), "the body's read timed out: %v", out.err)
		assert.EqualValues(t, 10, out.written)
	case <-time.After(10 * time.Second):
		t.Fatal("the server still waits for a body that never ends")
	}
	assert.True(t, closedByServer(t, body), "a body that never ends")

	idle := dial(t, addr)
	_, err = io.WriteString(idle, "GET /big HTTP/1.1\r\nHost: boot\r\n\r\n")
	require.NoError(t, err)
	r := bufio.NewReader(idle)
	resp, err := http.ReadResponse(r, nil)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	<-outcomes
	assert.Equal(t, 0, r.Buffered())
	assert.True(t, closedByServer(t, idle), "a kept-alive connection that asks nothing more")
}
