package install

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"
	"k8s.io/apimachinery/pkg/api/resource"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

func TestMain(m *testing.M) {
	retryWait = time.Millisecond
	os.Exit(m.Run())
}

const (
	imageBytes = 4 << 20  // the test image: an MBR disk of 4 MiB
	diskBytes  = 16 << 20 // each test disk
	mib        = 1 << 20
)

var testImage = sync.OnceValue(func() []byte { return buildImage(imageBytes) })

// buildImage makes a raw MBR disk image of size bytes with go-diskfs: one Linux partition from
// 1 MiB to the end of the image, holding pseudo-random bytes (a fixed seed, repeating). The
// partition reaches the end, so a config drive added after it starts past the image.
func buildImage(size int64) []byte {
	dir, err := os.MkdirTemp("", "install-image-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "image.raw")
	d, err := diskfs.Create(path, size, diskfs.SectorSizeDefault)
	if err != nil {
		panic(err)
	}
	table := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{
		{Index: 1, Bootable: true, Type: mbr.Linux, Start: 2048, Size: uint32(size/512 - 2048)},
	}}
	if err := d.Partition(table); err != nil {
		panic(err)
	}
	// Pseudo-random bytes with a prime period: any shift shows, and the compressors (xz
	// above all) stay fast.
	period := make([]byte, 65521)
	_, _ = rand.NewChaCha8([32]byte{'i', 'r', 'o', 'n', 'f', 'l', 'e', 'e', 't'}).Read(period)
	content := make([]byte, size-mib)
	for i := range content {
		content[i] = period[i%len(period)]
	}
	if _, err := d.WritePartitionContents(1, bytes.NewReader(content)); err != nil {
		panic(err)
	}
	if err := d.Close(); err != nil {
		panic(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	if int64(len(data)) != size {
		panic("image size")
	}
	return data
}

func compress(t *testing.T, kind string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch kind {
	case "raw":
		return data
	case "gzip":
		w := gzip.NewWriter(&buf)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "zstd":
		w, err := zstd.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "xz":
		w, err := xz.NewWriter(&buf)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	default:
		t.Fatalf("unknown compression %s", kind)
	}
	return buf.Bytes()
}

func sha256Of(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func sha512Of(b []byte) string {
	s := sha512.Sum512(b)
	return "sha512:" + hex.EncodeToString(s[:])
}

// files serves named byte slices and counts the requests for each path.
type files struct {
	mu       sync.Mutex
	content  map[string][]byte
	requests map[string]int
	headers  []http.Header
}

func serveFiles(t *testing.T, content map[string][]byte) (*files, *httptest.Server) {
	t.Helper()
	f := &files{content: content, requests: map[string]int{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *files) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests[r.URL.Path]++
	f.headers = append(f.headers, r.Header.Clone())
	data, ok := f.content[r.URL.Path]
	f.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
}

func (f *files) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[path]
}

// testRoot makes <root>/dev/<name> for each name, zero-filled, of diskBytes, and the inventory
// entries for them (sizes as the inventory says, serials s-<name>).
func testRoot(t *testing.T, names ...string) (string, []metalv1alpha1.StorageDevice) {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "dev"), 0o755))
	var disks []metalv1alpha1.StorageDevice
	for _, name := range names {
		require.NoError(t, os.WriteFile(wipe.DevicePath(root, name), make([]byte, diskBytes), 0o644))
		disks = append(disks, metalv1alpha1.StorageDevice{
			Name: name, SerialNumber: "s-" + name, Size: resource.NewQuantity(diskBytes, resource.BinarySI), Type: "SSD",
		})
	}
	return root, disks
}

func readDisk(t *testing.T, root, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(wipe.DevicePath(root, name))
	require.NoError(t, err)
	require.Len(t, data, diskBytes, "the disk file keeps its size")
	return data
}

func allZero(b []byte) bool {
	return bytes.Count(b, []byte{0}) == len(b)
}

// requireUntouched checks that a disk file is still all zeros.
func requireUntouched(t *testing.T, root, name string) {
	t.Helper()
	assert.True(t, allZero(readDisk(t, root, name)), "%s must not have been written", name)
}

// requireWipedEnds checks that the first and last MiB of a disk file are zeros.
func requireWipedEnds(t *testing.T, root, name string) {
	t.Helper()
	data := readDisk(t, root, name)
	assert.True(t, allZero(data[:mib]), "%s: first MiB not zeroed", name)
	assert.True(t, allZero(data[len(data)-mib:]), "%s: last MiB not zeroed", name)
}

// requireImage checks that a disk holds img from byte 0, apart from the MBR's partition entries
// 2 to 4, where the config drive's entry goes.
func requireImage(t *testing.T, disk, img []byte) {
	t.Helper()
	require.GreaterOrEqual(t, len(disk), len(img))
	assert.True(t, bytes.Equal(disk[:462], img[:462]), "boot code and partition entry 1")
	assert.True(t, bytes.Equal(disk[510:512], img[510:512]), "MBR signature")
	if !bytes.Equal(disk[512:len(img)], img[512:]) {
		for i := 512; i < len(img); i++ {
			if disk[i] != img[i] {
				t.Fatalf("disk byte %d is %#x, the image's is %#x", i, disk[i], img[i])
			}
		}
	}
}

func run(t *testing.T, root string, disks []metalv1alpha1.StorageDevice, in ignition.Install) *metalv1alpha1.InstallReport {
	t.Helper()
	return runWith(t, context.Background(), Options{Root: root, Disks: disks, Install: in})
}

func runWith(t *testing.T, ctx context.Context, opts Options) *metalv1alpha1.InstallReport {
	t.Helper()
	var log bytes.Buffer
	opts.Log = &log
	rep := Run(ctx, opts)
	require.NotNil(t, rep)
	t.Logf("log:\n%s", log.String())
	assert.Equal(t, opts.Install.Image, rep.Image)
	assert.Equal(t, opts.Install.ImageChecksum, rep.ImageChecksum)
	if rep.Succeeded {
		assert.Equal(t, metalv1alpha1.InstallReasonInstalled, rep.Reason)
	} else {
		assert.NotEqual(t, metalv1alpha1.InstallReasonInstalled, rep.Reason)
		assert.NotEmpty(t, rep.Message)
	}
	assert.LessOrEqual(t, len(rep.Message), maxMessageBytes)
	return rep
}

func startServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
