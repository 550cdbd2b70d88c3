package ociimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func spec(t *testing.T, program []byte) Spec {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("certificates"), 0o600))
	return Spec{Ref: "example.dev/ironfleet/test:v1", User: "65532:65532", Entrypoint: []string{"/bin/program"},
		Labels: map[string]string{"a": "b"}, ExposedPorts: []string{"8080/tcp"},
		Files: []File{
			{Path: "/bin/program", Data: program, Mode: 0o755},
			{Path: "/etc/ssl/certs/ca.crt", Source: filepath.Join(dir, "ca.crt")},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		}}
}

// The same files give the same digest (whenever, wherever built); other files another.
func TestBuildIsReproducible(t *testing.T) {
	a, err := Build(spec(t, []byte("program")))
	require.NoError(t, err)
	b, err := Build(spec(t, []byte("program")))
	require.NoError(t, err)
	da, _ := a.Digest()
	db, _ := b.Digest()
	assert.Equal(t, da, db)
	c, err := Build(spec(t, []byte("program!")))
	require.NoError(t, err)
	dc, _ := c.Digest()
	assert.NotEqual(t, da, dc)

	cfg, err := a.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, "65532:65532", cfg.Config.User)
	assert.Equal(t, []string{"/bin/program"}, cfg.Config.Entrypoint)
	assert.Equal(t, Epoch, cfg.Created.Time.UTC())
	assert.Equal(t, "linux", cfg.OS)
	assert.Equal(t, "amd64", cfg.Architecture)
	m, err := a.Manifest()
	require.NoError(t, err)
	assert.Equal(t, "application/vnd.oci.image.manifest.v1+json", string(m.MediaType))
	assert.Equal(t, "application/vnd.oci.image.layer.v1.tar+gzip", string(m.Layers[0].MediaType))
}

// The layer holds each file with its parent directories, in order, root's, stamped with Epoch.
func TestLayerTar(t *testing.T) {
	data, err := layerTar(spec(t, []byte("program")).Files)
	require.NoError(t, err)
	tr := tar.NewReader(bytes.NewReader(data))
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		names = append(names, hdr.Name)
		assert.Equal(t, 0, hdr.Uid)
		assert.True(t, hdr.ModTime.Equal(Epoch), hdr.Name)
		if hdr.Name == "bin/program" {
			assert.Equal(t, int64(0o755), hdr.Mode)
		}
		if hdr.Name == "tmp/" {
			assert.Equal(t, int64(0o1777), hdr.Mode, "an empty directory of its own mode")
		}
		if hdr.Name == "etc/ssl/certs/ca.crt" {
			assert.Equal(t, int64(0o644), hdr.Mode, "no mode given: 0644")
		}
	}
	assert.Equal(t, []string{"bin/", "bin/program", "etc/", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca.crt", "tmp/"}, names)

	_, err = layerTar([]File{{Path: "relative", Data: []byte{}}})
	assert.ErrorContains(t, err, "not an absolute file path")
	_, err = layerTar([]File{{Path: "/a", Data: []byte{}}, {Path: "/a/b", Data: []byte{}}})
	assert.ErrorContains(t, err, "both a file and a directory")
	_, err = layerTar([]File{{Path: "/a", Data: []byte{}}, {Path: "/a", Data: []byte{}}})
	assert.ErrorContains(t, err, "given twice")
	_, err = Build(Spec{Ref: "Not A Reference"})
	assert.ErrorContains(t, err, "image reference")
}

// Write gives an OCI layout naming the image, and a tar of it that is the same bytes each time.
func TestWrite(t *testing.T) {
	img, err := Build(spec(t, []byte("program")))
	require.NoError(t, err)
	dir := t.TempDir()
	w, err := Write(img, "example.dev/ironfleet/test:v1", dir, "test")
	require.NoError(t, err)
	first, err := os.ReadFile(w.Archive)
	require.NoError(t, err)

	idx, err := layout.ImageIndexFromPath(w.Layout)
	require.NoError(t, err)
	m, err := idx.IndexManifest()
	require.NoError(t, err)
	require.Len(t, m.Manifests, 1)
	assert.Equal(t, w.Digest, m.Manifests[0].Digest.String())
	assert.Equal(t, "example.dev/ironfleet/test:v1", m.Manifests[0].Annotations["io.containerd.image.name"])

	_, err = Write(img, "example.dev/ironfleet/test:v1", dir, "test")
	require.NoError(t, err)
	again, err := os.ReadFile(w.Archive)
	require.NoError(t, err)
	assert.Equal(t, first, again, "the archive is reproducible")
}
