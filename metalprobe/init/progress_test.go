package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// bootService records the progress posted to /boot/<token>/progress; it fails the first
// failFirst requests.
type bootService struct {
	mu        sync.Mutex
	got       []ignition.Progress
	failFirst int
}

func (b *bootService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/boot/tok3n/progress" || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "wrong request", http.StatusBadRequest)
		return
	}
	if b.failFirst > 0 {
		b.failFirst--
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var p ignition.Progress
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, ignition.MaxProgressBytes)).Decode(&p); err != nil || p.Validate() != nil {
		http.Error(w, "bad progress", http.StatusBadRequest)
		return
	}
	b.got = append(b.got, p)
	w.WriteHeader(http.StatusNoContent)
}

func (b *bootService) stages() []ignition.Stage {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []ignition.Stage
	for _, p := range b.got {
		out = append(out, p.Stage)
	}
	return out
}

func TestReporterHoldsStagesUntilOnline(t *testing.T) {
	svc := &bootService{}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	var console bytes.Buffer
	r := newReporter(srv.URL+"/boot/tok3n", &console)
	ctx := context.Background()

	r.stage(ctx, ignition.StageInitStarted, "metalprobe init %s", "dev")
	assert.Empty(t, svc.stages(), "not posted before the network is up")
	r.goOnline(ctx)
	r.stage(ctx, ignition.StageNetworkUp, "eth0 10.0.2.15/24")
	assert.Equal(t, []ignition.Stage{ignition.StageInitStarted, ignition.StageNetworkUp}, svc.stages())

	lines := strings.Split(strings.TrimSpace(console.String()), "\n")
	require.Len(t, lines, 2)
	stage, msg := ignition.ParseConsoleLine(lines[1])
	assert.Equal(t, ignition.StageNetworkUp, stage)
	assert.Equal(t, "eth0 10.0.2.15/24", msg)
}

// A network boot learns its boot URL from its ignition: until then its stages are held, even
// with the network up.
func TestReporterHoldsStagesUntilItHasABootURL(t *testing.T) {
	svc := &bootService{}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	var console bytes.Buffer
	r := newReporter("", &console)
	ctx := context.Background()

	r.stage(ctx, ignition.StageInitStarted, "metalprobe init %s", "dev")
	r.goOnline(ctx)
	r.stage(ctx, ignition.StageNetworkUp, "eth0 10.0.2.15/24")
	assert.Empty(t, svc.stages(), "no boot URL yet")
	r.setBase(srv.URL + "/boot/tok3n")
	r.goOnline(ctx)
	r.stage(ctx, ignition.StageIgnitionFetched, "mode discovery")
	assert.Equal(t, []ignition.Stage{ignition.StageInitStarted, ignition.StageNetworkUp, ignition.StageIgnitionFetched}, svc.stages())
}

func TestReporterRetriesAndFlattensConsoleLines(t *testing.T) {
	svc := &bootService{failFirst: 2}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	var console bytes.Buffer
	r := newReporter(srv.URL+"/boot/tok3n", &console)
	r.backoff = 0
	r.goOnline(context.Background())
	r.stage(context.Background(), ignition.StageFailed, "metalprobe exited 1:\nline one\nline two")
	assert.Equal(t, []ignition.Stage{ignition.StageFailed}, svc.stages(), "posted on the third attempt")
	svc.mu.Lock()
	assert.Equal(t, "metalprobe exited 1:\nline one\nline two", svc.got[0].Message, "the boot service gets the lines")
	svc.mu.Unlock()
	assert.Equal(t, ignition.ConsolePrefix+"Failed metalprobe exited 1: line one line two\n", console.String())
}

func TestReporterFailureIsPrintedWithoutTheToken(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "gone", http.StatusNotFound)
	}))
	defer srv.Close()
	var console bytes.Buffer
	r := newReporter(srv.URL+"/boot/tok3n", &console)
	r.backoff = 0
	r.goOnline(context.Background())
	r.stage(context.Background(), ignition.StageProbeRunning, "")
	assert.Contains(t, console.String(), "posting progress ProbeRunning to the boot service failed: boot service answered 404")

	// A connection error quotes the URL: the token is cut out of it.
	srv.Close()
	console.Reset()
	r.stage(context.Background(), ignition.StageProbeRunning, "")
	assert.Contains(t, console.String(), "posting progress ProbeRunning")
	assert.NotContains(t, console.String(), "tok3n")
}

func TestClipKeepsTheEndOnACharacterBoundary(t *testing.T) {
	assert.Equal(t, "short", clip("short", 1024))
	long := strings.Repeat("é", 600) + "the error"
	c := clip(long, 1024)
	assert.LessOrEqual(t, len(c), 1024)
	assert.True(t, utf8.ValidString(c))
	assert.True(t, strings.HasSuffix(c, "the error"))
	assert.Equal(t, "a?b", clip("a\xffb", 10))
}
