package boot

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// logLines is a logger's output.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// testFirmwareCache is a cache in a directory of the test's, logging to lines.
func testFirmwareCache(t *testing.T, max int64) (*firmwareCache, *logLines) {
	t.Helper()
	lines := &logLines{}
	log := funcr.New(func(prefix, args string) {
		lines.mu.Lock()
		lines.lines = append(lines.lines, prefix+" "+args)
		lines.mu.Unlock()
	}, funcr.Options{})
	c := newFirmwareCache(Config{FirmwareCacheDir: filepath.Join(t.TempDir(), "firmware"), FirmwareMaxBytes: max,
		FirmwareFetchTimeout: time.Minute}, log)
	return c, lines
}

// imageOrigin serves image at any path on loopback, chunked (no Content-Length) when chunked;
// gate, when not nil, holds every answer until it is closed.
func imageOrigin(t *testing.T, image []byte, chunked bool, gate chan struct{}) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if gate != nil {
			select {
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		if chunked {
			_, _ = w.Write(image[:1])
			w.(http.Flusher).Flush()
			_, _ = w.Write(image[1:])
			return
		}
		_, _ = w.Write(image)
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

func sourceOf(t *testing.T, rawURL, checksum string) firmwareSource {
	t.Helper()
	data := map[string][]byte{metalv1alpha1.FirmwareImageURLKey: []byte(rawURL)}
	if checksum != "" {
		data[metalv1alpha1.FirmwareImageChecksumKey] = []byte(checksum)
	}
	src, err := firmwareSourceOf(&corev1.Secret{Data: data})
	require.NoError(t, err)
	return src
}

func checksumOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func cacheFiles(t *testing.T, c *firmwareCache) []string {
	t.Helper()
	entries, err := os.ReadDir(c.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A checksum mismatch is logged naming the origin's host, never its URL (which may carry a
// signature) or the token; nothing of the image is kept.
func TestFirmwareMismatchLogNamesOnlyTheHost(t *testing.T) {
	image := []byte("not the image asked for")
	origin, _ := imageOrigin(t, image, false, nil)
	c, lines := testFirmwareCache(t, 1<<20)
	token := strings.Repeat("T", 43)
	src := sourceOf(t, origin.URL+"/private-path/bios.bin?X-Amz-Signature=s3cr3t", "sha256:"+strings.Repeat("0", 64))
	_, _, err := c.open(context.Background(), token, src, "firmware-image-x-0")
	var fe *fetchError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, fetchMismatch, fe.result)
	out := lines.String()
	assert.Contains(t, out, strings.TrimPrefix(origin.URL, "http://"), "the origin's host")
	assert.Contains(t, out, "firmware-image-x-0", "the Secret")
	for _, secret := range []string{"private-path", "s3cr3t", "bios.bin", token} {
		assert.NotContains(t, out, secret)
	}
	assert.Empty(t, cacheFiles(t, c), "nothing kept")
	assert.Empty(t, c.entries, "forgotten: the next request fetches again")
}

// Requests for an image wait for its one download.
func TestFirmwareOpenSharesTheDownload(t *testing.T) {
	image := make([]byte, 200<<10)
	_, _ = rand.Read(image)
	gate := make(chan struct{})
	origin, requests := imageOrigin(t, image, false, gate)
	c, _ := testFirmwareCache(t, 1<<20)
	src := sourceOf(t, origin.URL+"/bios.bin", checksumOf(image))
	token := strings.Repeat("S", 43)
	const n = 8
	var wg sync.WaitGroup
	got := make([][]byte, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, etag, err := c.open(context.Background(), token, src, "s")
			if !assert.NoError(t, err) {
				return
			}
			defer f.Close()
			assert.Equal(t, `"`+strings.TrimPrefix(checksumOf(image), "sha256:")+`"`, etag)
			st, err := f.Stat()
			require.NoError(t, err)
			got[i] = make([]byte, st.Size())
			_, err = f.ReadAt(got[i], 0)
			assert.NoError(t, err)
		}()
	}
	require.Eventually(t, func() bool { return requests.Load() >= 1 }, 10*time.Second, 10*time.Millisecond)
	close(gate)
	wg.Wait()
	for i := range n {
		assert.Equal(t, image, got[i])
	}
	assert.Equal(t, int64(1), requests.Load())
	assert.Equal(t, []string{firmwareFileName(token)}, cacheFiles(t, c))

	// Swept when its token is no longer live: entry and file.
	removed, err := c.sweep(map[string]bool{})
	require.NoError(t, err)
	assert.Equal(t, 1, removed)
	assert.Empty(t, cacheFiles(t, c))
	assert.Empty(t, c.entries)
}

// An image larger than the bound is refused, with or without a Content-Length, and nothing of
// it is kept.
func TestFirmwareTooLargeIsRefused(t *testing.T) {
	image := make([]byte, 4096)
	for _, chunked := range []bool{false, true} {
		origin, _ := imageOrigin(t, image, chunked, nil)
		c, _ := testFirmwareCache(t, 1000)
		_, _, err := c.open(context.Background(), strings.Repeat("L", 43), sourceOf(t, origin.URL+"/big.bin", ""), "s")
		var fe *fetchError
		require.ErrorAs(t, err, &fe, "chunked %v", chunked)
		assert.Equal(t, fetchTooLarge, fe.result)
		assert.Empty(t, cacheFiles(t, c))
	}
}

// The sweep removes the cache directory's files of no live image (an earlier process's, a
// download's leftovers), and only files named as the cache names them.
func TestFirmwareSweepRemovesStrayFiles(t *testing.T) {
	c, _ := testFirmwareCache(t, 1<<20)
	require.NoError(t, os.MkdirAll(c.dir, 0o700))
	for _, name := range []string{firmwareFileName("a"), firmwareFileName("b") + firmwarePartInfix + "123", "unrelated.txt"} {
		require.NoError(t, os.WriteFile(filepath.Join(c.dir, name), []byte("x"), 0o600))
	}
	removed, err := c.sweep(map[string]bool{"a": true}) // live, but not known to this cache
	require.NoError(t, err)
	assert.Equal(t, 2, removed)
	assert.Equal(t, []string{"unrelated.txt"}, cacheFiles(t, c))
}

// Image Secrets are read strictly: an http(s) URL, a sha256 checksum; errors name the key,
// never the URL.
func TestFirmwareSourceOf(t *testing.T) {
	secret := func(url, checksum string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Data: map[string][]byte{
			metalv1alpha1.FirmwareImageURLKey: []byte(url), metalv1alpha1.FirmwareImageChecksumKey: []byte(checksum)}}
	}
	for _, bad := range []*corev1.Secret{
		secret("", ""), secret("ftp://host/x.bin", ""), secret("/x.bin", ""), secret("https:///x", ""),
		secret("https://host/x.bin", "md5:abc"), secret("https://host/x.bin", "sha256:"+strings.Repeat("a", 63)),
	} {
		_, err := firmwareSourceOf(bad)
		if assert.Error(t, err) {
			assert.NotContains(t, err.Error(), "host")
		}
	}
	src, err := firmwareSourceOf(secret("https://host/x.bin", "sha256:"+strings.Repeat("AB", 32)))
	require.NoError(t, err)
	assert.Equal(t, strings.Repeat("ab", 32), src.checksum)
	other, err := firmwareSourceOf(secret("https://host/y.bin", "sha256:"+strings.Repeat("AB", 32)))
	require.NoError(t, err)
	assert.NotEqual(t, src.sum, other.sum)
}

// A handler that waits longer than the stall timeout before it answers (a firmware download)
// pushes the write deadline back before it does, or an answer without a body (HEAD) is lost.
func TestExtendWriteDeadlineAfterAWait(t *testing.T) {
	for _, extend := range []bool{true, false} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		srv := newHTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-time.After(testTimeouts.stall + 500*time.Millisecond) // the wait under test, not synchronisation
			if extend {
				extendWriteDeadline(r.Context())
			}
			w.Header().Set("Content-Length", "1000")
			w.WriteHeader(http.StatusOK)
		}), testTimeouts)
		go func() { _ = srv.Serve(ln) }()
		resp, err := http.Head("http://" + ln.Addr().String() + "/")
		if extend {
			if assert.NoError(t, err) {
				assert.Equal(t, http.StatusOK, resp.StatusCode)
				resp.Body.Close()
			}
		} else {
			assert.Error(t, err, "the deadline passed: the answer is lost")
		}
		_ = srv.Close()
	}
}
