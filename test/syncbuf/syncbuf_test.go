package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestConcurrentWritesAreKeptWhole: every write lands, none inside another, while a reader
// reads (go test -race checks the locking).
func TestConcurrentWritesAreKeptWhole(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				_, _ = fmt.Fprintf(&b, "writer %d line %d\n", w, i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	assert.Len(t, lines, 400)
	for _, line := range lines {
		assert.Regexp(t, `^writer \d line \d+$`, line)
	}
}
