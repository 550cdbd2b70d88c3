package tftp

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	tftplib "github.com/pin/tftp/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type counts struct {
	mu     sync.Mutex
	sent   int64
	errors map[string]int
}

func (c *counts) onSent(n int64)   { c.mu.Lock(); c.sent += n; c.mu.Unlock() }
func (c *counts) onError(k string) { c.mu.Lock(); c.errors[k]++; c.mu.Unlock() }
func (c *counts) snapshot() (int64, map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := map[string]int{}
	for k, v := range c.errors {
		m[k] = v
	}
	return c.sent, m
}

// serve starts a server on loopback over a directory holding undionly.kpxe, with a secret file
// next to the directory that must never be served.
func serve(t *testing.T) (addr string, payload []byte, c *counts) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "ipxe")
	require.NoError(t, os.Mkdir(dir, 0o755))
	payload = bytes.Repeat([]byte("undionly-"), 5000) // 45 KB: many blocks
	require.NoError(t, os.WriteFile(filepath.Join(dir, "undionly.kpxe"), payload, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "secret"), []byte("secret"), 0o644))

	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	c = &counts{errors: map[string]int{}}
	s := &Server{Open: Dir(dir, "undionly.kpxe", "ipxe.efi"), OnSent: c.onSent, OnError: c.onError}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, conn) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Error("TFTP server did not stop")
		}
	})
	return conn.LocalAddr().String(), payload, c
}

func client(t *testing.T, addr string) *tftplib.Client {
	t.Helper()
	c, err := tftplib.NewClient(addr)
	require.NoError(t, err)
	c.SetTimeout(time.Second)
	c.SetRetries(2)
	return c
}

func TestServesAFile(t *testing.T) {
	addr, payload, counts := serve(t)
	for _, name := range []string{"undionly.kpxe", "/undionly.kpxe"} {
		c := client(t, addr)
		c.SetBlockSize(1468)
		wt, err := c.Receive(name, "octet")
		require.NoError(t, err, name)
		var got bytes.Buffer
		_, err = wt.WriteTo(&got)
		require.NoError(t, err, name)
		assert.Equal(t, payload, got.Bytes(), name)
	}
	require.Eventually(t, func() bool { sent, _ := counts.snapshot(); return sent == int64(2*len(payload)) },
		5*time.Second, 10*time.Millisecond, "bytes sent are counted")
}

func TestRefusesPathsOutsideAndUnknownNames(t *testing.T) {
	addr, _, counts := serve(t)
	for _, name := range []string{"../secret", "/../secret", "ipxe/../../secret", "secret", "/etc/passwd", "UNDIONLY.KPXE", "undionly.kpxe/"} {
		_, err := client(t, addr).Receive(name, "octet")
		assert.Error(t, err, name)
	}
	// A served name whose file is missing is an error too, of its own kind.
	_, err := client(t, addr).Receive("ipxe.efi", "octet")
	assert.Error(t, err)
	_, errs := counts.snapshot()
	assert.Equal(t, map[string]int{ErrorRefused: 7, ErrorMissing: 1}, errs)
}

func TestRefusesWrites(t *testing.T) {
	addr, payload, counts := serve(t)
	rf, err := client(t, addr).Send("undionly.kpxe", "octet")
	if err == nil {
		_, err = rf.ReadFrom(bytes.NewReader([]byte("overwritten")))
	}
	assert.Error(t, err)
	_, errs := counts.snapshot()
	assert.Equal(t, 1, errs[ErrorWrite])
	// The file is as it was.
	wt, err := client(t, addr).Receive("undionly.kpxe", "octet")
	require.NoError(t, err)
	var got bytes.Buffer
	_, err = wt.WriteTo(&got)
	require.NoError(t, err)
	assert.Equal(t, payload, got.Bytes())
}
