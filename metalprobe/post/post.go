// Package post delivers a report to the registry: one JSON POST, retried with exponential
// backoff and jitter while the failure is the registry's or the network's (5xx, 429, connection
// errors) and given up at once when it is the request's (any other 4xx).
package post

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ironfleet/ironfleet/internal/report"
)

// ReportsPath is where the registry accepts reports, relative to its base URL.
const ReportsPath = "/v1/reports"

// Backoff says how often and how patiently to try.
type Backoff struct {
	// Initial is the wait before the second attempt; each later wait doubles, up to Max.
	// Each wait is jittered to between half and all of its nominal value.
	Initial time.Duration
	// Max caps one wait. Zero (or less than Initial) means Initial.
	Max time.Duration
	// Attempts is how many requests to make at most, including the first. Less than one means
	// one.
	Attempts int
}

// DefaultBackoff suits a probe booted for discovery: about four minutes of patience in all.
var DefaultBackoff = Backoff{Initial: time.Second, Max: 30 * time.Second, Attempts: 12}

// StatusError is a response the registry refused the report with.
type StatusError struct {
	// Code is the HTTP status code.
	Code int
	// Message is what the registry said (its JSON "error" field, else the body's text).
	Message string
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("registry answered %d %s", e.Code, http.StatusText(e.Code))
	}
	return fmt.Sprintf("registry answered %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Retryable says whether the same request may succeed later.
func (e *StatusError) Retryable() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests
}

// maxMessageBytes bounds how much of a refusal body is read and quoted.
const maxMessageBytes = 4 << 10

// Send POSTs r as JSON to <registryURL>/v1/reports with the bearer token, retrying as b says.
// It returns nil once the registry answers 2xx; a *StatusError (wrapped) for a refusal; the
// context's error when ctx ends first. Errors never contain the token. A nil client means
// http.DefaultClient.
func Send(ctx context.Context, c *http.Client, registryURL, token string, r *report.Report, b Backoff) error {
	if c == nil {
		c = http.DefaultClient
	}
	if r == nil {
		return errors.New("posting report: no report")
	}
	if token == "" {
		return errors.New("posting report: no token")
	}
	endpoint, err := reportsURL(registryURL)
	if err != nil {
		return err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("posting report: encoding: %w", err)
	}
	attempts := max(b.Attempts, 1)
	var last error
	for attempt := 1; attempt <= attempts; attempt++ {
		retryAfter, err := postOnce(ctx, c, endpoint, token, r.ProbeVersion, body)
		if err == nil {
			return nil
		}
		last = redact(err, token)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return fmt.Errorf("posting report to %s: %w (last error: %v)", endpoint, ctxErr, last)
		}
		if !retryable(err) {
			return fmt.Errorf("posting report to %s: %w", endpoint, last)
		}
		if attempt == attempts {
			break
		}
		wait := min(max(b.delay(attempt), retryAfter), max(b.Max, b.Initial))
		if err := sleep(ctx, wait); err != nil {
			return fmt.Errorf("posting report to %s: %w (last error: %v)", endpoint, err, last)
		}
	}
	return fmt.Errorf("posting report to %s: giving up after %d attempts: %w", endpoint, attempts, last)
}

// BootStatePath is where the registry accepts the probe's progress, relative to its base URL.
const BootStatePath = "/v1/bootstate"

// maxStateMessageBytes is how much of a boot state's message the registry keeps.
const maxStateMessageBytes = 1024

// BootState POSTs one progress update, {"systemUUID", "state", "message"} as JSON, to
// <registryURL>/v1/bootstate with the bearer token. It makes one request and does not retry:
// progress is for people watching, and the next update supersedes this one. It returns nil
// once the registry answers 2xx, a *StatusError (wrapped) for a refusal. Errors never contain
// the token. A nil client means http.DefaultClient; bound the call with ctx.
func BootState(ctx context.Context, c *http.Client, registryURL, token, systemUUID, state, message string) error {
	if c == nil {
		c = http.DefaultClient
	}
	if token == "" {
		return errors.New("posting boot state: no token")
	}
	endpoint, err := endpointURL(registryURL, BootStatePath, "posting boot state")
	if err != nil {
		return err
	}
	if len(message) > maxStateMessageBytes {
		message = message[:maxStateMessageBytes]
	}
	body, err := json.Marshal(struct {
		SystemUUID string `json:"systemUUID"`
		State      string `json:"state"`
		Message    string `json:"message,omitempty"`
	}{systemUUID, state, strings.ToValidUTF8(message, "")})
	if err != nil {
		return fmt.Errorf("posting boot state: encoding: %w", err)
	}
	if _, err := postOnce(ctx, c, endpoint, token, "", body); err != nil {
		return fmt.Errorf("posting boot state %s to %s: %w", state, endpoint, redact(err, token))
	}
	return nil
}

// postOnce makes one request. It returns how long the registry asked to wait (Retry-After)
// alongside a retryable refusal.
func postOnce(ctx context.Context, c *http.Client, endpoint, token, version string, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	ua := "metalprobe"
	if version != "" {
		ua += "/" + version
	}
	req.Header.Set("User-Agent", ua)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMessageBytes))
		_ = resp.Body.Close()
	}()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return 0, nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxMessageBytes))
	return retryAfter(resp.Header.Get("Retry-After")), &StatusError{Code: resp.StatusCode, Message: message(msg)}
}

// retryable says whether trying the same request again may help: yes for the registry's
// 5xx and 429 and for network failures; no for other refusals and for a certificate the
// probe does not trust (that will not change by itself).
func retryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	var certErr *tls.CertificateVerificationError
	return !errors.As(err, &certErr)
}

// delay is the jittered wait after the given (1-based) failed attempt.
func (b Backoff) delay(attempt int) time.Duration {
	d := b.Initial
	if d <= 0 {
		return 0
	}
	ceiling := max(b.Max, b.Initial)
	for i := 1; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	half := d / 2
	return half + rand.N(d-half+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func reportsURL(registryURL string) (string, error) {
	return endpointURL(registryURL, ReportsPath, "posting report")
}

func endpointURL(registryURL, path, what string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(registryURL))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: registry URL %q is not an http(s) URL", what, registryURL)
	}
	u.Path = strings.TrimRight(u.Path, "/") + path
	u.RawPath = ""
	return u.String(), nil
}

// message extracts the registry's explanation: {"error": "..."} when it is JSON, else the
// text itself, on one line.
func message(body []byte) string {
	var apiErr struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &apiErr) == nil {
		if apiErr.Error != "" {
			return apiErr.Error
		}
		if apiErr.Message != "" {
			return apiErr.Message
		}
	}
	return strings.Join(strings.Fields(string(body)), " ")
}

// retryAfter reads a Retry-After header given in seconds; dates and garbage count as none.
func retryAfter(v string) time.Duration {
	secs, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}

// redact keeps the token out of an error, in case a server or proxy echoed it back.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	var se *StatusError
	if errors.As(err, &se) {
		return &StatusError{Code: se.Code, Message: strings.ReplaceAll(se.Message, token, "[redacted]")}
	}
	return errors.New(strings.ReplaceAll(err.Error(), token, "[redacted]"))
}
