package boot

import (
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The embed cache finds a render by token and ignition: another ignition for the token misses
// and its render replaces the old one (one per token); the LRU bound holds.
func TestEmbedCacheByTokenAndIgnition(t *testing.T) {
	c := embedCache{max: 3}
	a, b := sha256.Sum256([]byte("ignition a")), sha256.Sum256([]byte("ignition b"))
	first := c.add("t1", a, embed{etag: "a"})
	assert.Equal(t, "a", first.etag)
	got, ok := c.get("t1", a)
	assert.True(t, ok)
	assert.Equal(t, "a", got.etag)
	assert.Equal(t, "a", c.add("t1", a, embed{etag: "a again"}).etag, "racing first requests: the one kept")

	_, ok = c.get("t1", b)
	assert.False(t, ok, "the ignition rewritten: not the old render")
	assert.Equal(t, "b", c.add("t1", b, embed{etag: "b"}).etag)
	got, ok = c.get("t1", b)
	assert.True(t, ok)
	assert.Equal(t, "b", got.etag)
	_, ok = c.get("t1", a)
	assert.False(t, ok, "the old render is gone")
	assert.Equal(t, 1, c.order.Len(), "one render per token")

	// The bound: t1 used last survives, t2 (least recently used) goes.
	c.add("t2", a, embed{etag: "t2"})
	c.add("t3", a, embed{etag: "t3"})
	c.get("t1", b)
	c.add("t4", a, embed{etag: "t4"})
	assert.Equal(t, 3, c.order.Len())
	assert.Len(t, c.byToken, 3)
	for token, want := range map[string]bool{"t1": true, "t2": false, "t3": true, "t4": true} {
		sum := a
		if token == "t1" {
			sum = b
		}
		_, ok := c.get(token, sum)
		assert.Equal(t, want, ok, token)
	}
	for i := range 10 {
		c.add(fmt.Sprint("more", i), a, embed{})
	}
	assert.Equal(t, 3, c.order.Len())
	assert.Len(t, c.byToken, 3)

	c.drop("more9")
	_, ok = c.get("more9", a)
	assert.False(t, ok)
	assert.Equal(t, 2, c.order.Len())
}
