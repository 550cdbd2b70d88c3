package image

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSourceDigestCoversItsInputs: the digest is the same for the same inputs and changes with
// each of them, the sources of an imported package of the module included.
func TestSourceDigestCoversItsInputs(t *testing.T) {
	mod := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(mod, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(mod, name), []byte(data), 0o644))
	}
	write("go.mod", "module example.com/m\n\ngo 1.22\n")
	write("cmd/init/main.go", "package main\n\nimport \"example.com/m/lib\"\n\nfunc main() { lib.F() }\n")
	write("lib/lib.go", "package lib\n\nfunc F() {}\n")
	deb := filepath.Join(t.TempDir(), "linux-image.deb")
	require.NoError(t, os.WriteFile(deb, []byte("deb"), 0o644))

	in := SourceInputs{
		ModuleDir: mod,
		Kernel:    KernelPin{Package: "linux-image-6.1.0-1-amd64", Version: "6.1.1-1"},
		Pins:      []string{"version \"v1\""},
		Packages:  []string{"example.com/m/cmd/init"},
	}
	digest := func(in SourceInputs) string {
		t.Helper()
		d, err := SourceDigest(context.Background(), in)
		require.NoError(t, err)
		return d
	}
	base := digest(in)
	assert.Len(t, base, 64)
	assert.Equal(t, base, digest(in), "the same inputs")

	other := in
	other.Kernel.Version = "6.1.1-2"
	assert.NotEqual(t, base, digest(other), "another kernel")
	other = in
	other.Pins = []string{"version \"v2\""}
	assert.NotEqual(t, base, digest(other), "another pin")
	other = in
	other.KernelDeb = deb
	assert.NotEqual(t, base, digest(other), "an explicit kernel package")

	write("lib/lib.go", "package lib\n\nfunc F() { println() }\n")
	assert.NotEqual(t, base, digest(in), "an imported package's source changed")

	in.Packages = []string{"example.com/m/missing"}
	_, err := SourceDigest(context.Background(), in)
	assert.ErrorContains(t, err, "listing the packages of example.com/m/missing")
}

// TestIntact: a file is intact with its recorded size and digest only.
func TestIntact(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a"), []byte("abc"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b"), []byte("def"), 0o644))
	files := []FileDigest{DigestOf("a", []byte("abc")), DigestOf("b", []byte("def"))}
	assert.True(t, Intact(dir, files))
	assert.True(t, Intact(dir, nil))

	assert.False(t, Intact(dir, append(files, DigestOf("c", nil))), "a missing file")
	wrong := DigestOf("b", []byte("deg"))
	assert.False(t, Intact(dir, []FileDigest{files[0], wrong}), "another digest")
	wrong = files[1]
	wrong.Size++
	assert.False(t, Intact(dir, []FileDigest{files[0], wrong}), "another size")
}
