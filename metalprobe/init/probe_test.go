package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/metalprobe/cli"
	"github.com/ironfleet/ironfleet/test/syncbuf"
)

func TestLineTailKeepsTheLastLines(t *testing.T) {
	tail := &lineTail{max: 3}
	for i := 1; i <= 5; i++ {
		_, _ = fmt.Fprintf(tail, "line %d\n", i)
	}
	_, _ = tail.Write([]byte("\npartial"))
	assert.Equal(t, "line 4\nline 5\npartial", tail.String())
}

func TestRunProbeReportsStderrTail(t *testing.T) {
	// stdout and stderr are written from different goroutines.
	var console syncbuf.Buffer
	err := runProbe(context.Background(), "/bin/sh", []string{"-c", "echo report; for i in 1 2 3 4 5 6 7 8 9 10; do echo metalprobe: line $i >&2; done; exit 1"}, &console)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exit status 1")
	assert.Contains(t, err.Error(), "metalprobe: line 10")
	assert.NotContains(t, err.Error(), "line 2\n", "only the tail")
	assert.Contains(t, console.String(), "report\n", "stdout goes to the console")
	assert.Contains(t, console.String(), "metalprobe: line 1\n", "and all of stderr")

	assert.NoError(t, runProbe(context.Background(), "/bin/true", nil, &console))

	// Exit 3: the failure is in the delivered report.
	err = runProbe(context.Background(), "/bin/sh", []string{"-c", "echo metalprobe: install: FAILED >&2; exit 3"}, &console)
	var reported *reportedFailure
	require.ErrorAs(t, err, &reported)
	assert.Contains(t, err.Error(), "install: FAILED")
}

// The exit status /init takes for a delivered failure is the one metalprobe exits with.
func TestExitReportedFailureIsMetalprobes(t *testing.T) {
	assert.Equal(t, cli.ExitReportedFailure, exitReportedFailure)
}

func TestRetryProbe(t *testing.T) {
	runs := 0
	var failures []int
	err := retryProbe(context.Background(), func(context.Context) error {
		runs++
		if runs < 3 {
			return errors.New("registry down")
		}
		return nil
	}, []time.Duration{0, 0, 0}, func(attempt int, _ error) { failures = append(failures, attempt) })
	require.NoError(t, err)
	assert.Equal(t, []int{1, 2}, failures)

	runs = 0
	err = retryProbe(context.Background(), func(context.Context) error { runs++; return errors.New("no") }, []time.Duration{0, 0}, func(int, error) {})
	require.Error(t, err)
	assert.Equal(t, 3, runs, "one attempt, then one per backoff")
	assert.True(t, strings.Contains(err.Error(), "no"))

	// A failure the report already tells the operator is not run again.
	runs = 0
	var failures2 []int
	err = retryProbe(context.Background(), func(context.Context) error { runs++; return &reportedFailure{errors.New("checksum mismatch")} },
		[]time.Duration{0, 0}, func(attempt int, _ error) { failures2 = append(failures2, attempt) })
	var reported *reportedFailure
	require.ErrorAs(t, err, &reported)
	assert.Equal(t, 1, runs, "run once")
	assert.Equal(t, []int{1}, failures2)
}

func TestRedactTokenRemovesTheRegistryToken(t *testing.T) {
	assert.Equal(t, "metalprobe: 403 for <token>: refused", redactToken("metalprobe: 403 for s3cr3t: refused", "s3cr3t"))
	assert.Equal(t, "nothing to hide", redactToken("nothing to hide", ""))
}
