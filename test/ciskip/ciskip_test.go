package ciskip

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

// recorder is a testing.TB that records how Unless ended the test. Fatalf and Skip stop the
// goroutine (runtime.Goexit) as the real ones do, so the test runs Unless in its own.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skip(args ...any) {
	r.skipped = fmt.Sprint(args...)
	runtime.Goexit()
}

func run(ok bool, ci string, t *testing.T) *recorder {
	t.Setenv("CI", ci)
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Unless(r, ok, "no %s here", "qemu")
	}()
	<-done
	return r
}

func TestUnless(t *testing.T) {
	r := run(true, "1", t)
	assert.Empty(t, r.failed+r.skipped, "ok: the test goes on")

	r = run(false, "", t)
	assert.Equal(t, "no qemu here", r.skipped, "outside CI it skips, saying why")
	assert.Empty(t, r.failed)

	r = run(false, "true", t)
	assert.Equal(t, "no qemu here (CI is set, so this fails instead of skipping)", r.failed, "in CI it fails")
	assert.Empty(t, r.skipped)
}
