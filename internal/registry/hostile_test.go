package registry_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/registry"
)

// maxHeap is what a hostile client may make the manager's heap grow to.
const maxHeap = 64 << 20

// hostileBody is the report that costs the most to decode per byte: 1 MiB of empty disks, each
// a struct of a dozen fields (it took 272 MiB to decode when the body was read before the token).
func hostileBody() []byte {
	const head, tail = `{"inventory":{"storage":[`, `]}}`
	n := (registry.MaxBodyBytes - len(head) - len(tail)) / 3
	return []byte(head + strings.TrimSuffix(strings.Repeat("{},", n), ",") + tail)
}

// madeUpToken looks like a token of serverB's current boot, with a MAC nobody minted.
var madeUpToken = base64.RawURLEncoding.EncodeToString([]byte(serverB)) + "." + boot + "." + strings.Repeat("A", 43)

// peakHeap runs f and says the most heap in use while it ran, sampled every millisecond.
func peakHeap(t *testing.T, f func()) uint64 {
	t.Helper()
	runtime.GC()
	var peak atomic.Uint64
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	f()
	close(stop)
	<-stopped
	return peak.Load()
}

// postForged posts body with the made-up token on a connection of its own, and says what the
// registry answered.
func postForged(body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/reports", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+madeUpToken)
	req.Close = true
	resp, err := https.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// TestAnUnauthenticatedBodyIsNeverDecoded: a made-up token with the costliest 1 MiB body, once
// and 16 times at once, is refused without the body being decoded: the heap stays small.
func TestAnUnauthenticatedBodyIsNeverDecoded(t *testing.T) {
	body := hostileBody()
	require.LessOrEqual(t, len(body), registry.MaxBodyBytes)
	require.Greater(t, len(body), registry.MaxBodyBytes-4)
	peak := peakHeap(t, func() {
		status, err := postForged(body)
		refused(t, status, err, http.StatusForbidden)
	})
	t.Logf("one request: peak heap %d MiB", peak>>20)
	assert.Less(t, peak, uint64(maxHeap), "one request with a made-up token")

	const n = 16
	var statuses [n]int
	var errs [n]error
	peak = peakHeap(t, func() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { statuses[i], errs[i] = postForged(body) })
		}
		wg.Wait()
	})
	t.Logf("%d requests at once: peak heap %d MiB", n, peak>>20)
	assert.Less(t, peak, uint64(maxHeap), "%d requests at once with a made-up token", n)
	for i := range n {
		refused(t, statuses[i], errs[i], http.StatusForbidden, http.StatusServiceUnavailable)
	}
}

// refused checks that a request was refused: answered with one of statuses, or its connection
// closed by the registry before the client had sent the whole body (the registry closes it
// unread, and the client's write fails).
func refused(t *testing.T, status int, err error, statuses ...int) {
	t.Helper()
	if err != nil {
		assert.True(t, errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE), "the registry closed the connection: %v", err)
		return
	}
	assert.Contains(t, statuses, status)
}

// endless is a request body that sends "{" and then nothing more until it is closed.
type endless struct {
	started atomic.Bool
	closed  chan struct{}
	once    sync.Once
}

func newEndless() *endless { return &endless{closed: make(chan struct{})} }

func (e *endless) Read(p []byte) (int, error) {
	if len(p) > 0 && !e.started.Swap(true) {
		p[0] = '{'
		return 1, nil
	}
	<-e.closed
	return 0, io.ErrUnexpectedEOF
}

func (e *endless) Close() error {
	e.once.Do(func() { close(e.closed) })
	return nil
}

// bodies are endless request bodies, all closed at once.
type bodies struct {
	mu     sync.Mutex
	all    []*endless
	closed bool
}

func (b *bodies) new() *endless {
	e := newEndless()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = e.Close()
	}
	b.all = append(b.all, e)
	return e
}

func (b *bodies) closeAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for _, e := range b.all {
		_ = e.Close()
	}
}

// TestRequestsBeyondTheBoundAreRefusedAtOnce: while MaxConcurrentRequests requests with a good
// token are in flight (their bodies still coming), the next request is answered 503 with
// Retry-After at once, though its own body never ends; once they are done, requests are
// taken again.
func TestRequestsBeyondTheBoundAreRefusedAtOnce(t *testing.T) {
	const uuid = "7e3d1b58-2c4a-4f09-b6e1-9a8c5d2f0b74"
	newServer(t, uuid, uuid)
	var held bodies
	var wg sync.WaitGroup
	release := func() {
		held.closeAll()
		wg.Wait()
	}
	defer release()
	// Each holder sends again when it is refused 503 (another's request took the slot a
	// moment), until its request is in the registry, reading a body that does not end.
	for range registry.MaxConcurrentRequests {
		wg.Go(func() {
			for {
				req, err := http.NewRequest(http.MethodPost, url+"/v1/bootstate", held.new())
				if err != nil {
					return
				}
				req.Header.Set("Authorization", "Bearer "+signer.Token(uuid, boot))
				resp, err := https.Do(req)
				if err != nil {
					return
				}
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable {
					return
				}
			}
		})
	}

	// A request with a made-up token is refused 403 while a slot is free, and 503 once none is.
	var extras bodies
	defer extras.closeAll()
	var resp *http.Response
	require.Eventually(t, func() bool {
		req, err := http.NewRequest(http.MethodPost, url+"/v1/bootstate", extras.new())
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+madeUpToken)
		r, err := https.Do(req)
		if err != nil {
			return false
		}
		defer r.Body.Close()
		_, _ = io.Copy(io.Discard, r.Body)
		if r.StatusCode != http.StatusServiceUnavailable {
			return false
		}
		resp = r
		return true
	}, 10*time.Second, 10*time.Millisecond, "a request beyond %d in flight is refused though its body never ends", registry.MaxConcurrentRequests)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))

	// The holders' requests end; the registry frees their slots as its handlers see that.
	release()
	require.Eventually(t, func() bool {
		status, _ := post(t, "/v1/bootstate", signer.Token(uuid, boot), []byte(`{"systemUUID":"`+uuid+`","state":"Booted"}`))
		return status == http.StatusNoContent
	}, 10*time.Second, 10*time.Millisecond, "requests are taken again")
}

// TestListsAreBounded: a report with more disks than the bound, or a list nested in one it has
// no bound of its own for, is refused with 400 naming the list, however its keys are spelt.
func TestListsAreBounded(t *testing.T) {
	disks := func(key string, n int) []byte {
		return []byte(`{"systemUUID":"` + uuidB + `","inventory":{"` + key + `":[` + strings.TrimSuffix(strings.Repeat(`{"name":"sda"},`, n), ",") + `]}}`)
	}
	status, msg := post(t, "/v1/reports", signer.Token(serverB, boot), disks("storage", 257))
	assert.Equal(t, http.StatusBadRequest, status, msg)
	assert.Contains(t, msg, "inventory.storage lists more than 256 items")
	// encoding/json takes "Storage" for "storage": so does the bound.
	status, msg = post(t, "/v1/reports", signer.Token(serverB, boot), disks("Storage", 257))
	assert.Equal(t, http.StatusBadRequest, status, msg)
	assert.Contains(t, msg, "inventory.Storage lists more than 256 items")
	status, msg = post(t, "/v1/reports", signer.Token(serverB, boot), []byte(`{"x":`+strings.Repeat("[", 20)+strings.Repeat("]", 20)+`}`))
	assert.Equal(t, http.StatusBadRequest, status, msg)
	assert.Contains(t, msg, "nests deeper than 16")
}

// TestTheRegistrySpeaksHTTP1Only: a client that would take HTTP/2 gets HTTP/1.1, which leaves
// an unread body in the kernel's buffers rather than the manager's heap.
func TestTheRegistrySpeaksHTTP1Only(t *testing.T) {
	pool := https.Transport.(*http.Transport).TLSClientConfig.RootCAs
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: pool.Clone(), MinVersion: tls.VersionTLS12}
	require.True(t, transport.ForceAttemptHTTP2)
	c := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	defer transport.CloseIdleConnections()
	resp, err := c.Get(url + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, 1, resp.ProtoMajor)
}
