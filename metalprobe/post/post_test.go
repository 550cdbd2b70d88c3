package post

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/report"
)

const secretToken = "s3cr3t-t0ken-value"

var fast = Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 5}

func testReport() *report.Report {
	return &report.Report{
		SystemUUID:   "4c4c4544-0042-3510-8052-b7c04f564433",
		CollectedAt:  time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		ProbeVersion: "v0.1.0",
	}
}

// registry is a scripted registry: the n-th request gets the n-th reply (the last one repeats).
type registry struct {
	t       *testing.T
	replies []func(w http.ResponseWriter)

	mu       sync.Mutex
	requests []*http.Request
	bodies   [][]byte
	received chan struct{}
}

func newRegistry(t *testing.T, replies ...func(w http.ResponseWriter)) (*registry, *httptest.Server) {
	reg := &registry{t: t, replies: replies, received: make(chan struct{}, 100)}
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	return reg, srv
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.requests)
	r.requests = append(r.requests, req)
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	r.received <- struct{}{}
	r.replies[min(n, len(r.replies)-1)](w)
}

func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.requests)
}

func status(code int, body string) func(w http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// dropConnection makes the client see a network failure rather than a response.
func dropConnection(http.ResponseWriter) { panic(http.ErrAbortHandler) }

func TestSendRetriesServerErrorsThenSucceeds(t *testing.T) {
	reg, srv := newRegistry(t,
		status(http.StatusServiceUnavailable, `{"error":"looking up server: cache not synced"}`),
		status(http.StatusTooManyRequests, ``),
		dropConnection,
		status(http.StatusNoContent, ``),
	)
	require.NoError(t, Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), fast))
	require.Equal(t, 4, reg.count())

	for i, req := range reg.requests {
		assert.Equal(t, http.MethodPost, req.Method)
		assert.Equal(t, "/v1/reports", req.URL.Path)
		assert.Equal(t, "Bearer "+secretToken, req.Header.Get("Authorization"))
		assert.Equal(t, "application/json", req.Header.Get("Content-Type"))
		assert.Equal(t, "metalprobe/v0.1.0", req.Header.Get("User-Agent"))
		var got report.Report
		dec := json.NewDecoder(bytes.NewReader(reg.bodies[i]))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&got), "request %d", i)
		assert.Equal(t, testReport().SystemUUID, got.SystemUUID)
	}
}

func TestSendStopsAtOnceOnClientErrors(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			reg, srv := newRegistry(t, status(code, `{"error":"the token does not belong to server 4c4c4544"}`))
			err := Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), fast)
			require.Error(t, err)
			assert.Equal(t, 1, reg.count())
			var se *StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, code, se.Code)
			assert.Contains(t, err.Error(), "the token does not belong to server 4c4c4544")
			assert.NotContains(t, err.Error(), secretToken)
		})
	}
}

func TestSendQuotesPlainTextRefusals(t *testing.T) {
	_, srv := newRegistry(t, func(w http.ResponseWriter) {
		http.Error(w, "no such route\n", http.StatusMethodNotAllowed)
	})
	err := Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), fast)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "405")
	assert.Contains(t, err.Error(), "no such route")
}

func TestSendNeverRepeatsTheToken(t *testing.T) {
	_, srv := newRegistry(t, status(http.StatusForbidden, `{"error":"token `+secretToken+` is revoked"}`))
	err := Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), fast)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), secretToken)
	assert.Contains(t, err.Error(), "[redacted] is revoked")
}

func TestSendGivesUpAfterAttempts(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusInternalServerError, `{"error":"boom"}`))
	b := fast
	b.Attempts = 3
	err := Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), b)
	require.Error(t, err)
	assert.Equal(t, 3, reg.count())
	assert.Contains(t, err.Error(), "giving up after 3 attempts")
	assert.Contains(t, err.Error(), "500")
	assert.Contains(t, err.Error(), "boom")

	reg, srv = newRegistry(t, status(http.StatusInternalServerError, ``))
	b.Attempts = 0 // means one
	require.Error(t, Send(context.Background(), srv.Client(), srv.URL, secretToken, testReport(), b))
	assert.Equal(t, 1, reg.count())
}

func TestSendStopsWhenTheContextEndsDuringABackoff(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusServiceUnavailable, ``))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- Send(ctx, srv.Client(), srv.URL, secretToken, testReport(), Backoff{Initial: time.Hour, Max: time.Hour, Attempts: 5})
	}()
	<-reg.received // the first attempt reached the registry; Send will then wait an hour
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Send did not return after its context was cancelled")
	}
	assert.Equal(t, 1, reg.count())
}

func TestSendWithAnEndedContextMakesNoRequest(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusNoContent, ``))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := Send(ctx, srv.Client(), srv.URL, secretToken, testReport(), fast)
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 0, reg.count())
}

func TestSendCapsRetryAfterAtMax(t *testing.T) {
	reg, srv := newRegistry(t,
		func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		},
		status(http.StatusNoContent, ``),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, Send(ctx, srv.Client(), srv.URL, secretToken, testReport(), fast))
	assert.Equal(t, 2, reg.count())
}

func TestSendJoinsTheRegistryBasePath(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusNoContent, ``))
	require.NoError(t, Send(context.Background(), srv.Client(), srv.URL+"/ironfleet/", secretToken, testReport(), fast))
	assert.Equal(t, "/ironfleet/v1/reports", reg.requests[0].URL.Path)
}

func TestSendRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	for name, err := range map[string]error{
		"no scheme":  Send(ctx, nil, "registry.local:8443", secretToken, testReport(), fast),
		"ftp":        Send(ctx, nil, "ftp://registry.local", secretToken, testReport(), fast),
		"no token":   Send(ctx, nil, "https://registry.local", "", testReport(), fast),
		"no report":  Send(ctx, nil, "https://registry.local", secretToken, nil, fast),
		"empty host": Send(ctx, nil, "https://", secretToken, testReport(), fast),
	} {
		assert.Error(t, err, name)
	}
}

func TestBackoffDelayDoublesWithJitterUpToMax(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Attempts: 10}
	for attempt, nominal := range map[int]time.Duration{
		1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond,
		4: 800 * time.Millisecond, 5: time.Second, 9: time.Second,
	} {
		for range 50 {
			d := b.delay(attempt)
			assert.GreaterOrEqual(t, d, nominal/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, nominal, "attempt %d", attempt)
		}
	}
	assert.Zero(t, Backoff{}.delay(3))
}

func TestStatusErrorRetryable(t *testing.T) {
	assert.True(t, (&StatusError{Code: 500}).Retryable())
	assert.True(t, (&StatusError{Code: 503}).Retryable())
	assert.True(t, (&StatusError{Code: 429}).Retryable())
	assert.False(t, (&StatusError{Code: 400}).Retryable())
	assert.False(t, (&StatusError{Code: 404}).Retryable())
	assert.True(t, retryable(errors.New("connection refused")))
}

func TestBootStatePostsOneState(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusNoContent, ``))
	err := BootState(context.Background(), srv.Client(), srv.URL+"/base/", secretToken, testReport().SystemUUID, "Installing", "31 MiB of 64 MiB written")
	require.NoError(t, err)
	require.Equal(t, 1, reg.count())
	req := reg.requests[0]
	assert.Equal(t, http.MethodPost, req.Method)
	assert.Equal(t, "/base/v1/bootstate", req.URL.Path)
	assert.Equal(t, "Bearer "+secretToken, req.Header.Get("Authorization"))
	assert.Equal(t, "application/json", req.Header.Get("Content-Type"))
	var got struct {
		SystemUUID, State, Message string
	}
	dec := json.NewDecoder(bytes.NewReader(reg.bodies[0]))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&got))
	assert.Equal(t, testReport().SystemUUID, got.SystemUUID)
	assert.Equal(t, "Installing", got.State)
	assert.Equal(t, "31 MiB of 64 MiB written", got.Message)
}

func TestBootStateDoesNotRetryAndHidesTheToken(t *testing.T) {
	reg, srv := newRegistry(t, status(http.StatusServiceUnavailable, `{"error":"token `+secretToken+` unknown"}`))
	err := BootState(context.Background(), srv.Client(), srv.URL, secretToken, testReport().SystemUUID, "Installing", "")
	require.Error(t, err)
	assert.Equal(t, 1, reg.count(), "progress is not retried")
	var se *StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusServiceUnavailable, se.Code)
	assert.NotContains(t, err.Error(), secretToken)

	require.Error(t, BootState(context.Background(), srv.Client(), "registry:8443", secretToken, "u", "Installing", ""))
	require.Error(t, BootState(context.Background(), srv.Client(), srv.URL, "", "u", "Installing", ""))
	assert.Equal(t, 1, reg.count(), "bad arguments send nothing")
}
