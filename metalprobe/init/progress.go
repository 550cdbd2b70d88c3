package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// progressAttempts and progressTimeout bound one stage report: progress is for people
// watching, so a boot service that does not answer costs a few seconds, never the boot.
const (
	progressAttempts = 3
	progressTimeout  = 5 * time.Second
)

// reporter prints each stage on the console and POSTs it to the boot service. Stages
// reported before the network is up are held and posted once it is.
type reporter struct {
	base    string // the boot URL; secret, never printed
	client  *http.Client
	console io.Writer
	backoff time.Duration // between attempts; tests shorten it

	mu      sync.Mutex
	online  bool
	pending []ignition.Progress
}

func newReporter(base string, console io.Writer) *reporter {
	return &reporter{base: base, client: &http.Client{Timeout: progressTimeout}, console: console, backoff: time.Second}
}

// logf prints a line on the console that is not a stage.
func (r *reporter) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(r.console, "ironfleet-init: "+format+"\n", args...)
}

// stage reports a stage: on the console at once, to the boot service when online.
func (r *reporter) stage(ctx context.Context, stage ignition.Stage, format string, args ...any) {
	p := ignition.Progress{Stage: stage, Message: clip(fmt.Sprintf(format, args...), 1024)}
	// A console line is one line: the lab reads stages back line by line.
	line := ignition.Progress{Stage: p.Stage, Message: strings.Join(strings.Fields(p.Message), " ")}.ConsoleLine()
	_, _ = fmt.Fprintln(r.console, line)
	r.mu.Lock()
	if !r.online {
		r.pending = append(r.pending, p)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.post(ctx, p)
}

// setBase sets the boot URL a network boot learns from its ignition.
func (r *reporter) setBase(base string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base = base
}

// goOnline posts the stages held while the network was down (or the boot URL unknown), then
// posts as they come. Without a boot URL it holds them still: a network boot learns it from its
// ignition.
func (r *reporter) goOnline(ctx context.Context) {
	r.mu.Lock()
	if r.base == "" {
		r.mu.Unlock()
		return
	}
	pending := r.pending
	r.pending, r.online = nil, true
	r.mu.Unlock()
	for _, p := range pending {
		r.post(ctx, p)
	}
}

// post sends one Progress, retrying briefly; a failure is printed, not returned.
func (r *reporter) post(ctx context.Context, p ignition.Progress) {
	body, err := json.Marshal(p)
	if err != nil {
		r.logf("encoding progress %s: %v", p.Stage, err)
		return
	}
	var last error
	for attempt := 0; attempt < progressAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(r.backoff):
			}
		}
		if last = r.postOnce(ctx, body); last == nil {
			return
		}
	}
	r.logf("posting progress %s to the boot service failed: %v", p.Stage, last)
}

func (r *reporter) postOnce(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base+ignition.ProgressPath, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return redactErr(err, r.base)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("boot service answered %s", resp.Status)
	}
	return nil
}

// redactErr replaces the boot URL (which holds the boot token) in an HTTP client error.
func redactErr(err error, base string) error {
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), base, redactedURL(base)))
}

// clip keeps the last max bytes of s, starting on a whole UTF-8 character: for a stderr tail,
// the end is what says what went wrong.
func clip(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "?")
	}
	if len(s) <= max {
		return s
	}
	s = s[len(s)-max:]
	for len(s) > 0 && !utf8.RuneStart(s[0]) {
		s = s[1:]
	}
	return s
}
