package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/ociimage"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// TestImagesAreReproducible builds every image twice, as make images and make catalog do, and
// gets the same digests: the same sources give the same images. Under make test the first
// build is make's own (IRONFLEET_IMAGES_DIR, built from this tree just before the tests, with
// the references its images.json names), and the test builds each image once more; run alone,
// it builds both.
func TestImagesAreReproducible(t *testing.T) {
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	probe := os.Getenv("IRONFLEET_PROBE_DIR") // set by the Makefile
	if probe == "" {
		probe = filepath.Join(root, "bin", "probe")
	}
	_, err = os.Stat(filepath.Join(probe, "vmlinuz"))
	require.NoError(t, err, "the probe's boot image is built by make probe-image (make test does it first)")
	t.Chdir(root)

	opm, probeBin, olmDir := tool(t, "opm-*"), tool(t, "grpc_health_probe-*"), tool(t, "olm-*")

	refs := map[string]string{
		"manager": "example.dev/ironfleet/manager:v0.0.1", "capi-provider": "example.dev/ironfleet/capi-provider:v0.0.1",
		"boot-service": "example.dev/ironfleet/boot-service:v0.0.1", "bundle": "example.dev/ironfleet/bundle:v0.0.1",
		"catalog": "example.dev/ironfleet/catalog:v0.0.1", "pause": "example.dev/ironfleet/pause:v0.0.1", "olm": "example.dev/ironfleet/olm:v0.0.1",
	}
	var made map[string]ociimage.Written
	if dir := os.Getenv("IRONFLEET_IMAGES_DIR"); dir != "" { // set by the Makefile
		data, err := os.ReadFile(filepath.Join(dir, "images.json"))
		require.NoError(t, err, "make images, test-images and catalog write images.json (make test runs them first)")
		require.NoError(t, json.Unmarshal(data, &made))
		require.Len(t, made, len(refs), "make's images.json names every image")
		for image := range refs {
			require.Contains(t, made, image, "make's images.json")
			refs[image] = made[image].Ref
		}
	}
	// As make does: the images first, then the catalog, which names the bundle by the digest
	// the first run recorded in images.json; with make's command, not inside this test binary,
	// whose race detector would make compressing half a gigabyte of layers several times slower.
	build := func() map[string]ociimage.Written {
		out := t.TempDir()
		for _, images := range []string{"manager,capi-provider,boot-service,bundle,pause,olm", "catalog"} {
			cmd := exec.Command("go", "run", "./internal/ociimage/cmd/build-images", "-out", out, "-probe-dir", probe, "-images", images,
				"-manager-ref", refs["manager"], "-capi-provider-ref", refs["capi-provider"], "-boot-service-ref", refs["boot-service"],
				"-bundle-ref", refs["bundle"], "-catalog-ref", refs["catalog"],
				"-pause-ref", refs["pause"], "-olm-ref", refs["olm"], "-olm-dir", olmDir,
				"-opm", opm, "-grpc-health-probe", probeBin)
			output, err := cmd.CombinedOutput()
			require.NoError(t, err, "build-images -images %s: %s", images, output)
		}
		data, err := os.ReadFile(filepath.Join(out, "images.json"))
		require.NoError(t, err)
		var written map[string]ociimage.Written
		require.NoError(t, json.Unmarshal(data, &written))
		return written
	}
	first := made
	if first == nil {
		first = build()
	}
	second := build()
	require.Len(t, first, 7)
	for image, w := range first {
		assert.Equal(t, w.Digest, second[image].Digest, "%s: the same digest twice", image)
		idx, err := layout.ImageIndexFromPath(w.Layout)
		require.NoError(t, err, image)
		m, err := idx.IndexManifest()
		require.NoError(t, err, image)
		assert.Equal(t, w.Digest, m.Manifests[0].Digest.String(), "%s: the layout holds the image", image)
	}

	// What each image holds, and who it runs as.
	for image, want := range map[string]struct {
		files []string
		user  string
	}{
		"manager":       {[]string{"manager", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"}, "65532:65532"},
		"capi-provider": {[]string{"capi-provider", "etc/ssl/certs/ca-certificates.crt", "etc/passwd"}, "65532:65532"},
		"boot-service":  {[]string{"boot-service", "usr/lib/ipxe/undionly.kpxe", "usr/lib/ipxe/snponly.efi", "probe/vmlinuz", "probe/initramfs.cpio.gz", "probe/probe.iso", "probe/probe-iso.json"}, "65532:65532"},
		"bundle":        {[]string{"manifests/ironfleet.clusterserviceversion.yaml", "metadata/annotations.yaml"}, ""},
		"pause":         {[]string{"pause"}, "65535:65535"},
		"olm":           {[]string{"bin/olm", "bin/catalog", "bin/cpb", "bin/cp"}, "65532:65532"},
		"catalog":       {[]string{"bin/opm", "bin/grpc_health_probe", "configs/ironfleet/bundle.yaml", "configs/ironfleet/channels.yaml", "configs/ironfleet/package.yaml", "tmp"}, "65532:65532"},
	} {
		img := load(t, first[image])
		cfg, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, want.user, cfg.Config.User, image)
		files := filesOf(t, img)
		for _, f := range want.files {
			assert.Contains(t, files, f, image)
		}
		if image == "bundle" {
			assert.Equal(t, "ironfleet", cfg.Config.Labels["operators.operatorframework.io.bundle.package.v1"], "labelled as its metadata says")
		}
		if image == "catalog" {
			assert.Equal(t, []string{"/bin/opm"}, cfg.Config.Entrypoint)
			assert.Equal(t, "/configs", cfg.Config.Labels["operators.operatorframework.io.index.configs.v1"])
		}
	}
}

// tool is a tool the Makefile builds into the tools cache (make test builds them first).
func tool(t *testing.T, pattern string) string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(testenv.ToolsDir(), pattern))
	require.NotEmpty(t, found, "%s is not built in %s: make test builds it", pattern, testenv.ToolsDir())
	sort.Strings(found)
	return found[len(found)-1]
}

func load(t *testing.T, w ociimage.Written) v1.Image {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(w.Layout)
	require.NoError(t, err)
	h, err := v1.NewHash(w.Digest)
	require.NoError(t, err)
	img, err := idx.Image(h)
	require.NoError(t, err)
	return img
}

func filesOf(t *testing.T, img v1.Image) []string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names
		}
		require.NoError(t, err)
		names = append(names, hdr.Name)
	}
}
