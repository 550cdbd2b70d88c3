package earlyboot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLoadOrder(t *testing.T) {
	files, err := ParseLoadOrder(strings.NewReader("# written by metalprobe/image\nvirtio_ring.ko\n\n  virtio.ko  \nvirtio-rng.ko\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"virtio_ring.ko", "virtio.ko", "virtio-rng.ko"}, files)

	files, err = ParseLoadOrder(strings.NewReader("# comment\n\nvirtio.ko\n virtio_pci.ko \n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"virtio.ko", "virtio_pci.ko"}, files)
}

func TestParseLoadOrderRefusesPaths(t *testing.T) {
	for _, bad := range []string{"../../etc/passwd.ko", "kernel/drivers/virtio.ko", "virtio.ko.xz", "notes.txt", "../x.ko", "x.o", "a/b.ko", ".."} {
		_, err := ParseLoadOrder(strings.NewReader("ok.ko\n" + bad + "\n"))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "line 2")
	}
}

// TestLoadModulesReportsWhatItCouldNotLoad: a list that cannot be read loads nothing; a module
// that fails is reported by name and does not stop the rest.
func TestLoadModulesReportsWhatItCouldNotLoad(t *testing.T) {
	dir := t.TempDir()
	_, _, err := LoadModules(filepath.Join(dir, "load-order"))
	assert.ErrorContains(t, err, "reading the module load order")

	order := filepath.Join(dir, "load-order")
	require.NoError(t, os.WriteFile(order, []byte("a.ko\nsub/b.ko\n"), 0o644))
	_, _, err = LoadModules(order)
	assert.ErrorContains(t, err, "reading "+order+": line 2")

	// Neither file is there, so neither reaches finit_module (the test needs no privileges).
	require.NoError(t, os.WriteFile(order, []byte("# two\nmissing-one.ko\nmissing-two.ko\n"), 0o644))
	loaded, failed, err := LoadModules(order)
	require.NoError(t, err)
	assert.Zero(t, loaded)
	require.Len(t, failed, 2)
	assert.ErrorIs(t, failed[0], os.ErrNotExist)
	assert.ErrorContains(t, failed[0], "module missing-one.ko: ")
	assert.ErrorContains(t, failed[1], "module missing-two.ko: ")
}

// TestMountAllGoesOnPastAFailure: every mount is tried and every failure returned. The targets
// cannot be created (their parent is a file), so nothing is mounted, even as root.
func TestMountAllGoesOnPastAFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	err := MountAll([]Mount{
		{"proc", filepath.Join(file, "proc"), "proc", ""},
		{"tmpfs", filepath.Join(file, "run"), "tmpfs", "mode=0755"},
	})
	require.Error(t, err)
	assert.ErrorContains(t, err, "creating "+filepath.Join(file, "proc"))
	assert.ErrorContains(t, err, "creating "+filepath.Join(file, "run"))
	assert.NoError(t, MountAll(nil))
}
