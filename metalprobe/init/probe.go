package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// metalprobePath is the probe binary in the initramfs: the same one the product ships.
const metalprobePath = "/bin/metalprobe"

// probeTimeout is metalprobe's --timeout: generous, since ghw walks all of sysfs and a
// registry that is slow to answer gets metalprobe's own retries within it.
const probeTimeout = 10 * time.Minute

// probeArgs runs metalprobe on the ignition /init fetched.
var probeArgs = []string{"--ignition", ignitionFile, "--timeout", probeTimeout.String()}

// exitReportedFailure is metalprobe's exit status when its wipe or install failed and the
// report saying so was delivered (cli.ExitReportedFailure; a test checks they agree).
const exitReportedFailure = 3

// reportedFailure is a run whose failure the operator already has in the report: it is not
// run again (that would repeat the work while the operator may be powering the server off).
type reportedFailure struct{ err error }

func (r *reportedFailure) Error() string { return r.err.Error() }

// runProbe runs metalprobe once, its output going to the console. On failure the error
// carries the last lines metalprobe wrote to stderr; a *reportedFailure when the report was
// delivered.
func runProbe(ctx context.Context, path string, args []string, console io.Writer) error {
	cmd := exec.CommandContext(ctx, path, args...)
	tail := &lineTail{max: 8}
	cmd.Stdout = console
	cmd.Stderr = io.MultiWriter(console, tail)
	if runErr := cmd.Run(); runErr != nil {
		err := fmt.Errorf("metalprobe: %v: %s", runErr, tail.String())
		var exit *exec.ExitError
		if errors.As(runErr, &exit) && exit.ExitCode() == exitReportedFailure {
			return &reportedFailure{err}
		}
		return err
	}
	return nil
}

// retryProbe runs metalprobe until it succeeds or reports a failure (*reportedFailure), waiting
// backoff[i] before attempt i+2, and calls failed after each failure. It returns the last error
// when every attempt failed, or the reported failure.
func retryProbe(ctx context.Context, run func(context.Context) error, backoff []time.Duration, failed func(attempt int, err error)) error {
	for attempt := 1; ; attempt++ {
		err := run(ctx)
		if err == nil {
			return nil
		}
		failed(attempt, err)
		var reported *reportedFailure
		if errors.As(err, &reported) || attempt > len(backoff) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff[attempt-1]):
		}
	}
}

// lineTail keeps the last max lines written to it.
type lineTail struct {
	mu    sync.Mutex
	max   int
	lines []string
	part  []byte
}

func (t *lineTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.part = append(t.part, p...)
	for {
		i := bytes.IndexByte(t.part, '\n')
		if i < 0 {
			break
		}
		t.add(string(t.part[:i]))
		t.part = t.part[i+1:]
	}
	return len(p), nil
}

func (t *lineTail) add(line string) {
	if line = strings.TrimRight(line, "\r"); strings.TrimSpace(line) == "" {
		return
	}
	t.lines = append(t.lines, line)
	if len(t.lines) > t.max {
		t.lines = t.lines[len(t.lines)-t.max:]
	}
}

// String is the kept lines, including an unfinished last one, joined by newlines.
func (t *lineTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := t.lines
	if len(t.part) > 0 {
		lines = append(lines[:len(lines):len(lines)], string(t.part))
	}
	if len(lines) > t.max {
		lines = lines[len(lines)-t.max:]
	}
	return strings.Join(lines, "\n")
}

// redactToken replaces every occurrence of token in s.
func redactToken(s, token string) string {
	if token == "" {
		return s
	}
	return strings.ReplaceAll(s, token, "<token>")
}
