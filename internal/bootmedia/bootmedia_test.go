package bootmedia

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// fakeTemplate writes a probe.iso of random bytes with a zero-filled embed area of embedSize
// at embedOffset, and its manifest, into a new directory; it returns the directory and the
// template's bytes.
func fakeTemplate(t *testing.T, size, embedOffset, embedSize int64) (string, []byte) {
	t.Helper()
	iso := make([]byte, size)
	_, err := rand.Read(iso)
	require.NoError(t, err)
	clear(iso[embedOffset : embedOffset+embedSize])
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ISOFile), iso, 0o644))
	sum := sha256.Sum256(iso)
	writeManifest(t, dir, Manifest{Size: size, SHA256: hex.EncodeToString(sum[:]), EmbedOffset: embedOffset, EmbedSize: embedSize})
	return dir, iso
}

func writeManifest(t *testing.T, dir string, m Manifest) {
	t.Helper()
	data, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644))
}

func TestEmbedRoundTrip(t *testing.T) {
	dir, _ := fakeTemplate(t, 3<<20, 1<<20, DefaultEmbedSize)
	tmpl, err := LoadTemplate(dir)
	require.NoError(t, err)
	ign := []byte(`{"registryURL":"https://registry.invalid","token":"t0k3n"}`)
	const url = "http://boot.invalid/boot/abc"
	embed, err := tmpl.Embed(ign, url)
	require.NoError(t, err)
	require.Len(t, embed, DefaultEmbedSize)

	again, err := tmpl.Embed(ign, url)
	require.NoError(t, err)
	assert.Equal(t, embed, again, "the same boot gives the same bytes")

	// gzip stops at the end of its stream; everything after it is zero padding.
	br := bytes.NewReader(embed)
	zr, err := gzip.NewReader(br)
	require.NoError(t, err)
	zr.Multistream(false)
	assert.True(t, zr.ModTime.IsZero())
	assert.Empty(t, zr.Name)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	rest, err := io.ReadAll(br)
	require.NoError(t, err)
	assert.NotEmpty(t, rest)
	assert.Equal(t, make([]byte, len(rest)), rest, "zero padding after the archive")

	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(raw)))
	require.NoError(t, err)
	got := map[string]cpio.Record{}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
		got[r.Name] = r
		assert.Zero(t, r.MTime, r.Name)
		assert.Zero(t, r.UID, r.Name)
	}
	assert.Equal(t, []string{"ironfleet", EmbedBootURLPath, EmbedIgnitionPath}, names)
	assert.Equal(t, "ironfleet/ignition.json", EmbedIgnitionPath)
	assert.Equal(t, uint64(cpio.S_IFDIR|0o755), got["ironfleet"].Mode)
	assert.Equal(t, uint64(cpio.S_IFREG|0o600), got[EmbedIgnitionPath].Mode)
	assert.Equal(t, uint64(cpio.S_IFREG|0o644), got[EmbedBootURLPath].Mode)
	assert.Equal(t, ign, content(t, got[EmbedIgnitionPath]))
	assert.Equal(t, []byte(url), content(t, got[EmbedBootURLPath]))
}

func content(t *testing.T, r cpio.Record) []byte {
	t.Helper()
	data, err := io.ReadAll(io.NewSectionReader(r.ReaderAt, 0, int64(r.FileSize)))
	require.NoError(t, err)
	return data
}

func TestEmbedTooLarge(t *testing.T) {
	dir, _ := fakeTemplate(t, 64<<10, 8<<10, 4<<10)
	tmpl, err := LoadTemplate(dir)
	require.NoError(t, err)
	big := make([]byte, 8<<10)
	_, err = rand.Read(big) // incompressible
	require.NoError(t, err)
	_, err = tmpl.Embed(big, "http://b")
	assert.True(t, errors.Is(err, ErrTooLarge), "%v", err)

	// The real area takes the largest ignition the probe accepts, incompressible.
	huge := make([]byte, ignition.MaxIgnitionBytes)
	_, err = rand.Read(huge)
	require.NoError(t, err)
	_, err = renderEmbed(huge, "http://boot.example:8080/boot/"+string(bytes.Repeat([]byte("x"), 64)), DefaultEmbedSize)
	assert.NoError(t, err)
}

func TestLoadTemplateRefusesMismatches(t *testing.T) {
	dir, iso := fakeTemplate(t, 64<<10, 8<<10, 4<<10)
	sum := sha256.Sum256(iso)
	good := Manifest{Size: int64(len(iso)), SHA256: hex.EncodeToString(sum[:]), EmbedOffset: 8 << 10, EmbedSize: 4 << 10}

	for name, tc := range map[string]struct {
		m    Manifest
		want string
	}{
		"size":            {Manifest{Size: good.Size + 1, SHA256: good.SHA256, EmbedOffset: good.EmbedOffset, EmbedSize: good.EmbedSize}, "bytes"},
		"sha256":          {Manifest{Size: good.Size, SHA256: hex.EncodeToString(make([]byte, 32)), EmbedOffset: good.EmbedOffset, EmbedSize: good.EmbedSize}, "SHA256"},
		"area outside":    {Manifest{Size: good.Size, SHA256: good.SHA256, EmbedOffset: good.Size - 100, EmbedSize: good.EmbedSize}, "not inside"},
		"area not zeroed": {Manifest{Size: good.Size, SHA256: good.SHA256, EmbedOffset: 0, EmbedSize: good.EmbedSize}, "not zero-filled"},
		"no embed area":   {Manifest{Size: good.Size, SHA256: good.SHA256}, "not inside"},
	} {
		t.Run(name, func(t *testing.T) {
			writeManifest(t, dir, tc.m)
			_, err := LoadTemplate(dir)
			assert.ErrorContains(t, err, tc.want)
		})
	}
	writeManifest(t, dir, good)
	tmpl, err := LoadTemplate(dir)
	require.NoError(t, err)
	assert.Equal(t, good, tmpl.Manifest)
	assert.Equal(t, good.Size, tmpl.Size())

	// A template changed on disk after loading is refused by Open.
	require.NoError(t, os.WriteFile(filepath.Join(dir, ISOFile), iso[:len(iso)-2048], 0o644))
	_, err = tmpl.Open(make([]byte, good.EmbedSize))
	assert.ErrorContains(t, err, "rebuilt")

	_, err = LoadTemplate(t.TempDir())
	assert.ErrorContains(t, err, "make probe-image")
}

// TestOpenReadsTheTemplateWithTheEmbed reads the boot's ISO at offsets around the embed
// area's boundaries, with Seek+Read, ReadAt and HTTP range requests, and compares with the
// template's bytes with the embed copied in.
func TestOpenReadsTheTemplateWithTheEmbed(t *testing.T) {
	const size, off, esize = 256 << 10, 100<<10 + 2048, 16 << 10
	dir, iso := fakeTemplate(t, size, off, esize)
	tmpl, err := LoadTemplate(dir)
	require.NoError(t, err)
	embed := make([]byte, esize)
	_, err = rand.Read(embed)
	require.NoError(t, err)
	want := bytes.Clone(iso)
	copy(want[off:], embed)

	_, err = tmpl.Open(embed[:10])
	assert.Error(t, err, "an embed of the wrong size")

	r, err := tmpl.Open(embed)
	require.NoError(t, err)
	defer func() { _ = r.Close() }()

	all, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, want, all, "the whole ISO")

	ra := r.(io.ReaderAt)
	for _, start := range []int64{0, off - 1, off - 100, off, off + 1, off + esize - 1, off + esize, off + esize - 50, size - 1} {
		for _, n := range []int64{1, 2, 100, esize, esize + 200, size} {
			end := min(start+n, size)
			_, err := r.Seek(start, io.SeekStart)
			require.NoError(t, err)
			got := make([]byte, end-start)
			_, err = io.ReadFull(r, got)
			require.NoError(t, err, "read [%d,%d)", start, end)
			require.Equal(t, want[start:end], got, "seek+read [%d,%d)", start, end)

			got2 := make([]byte, end-start)
			m, err := ra.ReadAt(got2, start)
			require.NoError(t, err)
			require.Equal(t, int(end-start), m)
			require.Equal(t, want[start:end], got2, "ReadAt [%d,%d)", start, end)
		}
	}
	pos, err := r.Seek(0, io.SeekEnd)
	require.NoError(t, err)
	assert.EqualValues(t, size, pos)
	n, err := r.Read(make([]byte, 10))
	assert.Zero(t, n)
	assert.Equal(t, io.EOF, err)

	// As the boot service serves it: ranges across both boundaries.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f, err := tmpl.Open(embed)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer func() { _ = f.Close() }()
		http.ServeContent(w, req, ISOFile, time.Time{}, f)
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off-10, off+esize+9))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusPartialContent, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, want[off-10:off+esize+10], body)
}
