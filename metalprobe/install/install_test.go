package install

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

var userData = []byte("{\"ignition\": {\"version\": \"3.4.0\"}}\n\x00binary\xff tail")

func TestInstallsImagesOverHTTP(t *testing.T) {
	img := testImage()
	for _, kind := range []string{"raw", "gzip", "zstd", "xz"} {
		t.Run(kind, func(t *testing.T) {
			served := compress(t, kind, img)
			if kind != "raw" {
				require.NotEqual(t, len(img), len(served), "the image is served compressed")
			}
			checksum := sha256Of(served)
			if kind == "xz" {
				checksum = sha512Of(served) // either algorithm
			}
			srv, ts := serveFiles(t, map[string][]byte{"/images/os.img": served})
			root, disks := testRoot(t, "vda")

			var calls [][2]int64
			rep := runWith(t, context.Background(), Options{Root: root, Disks: disks,
				Install: ignition.Install{Image: ts.URL + "/images/os.img", ImageChecksum: checksum,
					Hostname: "node-1", InstanceID: "claim-uid-1", Server: "server-1"},
				UserData: userData,
				Progress: func(written, total int64) { calls = append(calls, [2]int64{written, total}) },
			})
			require.True(t, rep.Succeeded, "%s: %s", rep.Reason, rep.Message)
			assert.Equal(t, "vda", rep.Disk)
			assert.Equal(t, "s-vda", rep.DiskSerial)
			assert.Equal(t, int64(len(img)), rep.Bytes)
			assert.Equal(t, checksum, rep.ServedDigest)
			assert.Equal(t, sha256Of(img), rep.WrittenDigest)
			assert.Equal(t, "vda2", rep.ConfigDrive)
			assert.False(t, rep.WipedAfterFailure)
			assert.Equal(t, 1, srv.count("/images/os.img"))
			assert.Equal(t, "identity", srv.headers[0].Get("Accept-Encoding"))

			requireImage(t, readDisk(t, root, "vda"), img)
			got, err := configdrive.Read(wipe.DevicePath(root, "vda"))
			require.NoError(t, err)
			assert.Equal(t, userData, got.UserData, "user data byte for byte")
			assert.Equal(t, "node-1", got.Hostname)
			assert.Equal(t, "claim-uid-1", got.InstanceID)
			assert.Equal(t, "server-1", got.Server, "meta.server names the Server")

			require.NotEmpty(t, calls)
			assert.Equal(t, int64(len(img)), calls[len(calls)-1][0], "the last progress is the whole image")
			wantTotal := int64(0) // compressed: the raw size is not known before the end
			if kind == "raw" {
				wantTotal = int64(len(img))
			}
			for _, c := range calls {
				assert.Equal(t, wantTotal, c[1])
			}
		})
	}
}

func TestInstallClearsWhatAnEarlierInstallLeftAtTheEnd(t *testing.T) {
	img := testImage()
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	root, disks := testRoot(t, "vda")
	old := bytes.Repeat([]byte("EFI PART old gpt backup"), diskBytes/23)
	require.NoError(t, os.WriteFile(wipe.DevicePath(root, "vda"), append(old, make([]byte, diskBytes-len(old))...), 0o644))

	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(img)})
	require.True(t, rep.Succeeded, rep.Message)
	disk := readDisk(t, root, "vda")
	requireImage(t, disk, img)
	assert.True(t, allZero(disk[len(disk)-mib:]), "the last MiB is cleared")
}

func TestChecksumMismatchWipesTheDiskAgain(t *testing.T) {
	img := testImage()
	served := compress(t, "gzip", img)
	_, ts := serveFiles(t, map[string][]byte{"/os.img.gz": served})
	root, disks := testRoot(t, "vda")
	wrong := sha256Of([]byte("another image"))

	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img.gz", ImageChecksum: wrong})
	require.False(t, rep.Succeeded)
	assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason)
	assert.Contains(t, rep.Message, "image digest "+sha256Of(served)+" does not match imageChecksum "+wrong)
	assert.Equal(t, sha256Of(served), rep.ServedDigest)
	assert.True(t, rep.WipedAfterFailure, rep.Message)
	assert.Contains(t, rep.Message, "vda was wiped again (erase)")
	assert.Empty(t, rep.ConfigDrive)
	requireWipedEnds(t, root, "vda")
	_, err := configdrive.Read(wipe.DevicePath(root, "vda"))
	assert.Error(t, err, "no config drive")
}

func TestChecksumMismatchWipesWithThePolicy(t *testing.T) {
	img := testImage()
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	root, disks := testRoot(t, "vda")
	rep := runWith(t, context.Background(), Options{Root: root, Disks: disks, WipePolicy: metalv1alpha1.WipeZero,
		Install: ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha512Of([]byte("x"))}})
	assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason)
	assert.Equal(t, sha512Of(img), rep.ServedDigest, "the served digest uses the checksum's algorithm")
	assert.True(t, rep.WipedAfterFailure)
	requireUntouched(t, root, "vda") // zeroed whole
}

func TestUnreachableImagesLeaveTheDiskUntouched(t *testing.T) {
	srv, ts := serveFiles(t, map[string][]byte{})
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/missing.img?X-Amz-Signature=s3cr3t", ImageChecksum: sha256Of(nil)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, ts.URL+"/missing.img")
	assert.Contains(t, rep.Message, "404 Not Found")
	assert.NotContains(t, rep.Message, "s3cr3t", "a signed URL's query stays out of the report")
	assert.False(t, rep.WipedAfterFailure)
	assert.Empty(t, rep.Disk)
	assert.Equal(t, 1, srv.count("/missing.img"), "a 4xx is not retried")
	requireUntouched(t, root, "vda")

	forbidden := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	rep = run(t, root, disks, ignition.Install{Image: startServer(t, forbidden) + "/x", ImageChecksum: sha256Of(nil)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, "403 Forbidden")
	requireUntouched(t, root, "vda")
}

func TestServerErrorsAreRetriedBeforeTheBodyStarts(t *testing.T) {
	img := testImage()
	var requests atomic.Int32
	flaky := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch requests.Add(1) {
		case 1:
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case 2:
			panic(http.ErrAbortHandler) // a dropped connection
		default:
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(img))
		}
	})
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: startServer(t, flaky) + "/os.img", ImageChecksum: sha256Of(img)})
	require.True(t, rep.Succeeded, rep.Message)
	assert.Equal(t, int32(3), requests.Load())

	requests.Store(0)
	down := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "down", http.StatusBadGateway)
	})
	root, disks = testRoot(t, "vda")
	rep = run(t, root, disks, ignition.Install{Image: startServer(t, down) + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, "502 Bad Gateway (after 4 attempts)")
	assert.Equal(t, int32(HTTPAttempts), requests.Load())
	requireUntouched(t, root, "vda")
}

func TestABrokenDownloadFailsAndWipes(t *testing.T) {
	img := testImage()
	truncated := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img)))
		_, _ = w.Write(img[:len(img)/2])
		panic(http.ErrAbortHandler)
	})
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: startServer(t, truncated) + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, "after 2097152 bytes")
	assert.True(t, rep.WipedAfterFailure)
	requireWipedEnds(t, root, "vda")
}

func TestTimeouts(t *testing.T) {
	defer func(h, s time.Duration) { HeaderTimeout, StallTimeout = h, s }(HeaderTimeout, StallTimeout)
	HeaderTimeout = 50 * time.Millisecond
	img := testImage()

	var requests atomic.Int32
	silent := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		<-r.Context().Done()
	})
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: startServer(t, silent) + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, "no response within 50ms")
	assert.Equal(t, int32(HTTPAttempts), requests.Load(), "no headers: retried")
	requireUntouched(t, root, "vda")

	// Headers at once, half the body, then nothing.
	HeaderTimeout, StallTimeout = 10*time.Second, 500*time.Millisecond
	stalled := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(img)))
		_, _ = w.Write(img[:len(img)/2])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	rep = run(t, root, disks, ignition.Install{Image: startServer(t, stalled) + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
	assert.Contains(t, rep.Message, "no data for 500ms")
	assert.True(t, rep.WipedAfterFailure)
	requireWipedEnds(t, root, "vda")
}

func TestUnsupportedFormatsWriteNothing(t *testing.T) {
	head := func(off int, magic string) []byte {
		b := make([]byte, 64<<10)
		copy(b[off:], magic)
		return b
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"qcow2":         {head(0, "QFI\xfb\x00\x00\x00\x03"), "a qcow2 image"},
		"qcow2 gzipped": {compress(t, "gzip", head(0, "QFI\xfb\x00\x00\x00\x03")), "gzip-compressed a qcow2 image"},
		"qcow2 zstd":    {compress(t, "zstd", head(0, "QFI\xfb")), "zstd-compressed a qcow2 image"},
		"vmdk sparse":   {head(0, "KDMV"), "a VMDK image"},
		"vmdk text":     {head(0, "# Disk DescriptorFile\nversion=1"), "a VMDK image"},
		"vhdx":          {head(0, "vhdxfile"), "a VHDX image"},
		"vdi":           {head(0x40, "\x7f\x10\xda\xbe"), "a VDI image"},
		"vhd":           {head(0, "conectix"), "a VHD image"},
		"iso":           {head(0x8001, "CD001"), "an ISO 9660 CD image"},
		"tar":           {head(257, "ustar\x0000"), "a tar archive"},
		"bzip2":         {head(0, "BZh91AY&SY"), "bzip2-compressed"},
		"twice":         {compress(t, "gzip", compress(t, "xz", testImage()[:64<<10])), "compressed twice (xz inside)"},
		"empty":         {nil, "is empty"},
		"empty gzip":    {compress(t, "gzip", nil), "is empty"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, ts := serveFiles(t, map[string][]byte{"/image": tc.data})
			root, disks := testRoot(t, "vda")
			rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/image", ImageChecksum: sha256Of(tc.data)})
			assert.Equal(t, metalv1alpha1.InstallReasonFormatUnsupported, rep.Reason)
			assert.Contains(t, rep.Message, tc.want)
			if !strings.Contains(name, "empty") && name != "bzip2" && name != "twice" {
				assert.Contains(t, rep.Message, "convert it to raw (qemu-img convert -O raw)")
			}
			assert.False(t, rep.WipedAfterFailure)
			assert.Zero(t, rep.Bytes)
			requireUntouched(t, root, "vda")
		})
	}
}

func TestCorruptCompressedDataIsAChecksumMismatch(t *testing.T) {
	img := testImage()
	served := compress(t, "gzip", img)
	good := sha256Of(served)
	damaged := bytes.Clone(served)
	damaged[len(damaged)/2] ^= 0xff
	_, ts := serveFiles(t, map[string][]byte{"/os.img.gz": damaged})
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img.gz", ImageChecksum: good})
	assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason)
	assert.Contains(t, rep.Message, "image digest "+sha256Of(damaged)+" does not match imageChecksum "+good)
	requireWipedEnds(t, root, "vda")

	// With the checksum of the damaged bytes, the data itself is refused.
	rep = run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img.gz", ImageChecksum: sha256Of(damaged)})
	assert.Equal(t, metalv1alpha1.InstallReasonFormatUnsupported, rep.Reason)
	assert.Contains(t, rep.Message, "is not valid gzip data")
}

func TestImageLargerThanTheDisk(t *testing.T) {
	big := make([]byte, diskBytes+mib)
	copy(big, testImage())
	gz, zst := compress(t, "gzip", big), compress(t, "zstd", big)
	_, ts := serveFiles(t, map[string][]byte{"/big.img": big, "/big.img.gz": gz, "/big.img.zst": zst})

	// Served raw with its length: refused before anything is written.
	root, disks := testRoot(t, "vda")
	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/big.img", ImageChecksum: sha256Of(big),
		RootDeviceHints: &metalv1alpha1.RootDeviceHints{DeviceName: "vda"}})
	assert.Equal(t, metalv1alpha1.InstallReasonImageTooLarge, rep.Reason)
	assert.Contains(t, rep.Message, "larger than vda")
	assert.False(t, rep.WipedAfterFailure)
	requireUntouched(t, root, "vda")

	// Without hints, no disk is chosen at all.
	rep = run(t, root, disks, ignition.Install{Image: ts.URL + "/big.img", ImageChecksum: sha256Of(big)})
	assert.Equal(t, metalv1alpha1.InstallReasonImageTooLarge, rep.Reason)
	assert.Contains(t, rep.Message, "no disk of known size holds the image's 17825792 bytes")
	requireUntouched(t, root, "vda")

	// Compressed, the size shows only while writing: the disk is wiped again.
	for path, served := range map[string][]byte{"/big.img.gz": gz, "/big.img.zst": zst} {
		rep = run(t, root, disks, ignition.Install{Image: ts.URL + path, ImageChecksum: sha256Of(served)})
		assert.Equal(t, metalv1alpha1.InstallReasonImageTooLarge, rep.Reason, path)
		assert.Contains(t, rep.Message, "the image is larger than vda (16777216 bytes)")
		assert.True(t, rep.WipedAfterFailure)
		assert.Equal(t, int64(diskBytes), rep.Bytes)
		requireWipedEnds(t, root, "vda")
	}
}

func TestHintsChooseTheDisk(t *testing.T) {
	img := testImage()
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	in := ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(img)}

	t.Run("no match", func(t *testing.T) {
		root, disks := testRoot(t, "sda", "sdb")
		in := in
		in.RootDeviceHints = &metalv1alpha1.RootDeviceHints{SerialNumber: "s-sdz"}
		rep := run(t, root, disks, in)
		assert.Equal(t, metalv1alpha1.InstallReasonNoMatchingDisk, rep.Reason)
		assert.Contains(t, rep.Message, `sda: serialNumber is "s-sda", not "s-sdz"`)
		assert.Contains(t, rep.Message, `sdb: serialNumber is "s-sdb", not "s-sdz"`)
		assert.Empty(t, rep.Disk)
		requireUntouched(t, root, "sda")
		requireUntouched(t, root, "sdb")
	})
	t.Run("several", func(t *testing.T) {
		root, disks := testRoot(t, "sda", "sdb", "sdc")
		disks[2].Model = "Other"
		disks[0].Model, disks[1].Model = "Samsung PM893", "Samsung PM893"
		in := in
		in.RootDeviceHints = &metalv1alpha1.RootDeviceHints{Model: "Samsung"}
		rep := run(t, root, disks, in)
		assert.Equal(t, metalv1alpha1.InstallReasonSeveralDisksMatch, rep.Reason)
		assert.Contains(t, rep.Message, "match 2 disks")
		assert.Contains(t, rep.Message, `sda (serial "s-sda"`)
		assert.Contains(t, rep.Message, `sdb (serial "s-sdb"`)
		for _, name := range []string{"sda", "sdb", "sdc"} {
			requireUntouched(t, root, name)
		}
	})
	t.Run("one", func(t *testing.T) {
		root, disks := testRoot(t, "sda", "nvme0n1")
		in := in
		in.RootDeviceHints = &metalv1alpha1.RootDeviceHints{DeviceName: "/dev/nvme0n1"}
		rep := run(t, root, disks, in)
		require.True(t, rep.Succeeded, rep.Message)
		assert.Equal(t, "nvme0n1", rep.Disk)
		assert.Equal(t, "nvme0n1p2", rep.ConfigDrive)
		requireImage(t, readDisk(t, root, "nvme0n1"), img)
		requireUntouched(t, root, "sda")
	})
}

func TestConfigDriveFailureWipes(t *testing.T) {
	// Not a partitioned image: no partition table to add the config drive to.
	noTable := bytes.Repeat([]byte{0x5a, 0xa5, 0x3c}, mib)
	_, ts := serveFiles(t, map[string][]byte{"/os.img": noTable})
	root, disks := testRoot(t, "vda")
	rep := runWith(t, context.Background(), Options{Root: root, Disks: disks,
		Install: ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(noTable)}, UserData: userData})
	assert.Equal(t, metalv1alpha1.InstallReasonConfigDriveFailed, rep.Reason)
	assert.Equal(t, sha256Of(noTable), rep.WrittenDigest, "the image itself was written and verified")
	assert.True(t, rep.WipedAfterFailure)
	requireWipedEnds(t, root, "vda")

	root, disks = testRoot(t, "vda")
	rep = runWith(t, context.Background(), Options{Root: root, Disks: disks,
		Install:  ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(noTable)},
		UserData: make([]byte, metalv1alpha1.MaxUserDataBytes+1)})
	assert.Equal(t, metalv1alpha1.InstallReasonConfigDriveFailed, rep.Reason)
	assert.Contains(t, rep.Message, "the user data is 262145 bytes")
	requireUntouched(t, root, "vda")
}

func TestInterruptedInstallWipes(t *testing.T) {
	img := make([]byte, 12*mib)
	copy(img, testImage())
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	root, disks := testRoot(t, "vda")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep := runWith(t, ctx, Options{Root: root, Disks: disks, WipePolicy: metalv1alpha1.WipeZero,
		Install:  ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(img)},
		Progress: func(int64, int64) { cancel() }, // the first chunk is a tenth: reported at once
	})
	assert.Equal(t, metalv1alpha1.InstallReasonInstallInterrupted, rep.Reason)
	assert.Contains(t, rep.Message, "interrupted after writing 4194304 bytes")
	assert.Contains(t, rep.Message, "metadata instead of zero")
	assert.True(t, rep.WipedAfterFailure)
	assert.Equal(t, int64(ChunkBytes), rep.Bytes)
	requireWipedEnds(t, root, "vda")
}

func TestVerifyFailed(t *testing.T) {
	img := testImage()
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	root, disks := testRoot(t, "vda")
	beforeVerify = func(dev string) {
		f, err := os.OpenFile(dev, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0xee}, 3*mib)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	defer func() { beforeVerify = nil }()
	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonVerifyFailed, rep.Reason)
	assert.Contains(t, rep.Message, "but "+sha256Of(img)+" was written")
	assert.NotEqual(t, sha256Of(img), rep.WrittenDigest)
	assert.NotEmpty(t, rep.WrittenDigest)
	assert.True(t, rep.WipedAfterFailure)
	requireWipedEnds(t, root, "vda")
}

func TestMissingDeviceIsNeverCreated(t *testing.T) {
	img := testImage()
	_, ts := serveFiles(t, map[string][]byte{"/os.img": img})
	root, disks := testRoot(t, "vda")
	require.NoError(t, os.Remove(wipe.DevicePath(root, "vda")))
	rep := run(t, root, disks, ignition.Install{Image: ts.URL + "/os.img", ImageChecksum: sha256Of(img)})
	assert.Equal(t, metalv1alpha1.InstallReasonWriteFailed, rep.Reason)
	assert.Contains(t, rep.Message, "no such file")
	assert.NoFileExists(t, wipe.DevicePath(root, "vda"))
}

func TestBadReferences(t *testing.T) {
	root, disks := testRoot(t, "vda")
	for _, tc := range []struct {
		image, checksum, reason string
	}{
		{"ftp://host/os.img", sha256Of(nil), metalv1alpha1.InstallReasonImageUnreachable},
		{"http://127.0.0.1:1/os.img", "", metalv1alpha1.InstallReasonChecksumMismatch},
		{"http://127.0.0.1:1/os.img", "md5:0123", metalv1alpha1.InstallReasonChecksumMismatch},
		{"https://127.0.0.1:1/os.img", "SHA256:" + strings.Repeat("0", 64), metalv1alpha1.InstallReasonChecksumMismatch},
		{"http://127.0.0.1:1/os.img", sha256Of(nil), metalv1alpha1.InstallReasonImageUnreachable}, // connection refused
		{"oci://Not A Reference", "", metalv1alpha1.InstallReasonImageUnreachable},
		{"oci://127.0.0.1:1/disk/image:v1", sha256Of(nil)[:20], metalv1alpha1.InstallReasonChecksumMismatch},
		{"oci://127.0.0.1:1/disk/image:v1", "", metalv1alpha1.InstallReasonImageUnreachable},
	} {
		rep := run(t, root, disks, ignition.Install{Image: tc.image, ImageChecksum: tc.checksum})
		assert.Equal(t, tc.reason, rep.Reason, "%s %s: %s", tc.image, tc.checksum, rep.Message)
	}
	requireUntouched(t, root, "vda")
}

func TestRunNeverPanics(t *testing.T) {
	panicky := &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) { panic("boom") })}
	rep := Run(context.Background(), Options{HTTPClient: panicky, Install: ignition.Install{Image: "http://x/os.img", ImageChecksum: sha256Of(nil)}})
	assert.False(t, rep.Succeeded)
	assert.Equal(t, metalv1alpha1.InstallReasonWriteFailed, rep.Reason)
	assert.Contains(t, rep.Message, "internal error: boom")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestErrorType(t *testing.T) {
	_, err := SelectDisk(nil, nil, 0)
	var ie *Error
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, metalv1alpha1.InstallReasonNoMatchingDisk, ie.Reason)
	assert.Equal(t, ie.Reason+": "+ie.Message, err.Error())
}
