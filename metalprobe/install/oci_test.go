package install

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// The media types this package documents for image artifacts.
const (
	mediaTypeRawGzip = types.MediaType(MediaTypeRawGzip)
	mediaTypeRaw     = types.MediaType(MediaTypeRaw)
	mediaTypeConfig  = types.MediaType(MediaTypeConfig)
)

// ociRegistry is go-containerregistry's in-process registry, whose blob responses can be
// damaged on the way out.
type ociRegistry struct {
	handler http.Handler
	corrupt string // a blob digest whose responses get one byte flipped
}

func (o *ociRegistry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o.corrupt != "" && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/blobs/"+o.corrupt) {
		w = &flippingWriter{ResponseWriter: w, at: 100}
	}
	o.handler.ServeHTTP(w, r)
}

// flippingWriter flips the bits of the body byte at offset at.
type flippingWriter struct {
	http.ResponseWriter
	at, written int
}

func (f *flippingWriter) Write(b []byte) (int, error) {
	if f.at >= f.written && f.at < f.written+len(b) {
		b = append([]byte(nil), b...)
		b[f.at-f.written] ^= 0xff
	}
	f.written += len(b)
	return f.ResponseWriter.Write(b)
}

func startRegistry(t *testing.T) (*ociRegistry, string) {
	t.Helper()
	reg := &ociRegistry{handler: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	return reg, strings.TrimPrefix(srv.URL, "http://")
}

// pushArtifact pushes an artifact with one layer per blob to host/disk/image:tag and returns
// the layers' digests and the manifest's.
func pushArtifact(t *testing.T, host, tag string, mediaType types.MediaType, blobs ...[]byte) ([]v1.Hash, v1.Hash) {
	t.Helper()
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, mediaTypeConfig)
	var digests []v1.Hash
	for _, blob := range blobs {
		layer := static.NewLayer(blob, mediaType)
		d, err := layer.Digest()
		require.NoError(t, err)
		digests = append(digests, d)
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, MediaType: mediaType})
		require.NoError(t, err)
	}
	ref, err := name.ParseReference(host+"/disk/image:"+tag, name.Insecure)
	require.NoError(t, err)
	require.NoError(t, remote.Write(ref, img))
	manifest, err := img.Digest()
	require.NoError(t, err)
	return digests, manifest
}

func TestInstallsAnOCIArtifact(t *testing.T) {
	img := testImage()
	gz := compress(t, "gzip", img)
	_, host := startRegistry(t)
	layers, manifest := pushArtifact(t, host, "v1", mediaTypeRawGzip, gz)
	require.Equal(t, sha256Of(gz), layers[0].String())

	for name, in := range map[string]ignition.Install{
		"by tag":           {Image: "oci://" + host + "/disk/image:v1"},
		"by tag, checksum": {Image: "oci://" + host + "/disk/image:v1", ImageChecksum: layers[0].String()},
		"by digest":        {Image: "oci://" + host + "/disk/image@" + manifest.String()},
	} {
		t.Run(name, func(t *testing.T) {
			root, disks := testRoot(t, "vda")
			rep := runWith(t, context.Background(), Options{Root: root, Disks: disks, Install: in, UserData: userData})
			require.True(t, rep.Succeeded, "%s: %s", rep.Reason, rep.Message)
			assert.Equal(t, layers[0].String(), rep.ServedDigest)
			assert.Equal(t, sha256Of(img), rep.WrittenDigest)
			assert.Equal(t, int64(len(img)), rep.Bytes)
			requireImage(t, readDisk(t, root, "vda"), img)
			got, err := configdrive.Read(wipe.DevicePath(root, "vda"))
			require.NoError(t, err)
			assert.Equal(t, userData, got.UserData)
		})
	}

	t.Run("uncompressed layer", func(t *testing.T) {
		layers, _ := pushArtifact(t, host, "raw", mediaTypeRaw, img)
		root, disks := testRoot(t, "vda")
		var total int64
		rep := runWith(t, t.Context(), Options{Root: root, Disks: disks, Install: ignition.Install{Image: "oci://" + host + "/disk/image:raw"},
			Progress: func(_, tot int64) { total = tot }})
		require.True(t, rep.Succeeded, rep.Message)
		assert.Equal(t, layers[0].String(), rep.ServedDigest)
		assert.Equal(t, int64(len(img)), total, "an uncompressed layer's size is the image's")
		requireImage(t, readDisk(t, root, "vda"), img)
	})
}

func TestOCIRefusals(t *testing.T) {
	img := testImage()
	gz := compress(t, "gzip", img)
	reg, host := startRegistry(t)
	layers, _ := pushArtifact(t, host, "v1", mediaTypeRawGzip, gz)
	pushArtifact(t, host, "two", mediaTypeRawGzip, gz, compress(t, "zstd", img))

	t.Run("wrong checksum", func(t *testing.T) {
		root, disks := testRoot(t, "vda")
		wrong := sha256Of(img)
		rep := run(t, root, disks, ignition.Install{Image: "oci://" + host + "/disk/image:v1", ImageChecksum: wrong})
		assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason)
		assert.Contains(t, rep.Message, "image digest "+layers[0].String())
		assert.Contains(t, rep.Message, "does not match imageChecksum "+wrong)
		assert.False(t, rep.WipedAfterFailure, "known before writing")
		requireUntouched(t, root, "vda")
	})
	t.Run("two layers", func(t *testing.T) {
		root, disks := testRoot(t, "vda")
		rep := run(t, root, disks, ignition.Install{Image: "oci://" + host + "/disk/image:two"})
		assert.Equal(t, metalv1alpha1.InstallReasonFormatUnsupported, rep.Reason)
		assert.Contains(t, rep.Message, "has 2 layers")
		requireUntouched(t, root, "vda")
	})
	t.Run("unknown tag", func(t *testing.T) {
		root, disks := testRoot(t, "vda")
		rep := run(t, root, disks, ignition.Install{Image: "oci://" + host + "/disk/image:v9"})
		assert.Equal(t, metalv1alpha1.InstallReasonImageUnreachable, rep.Reason)
		assert.Contains(t, rep.Message, "404")
		requireUntouched(t, root, "vda")
	})
	t.Run("corrupted blob", func(t *testing.T) {
		reg.corrupt = layers[0].String()
		defer func() { reg.corrupt = "" }()
		for _, checksum := range []string{"", layers[0].String()} {
			root, disks := testRoot(t, "vda")
			rep := run(t, root, disks, ignition.Install{Image: "oci://" + host + "/disk/image:v1", ImageChecksum: checksum})
			assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason, rep.Message)
			assert.Contains(t, rep.Message, "does not match the layer digest in the manifest "+layers[0].String())
			assert.NotEqual(t, layers[0].String(), rep.ServedDigest)
			assert.True(t, rep.WipedAfterFailure)
			requireWipedEnds(t, root, "vda")
		}
	})
	t.Run("corrupted raw blob", func(t *testing.T) {
		rawLayers, _ := pushArtifact(t, host, "raw", mediaTypeRaw, img)
		reg.corrupt = rawLayers[0].String()
		defer func() { reg.corrupt = "" }()
		root, disks := testRoot(t, "vda")
		rep := run(t, root, disks, ignition.Install{Image: "oci://" + host + "/disk/image:raw"})
		assert.Equal(t, metalv1alpha1.InstallReasonChecksumMismatch, rep.Reason, rep.Message)
		assert.Contains(t, rep.Message, rawLayers[0].String())
		assert.True(t, rep.WipedAfterFailure)
		requireWipedEnds(t, root, "vda")
	})
}

func TestLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1:5000": true, "127.1.2.3": true, "localhost:5000": true, "LOCALHOST": true, "[::1]:5000": true,
		"10.0.0.1:5000": false, "registry.example:443": false, "quay.io": false,
	} {
		assert.Equal(t, want, isLoopback(host), host)
	}
}
