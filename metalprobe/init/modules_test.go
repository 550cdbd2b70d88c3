package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLoadOrder(t *testing.T) {
	files, err := parseLoadOrder(strings.NewReader("# written by metalprobe/image\nvirtio_ring.ko\n\n  virtio.ko  \nvirtio-rng.ko\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"virtio_ring.ko", "virtio.ko", "virtio-rng.ko"}, files)
}

func TestParseLoadOrderRefusesPaths(t *testing.T) {
	for _, bad := range []string{"../../etc/passwd.ko", "kernel/drivers/virtio.ko", "virtio.ko.xz", "notes.txt"} {
		_, err := parseLoadOrder(strings.NewReader("ok.ko\n" + bad + "\n"))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "line 2")
	}
}
