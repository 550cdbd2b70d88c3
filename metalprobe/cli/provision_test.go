package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

const (
	smallVMUUID   = "5f3c9b7e-2a41-4d8e-9c1b-7e0f4a6d2b31"
	provisionDisk = 16 << 20 // the fixture's vda file
)

// osImage is a raw MBR disk image of 4 MiB made with go-diskfs: one partition from 1 MiB to the
// end, holding pseudo-random bytes.
var osImage = sync.OnceValue(func() []byte {
	const size = 4 << 20
	dir, err := os.MkdirTemp("", "cli-image-")
	if err != nil {
		panic(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	path := filepath.Join(dir, "os.img")
	d, err := diskfs.Create(path, size, diskfs.SectorSizeDefault)
	if err != nil {
		panic(err)
	}
	if err := d.Partition(&mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{
		{Index: 1, Type: mbr.Linux, Start: 2048, Size: size/512 - 2048},
	}}); err != nil {
		panic(err)
	}
	period := make([]byte, 65521) // prime: any shift shows
	_, _ = rand.NewChaCha8([32]byte{'c', 'l', 'i'}).Read(period)
	content := make([]byte, size-(1<<20))
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
	return data
})

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, err := w.Write(data)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func digest(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// provisionRoot copies small-vm (one disk, vda) and gives vda a patterned device file.
func provisionRoot(t *testing.T) string {
	t.Helper()
	root, err := fixtures.CopyRoot("small-vm", t.TempDir())
	require.NoError(t, err)
	require.NoError(t, fixtures.MakeDiskFiles(root, []string{"vda"}, provisionDisk))
	return root
}

// bootStateRegistry is the registry with its boot state endpoint, and its user data endpoint
// when userData is set: it hands userData to the right token, and refuses any other.
type bootStateRegistry struct {
	registry
	statesMu  sync.Mutex
	states    []map[string]string
	stateAuth []string

	userData     []byte
	userDataAsks []map[string]string
}

func (g *bootStateRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v1/userdata" && r.Method == http.MethodPost {
		g.serveUserData(w, r)
		return
	}
	if r.URL.Path != "/v1/bootstate" {
		g.registry.ServeHTTP(w, r)
		return
	}
	var st map[string]string
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.statesMu.Lock()
	g.states = append(g.states, st)
	g.stateAuth = append(g.stateAuth, r.Header.Get("Authorization"))
	g.statesMu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (g *bootStateRegistry) serveUserData(w http.ResponseWriter, r *http.Request) {
	var ask map[string]string
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ask); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.statesMu.Lock()
	g.userDataAsks = append(g.userDataAsks, ask)
	g.statesMu.Unlock()
	if g.userData == nil || r.Header.Get("Authorization") != "Bearer "+token {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"error":"the token is not for an install boot of server server-1"}`)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(g.userData)
}

func provisionIgnition(t *testing.T, registryURL, systemUUID string, in ignition.Install) string {
	t.Helper()
	data, err := json.Marshal(ignition.Config{RegistryURL: registryURL, Token: token, SystemUUID: systemUUID,
		Mode: ignition.ModeProvision, Install: &in})
	require.NoError(t, err)
	return writeFile(t, "ignition.json", string(data))
}

func serveImage(t *testing.T, path string, data []byte) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(data))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + path
}

func TestProvisionInstallsTheImageAndReports(t *testing.T) {
	img := osImage()
	served := gzipped(t, img)
	imageURL := serveImage(t, "/images/os.img.gz", served)
	userData := []byte("{\"ignition\":{\"version\":\"3.4.0\"},\"passwd\":{\"users\":[{\"name\":\"core\"}]}}\n\x00\xff")
	reg := &bootStateRegistry{userData: userData}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	root := provisionRoot(t)
	ign := provisionIgnition(t, srv.URL, smallVMUUID, ignition.Install{Image: imageURL, ImageChecksum: digest(served),
		UserDataSHA256: ignition.UserDataDigest(userData), Hostname: "node-1", InstanceID: "claim-uid", Server: "server-1"})

	r := runProbe(t, "--root", root, "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "metalprobe: install: installed: wrote 4194304 bytes to vda")
	assert.Contains(t, r.stderr, "metalprobe: install: writing to ")
	assert.Contains(t, r.stderr, "delivered to "+srv.URL)

	require.Len(t, reg.received, 1)
	rep := reg.received[0]
	assert.Equal(t, smallVMUUID, rep.SystemUUID)
	assert.Len(t, rep.Inventory.Storage, 1, "the report carries the inventory too")
	assert.Nil(t, rep.Wipe)
	require.NotNil(t, rep.Install)
	in := rep.Install
	assert.True(t, in.Succeeded, in.Message)
	assert.Equal(t, metalv1alpha1.InstallReasonInstalled, in.Reason)
	assert.Equal(t, imageURL, in.Image)
	assert.Equal(t, digest(served), in.ImageChecksum)
	assert.Equal(t, digest(served), in.ServedDigest)
	assert.Equal(t, digest(img), in.WrittenDigest)
	assert.Equal(t, int64(len(img)), in.Bytes)
	assert.Equal(t, "vda", in.Disk)
	assert.Equal(t, "ironfleet-smallvm-root", in.DiskSerial)
	assert.Equal(t, "vda2", in.ConfigDrive)
	assert.False(t, in.WipedAfterFailure)

	disk, err := os.ReadFile(wipe.DevicePath(root, "vda"))
	require.NoError(t, err)
	require.Len(t, disk, provisionDisk)
	assert.True(t, bytes.Equal(disk[:462], img[:462]), "boot code and partition 1")
	assert.True(t, bytes.Equal(disk[512:len(img)], img[512:]), "the image from sector 1 on")
	assert.True(t, bytes.Equal(disk[len(disk)-1<<20:], make([]byte, 1<<20)), "the last MiB is cleared")
	files, err := configdrive.Read(wipe.DevicePath(root, "vda"))
	require.NoError(t, err)
	assert.Equal(t, userData, files.UserData, "the registry's user data, byte for byte")
	assert.Equal(t, []map[string]string{{"systemUUID": smallVMUUID}}, reg.userDataAsks, "fetched once, naming the host's UUID")
	assert.Equal(t, "node-1", files.Hostname)
	assert.Equal(t, "server-1", files.Server, "meta.server names the Server")

	reg.statesMu.Lock()
	defer reg.statesMu.Unlock()
	require.NotEmpty(t, reg.states, "progress goes to /v1/bootstate")
	for i, st := range reg.states {
		assert.Equal(t, smallVMUUID, st["systemUUID"])
		assert.Equal(t, "Installing", st["state"])
		assert.Equal(t, "Bearer "+token, reg.stateAuth[i])
	}
	assert.Equal(t, "4 MiB written", reg.states[len(reg.states)-1]["message"], "the last progress is posted before the report")
}

// TestProvisionWithoutItsUserDataWritesNothing: user data the registry refuses, or that is not
// what the install was rendered with, fails the install before the disk is touched, and the
// report says why.
func TestProvisionWithoutItsUserDataWritesNothing(t *testing.T) {
	imageURL := serveImage(t, "/images/os.img", osImage())
	for name, tc := range map[string]struct {
		served []byte // nil: the registry refuses
		want   string
	}{
		"refused": {nil, "the claim's user data could not be fetched: fetching user data from "},
		"changed": {[]byte("another tenant's"), "is not the claim's this install was rendered with"},
	} {
		t.Run(name, func(t *testing.T) {
			reg := &bootStateRegistry{userData: tc.served}
			srv := httptest.NewServer(reg)
			defer srv.Close()
			root := provisionRoot(t)
			before, err := os.ReadFile(wipe.DevicePath(root, "vda"))
			require.NoError(t, err)
			ign := provisionIgnition(t, srv.URL, smallVMUUID, ignition.Install{Image: imageURL, ImageChecksum: digest(osImage()),
				UserDataSHA256: ignition.UserDataDigest([]byte("the claim's"))})

			r := runProbe(t, "--root", root, "--ignition", ign)
			require.Equal(t, ExitReportedFailure, r.code, r.stderr)
			require.Len(t, reg.received, 1)
			in := reg.received[0].Install
			require.NotNil(t, in)
			assert.False(t, in.Succeeded)
			assert.Equal(t, metalv1alpha1.InstallReasonConfigDriveFailed, in.Reason)
			assert.Contains(t, in.Message, tc.want)
			assert.NotContains(t, in.Message, token)
			after, err := os.ReadFile(wipe.DevicePath(root, "vda"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(before, after), "nothing is written without the user data")
		})
	}
}

func TestProvisionFailureStillReportsAndExitsThree(t *testing.T) {
	imageURL := serveImage(t, "/images/os.img", osImage())
	reg := &registry{} // no boot state endpoint: posting progress fails, which is not fatal
	srv := httptest.NewServer(reg)
	defer srv.Close()
	root := provisionRoot(t)
	ign := provisionIgnition(t, srv.URL, smallVMUUID, ignition.Install{Image: imageURL + ".missing", ImageChecksum: digest(osImage())})

	r := runProbe(t, "--root", root, "--ignition", ign)
	assert.Equal(t, ExitReportedFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "metalprobe: install: FAILED (ImageUnreachable)")
	assert.Contains(t, r.stderr, "warning: posting boot state")
	assert.Contains(t, r.stderr, "delivered to "+srv.URL, "the operator learns of the failure")
	require.Len(t, reg.received, 1)
	require.NotNil(t, reg.received[0].Install)
	assert.False(t, reg.received[0].Install.Succeeded)
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, reg.received[0].Install.Reason)
	assert.Contains(t, reg.received[0].Install.Message, "404 Not Found")
	checkProvisionDiskUntouched(t, root)

	// A checksum that does not match: written, then wiped again with the ignition's policy.
	ign = provisionIgnition(t, srv.URL, smallVMUUID, ignition.Install{Image: imageURL, ImageChecksum: digest([]byte("other"))})
	r = runProbe(t, "--root", root, "--ignition", ign, "--wipe-policy", "zero")
	assert.Equal(t, ExitReportedFailure, r.code, r.stderr)
	require.Len(t, reg.received, 2)
	in := reg.received[1].Install
	assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, in.Reason)
	assert.True(t, in.WipedAfterFailure)
	assert.Contains(t, in.Message, "vda was wiped again (zero)")
	disk, err := os.ReadFile(wipe.DevicePath(root, "vda"))
	require.NoError(t, err)
	assert.True(t, bytes.Equal(disk, make([]byte, provisionDisk)), "zeroed whole")
}

// TestProvisionTrustsTheInstallsCABundle: an https image whose server's CA only the install's
// caBundle names is refused without it (nothing written) and installed with it.
func TestProvisionTrustsTheInstallsCABundle(t *testing.T) {
	img := osImage()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /os.img", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(img))
	})
	images := httptest.NewTLSServer(mux)
	defer images.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: images.Certificate().Raw}))
	reg := &registry{}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	root := provisionRoot(t)
	in := ignition.Install{Image: images.URL + "/os.img", ImageChecksum: digest(img)}

	r := runProbe(t, "--root", root, "--ignition", provisionIgnition(t, srv.URL, smallVMUUID, in))
	assert.Equal(t, ExitReportedFailure, r.code, r.stderr)
	require.Len(t, reg.received, 1)
	assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, reg.received[0].Install.Reason)
	assert.Contains(t, reg.received[0].Install.Message, "certificate")
	checkProvisionDiskUntouched(t, root)

	in.CABundle = caPEM
	r = runProbe(t, "--root", root, "--ignition", provisionIgnition(t, srv.URL, smallVMUUID, in))
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Len(t, reg.received, 2)
	assert.True(t, reg.received[1].Install.Succeeded, reg.received[1].Install.Message)
	assert.Equal(t, digest(img), reg.received[1].Install.WrittenDigest)
}

func checkProvisionDiskUntouched(t *testing.T, root string) {
	t.Helper()
	disk, err := os.ReadFile(wipe.DevicePath(root, "vda"))
	require.NoError(t, err)
	for off, b := range disk {
		if b != fixtures.DiskPattern(int64(off)) {
			t.Fatalf("vda byte %d was written", off)
		}
	}
}

func TestProvisionDryRunUnderRoot(t *testing.T) {
	img := osImage()
	imageURL := serveImage(t, "/os.img", img)
	root := provisionRoot(t)
	ign := provisionIgnition(t, "", smallVMUUID, ignition.Install{Image: imageURL, ImageChecksum: digest(img),
		RootDeviceHints: &metalv1alpha1.RootDeviceHints{DeviceName: "/dev/vda"}})
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	rep := decodeStrict(t, []byte(r.stdout))
	require.NotNil(t, rep.Install)
	assert.True(t, rep.Install.Succeeded, rep.Install.Message)
	assert.Equal(t, digest(img), rep.Install.ServedDigest)
	assert.Contains(t, r.stderr, "installing: 4 MiB of 4 MiB written")
}

func TestProvisionRefusesAnotherSystemsIgnition(t *testing.T) {
	img := osImage()
	imageURL := serveImage(t, "/os.img", img)
	root := provisionRoot(t)
	ign := provisionIgnition(t, "", "00000000-0000-0000-0000-000000000001", ignition.Install{Image: imageURL, ImageChecksum: digest(img)})
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", ign)
	assert.Equal(t, exitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not installing: ignition is for system 00000000-0000-0000-0000-000000000001")
	rep := decodeStrict(t, []byte(r.stdout))
	require.NotNil(t, rep.Install)
	assert.False(t, rep.Install.Succeeded)
	assert.Contains(t, rep.Install.Message, "not installed: ignition is for system")
	checkProvisionDiskUntouched(t, root)
}

func TestProvisionUsageErrors(t *testing.T) {
	root := provisionRoot(t)
	install := ignition.Install{Image: "https://images.example/os.img", ImageChecksum: digest(nil)}
	withInstall := provisionIgnition(t, "https://registry.example", smallVMUUID, install)
	cases := map[string][]string{
		"mode flag without ignition": {"--root", root, "--dry-run", "--mode", "provision"},
		"ignition without install":   {"--root", root, "--dry-run", "--mode", "provision", "--ignition", writeFile(t, "d.json", `{"mode": "discovery"}`)},
		"provision dry run, live":    {"--dry-run", "--ignition", withInstall},
		"provision dry run, root /":  {"--root", "/", "--dry-run", "--ignition", withInstall},
		"provision, bad wipe policy": {"--root", root, "--dry-run", "--ignition", withInstall, "--wipe-policy", "shred"},
		"provision without a token":  {"--root", root, "--ignition", provisionIgnitionNoToken(t)},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r := runProbe(t, args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	checkProvisionDiskUntouched(t, root)

	// A malformed install section is a file problem.
	bad := writeFile(t, "bad.json", `{"mode": "provision", "install": {"image": "ftp://x/os.img"}}`)
	r := runProbe(t, "--root", root, "--dry-run", "--ignition", bad)
	assert.Equal(t, exitFailure, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not an http://, https:// or oci://")
}

func provisionIgnitionNoToken(t *testing.T) string {
	data, err := json.Marshal(ignition.Config{RegistryURL: "https://registry.example", Mode: ignition.ModeProvision,
		Install: &ignition.Install{Image: "oci://registry.example/os:1"}})
	require.NoError(t, err)
	return writeFile(t, "notoken.json", string(data))
}

func TestBootStatesPostTheNewestAtMostEveryInterval(t *testing.T) {
	defer func(d time.Duration) { bootStateInterval = d }(bootStateInterval)
	bootStateInterval = time.Hour

	var mu sync.Mutex
	var posted []string
	first := make(chan struct{})
	var stderr bytes.Buffer
	b := newBootStates(func(_ context.Context, msg string) error {
		mu.Lock()
		defer mu.Unlock()
		posted = append(posted, msg)
		if len(posted) == 1 {
			close(first)
		}
		if msg == "c" {
			return errors.New("registry down")
		}
		return nil
	}, &syncWriter{w: &stderr})
	b.update("a")
	<-first // posted at once
	b.update("b")
	b.update("c") // within the interval: replaces b
	b.stop()      // the newest is posted before stopping
	assert.Equal(t, []string{"a", "c"}, posted)
	assert.Contains(t, stderr.String(), "warning: registry down", "a failure is logged, not fatal")

	var none *bootStates
	none.update("x") // no registry (--dry-run): nothing to do
	none.stop()
}

func TestProgressMessage(t *testing.T) {
	assert.Equal(t, "31 MiB of 64 MiB written", progressMessage(31<<20, 64<<20))
	assert.Equal(t, "4 MiB written", progressMessage(4<<20, 0))
}

func TestPrefixWriter(t *testing.T) {
	var buf bytes.Buffer
	n, err := io.WriteString(prefixWriter{w: &buf, prefix: "p: "}, "line\n")
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	assert.Equal(t, "p: line\n", buf.String())
}
