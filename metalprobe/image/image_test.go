package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"
)

func TestKernelPin(t *testing.T) {
	pin := DefaultKernelPin()
	assert.Equal(t, "6.1.0-56-amd64", pin.Release())
	assert.Equal(t, "linux-image-6.1.0-56-amd64=6.1.192-2", pin.String())

	_, err := ParseKernelPin("# only a comment\n")
	assert.Error(t, err)
	_, err = ParseKernelPin("linux-image-x\n")
	assert.ErrorContains(t, err, "want")
	_, err = ParseKernelPin("linux-headers-x 1\n")
	assert.ErrorContains(t, err, "not a linux-image")
	pin, err = ParseKernelPin("\n# c\n  linux-image-6.1.0-9-amd64   1:6.1.27-1 \n")
	require.NoError(t, err)
	assert.Equal(t, "linux-image-6.1.0-9-amd64_1%3a6.1.27-1_amd64.deb", pin.debName())
}

func TestParseModinfo(t *testing.T) {
	info := parseModinfo([]byte("license=GPL\x00depends=virtio,virtio_ring\x00softdep=pre: crc32c post: foo\x00alias=a\x00alias=b\x00name=virtio_blk\x00\x00"))
	assert.Equal(t, []string{"virtio_blk"}, info["name"])
	assert.Equal(t, []string{"a", "b"}, info["alias"])
	assert.Equal(t, []string{"crc32c", "virtio", "virtio_ring"}, dependsOf(info))
	assert.Empty(t, dependsOf(parseModinfo([]byte("depends=\x00"))))
}

func TestModuleName(t *testing.T) {
	assert.Equal(t, "virtio_rng", moduleName("kernel/drivers/char/hw_random/virtio-rng.ko"))
	assert.Equal(t, "nvme_core", moduleName("nvme-core.ko"))
	assert.Equal(t, "ahci", moduleName("kernel/drivers/ata/ahci.ko"))
}

func TestTopoSortPutsDependenciesFirstDeterministically(t *testing.T) {
	mods := map[string]*Module{
		"virtio_net":   {Name: "virtio_net", Depends: []string{"virtio_ring", "virtio", "net_failover"}},
		"net_failover": {Name: "net_failover", Depends: []string{"failover"}},
		"failover":     {Name: "failover"},
		"virtio":       {Name: "virtio", Depends: []string{"virtio_ring"}},
		"virtio_ring":  {Name: "virtio_ring"},
		"ahci":         {Name: "ahci", Depends: []string{"libahci", "libata"}},
		"libahci":      {Name: "libahci", Depends: []string{"libata"}},
		"libata":       {Name: "libata"},
	}
	var want []string
	for i := 0; i < 20; i++ {
		order, err := topoSort(mods)
		require.NoError(t, err)
		var names []string
		for _, m := range order {
			names = append(names, m.Name)
		}
		if want == nil {
			want = names
		}
		assert.Equal(t, want, names, "the same modules always give the same order")
	}
	assert.Equal(t, []string{"libata", "libahci", "ahci", "failover", "net_failover", "virtio_ring", "virtio", "virtio_net"}, want)

	mods["virtio_ring"].Depends = []string{"virtio_net"}
	_, err := topoSort(mods)
	assert.ErrorContains(t, err, "cycle")
}

func TestInitramfsRecordsAreSortedWithParentsAndFixedMetadata(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, WriteInitramfs(&buf, []File{
		{Name: "lib/modules/virtio.ko", Mode: 0o644, Data: []byte("ko")},
		{Name: "/init", Mode: 0o755, Data: []byte("#!")},
		{Name: "dev/console", Mode: 0o600, CharDev: &[2]uint64{5, 1}},
		{Name: "proc", Dir: true, Mode: 0o755},
	}))
	recs := readInitramfs(t, buf.Bytes())
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
		assert.Zero(t, r.MTime, r.Name)
		assert.Zero(t, r.UID, r.Name)
		assert.Zero(t, r.GID, r.Name)
	}
	assert.Equal(t, []string{"dev", "dev/console", "init", "lib", "lib/modules", "lib/modules/virtio.ko", "proc"}, names)
	assert.Equal(t, uint64(cpio.S_IFCHR|0o600), recs[1].Mode)
	assert.Equal(t, uint64(5), recs[1].Rmajor)
	assert.Equal(t, uint64(cpio.S_IFREG|0o755), recs[2].Mode)

	err := WriteInitramfs(&buf, []File{{Name: "init", Data: []byte("a")}, {Name: "/init", Data: []byte("b")}})
	assert.ErrorContains(t, err, "twice")
}

// readInitramfs gunzips and reads an archive's records (without the trailer).
func readInitramfs(t *testing.T, gz []byte) []cpio.Record {
	t.Helper()
	raw := gunzip(t, gz)
	recs, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(raw)))
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	require.True(t, bytes.HasSuffix(bytes.TrimRight(raw, "\x00"), []byte(cpio.Trailer)), "the archive ends with a trailer")
	return recs
}

// TestInitramfsBuildsBitIdentically builds the whole image twice into fresh directories and
// compares the bytes (the ISO's too), then checks what the initramfs holds and that it fits the budget.
func TestInitramfsBuildsBitIdentically(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, first := testImage(t) // the build the boot test uses, reused when current
	out := t.TempDir()
	start := time.Now()
	second, built, err := Build(ctx, Options{OutDir: out, ProbeVersion: first.ProbeVersion, Force: true})
	require.NoError(t, err)
	require.True(t, built)
	t.Logf("second build in %s", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, first.Files, second.Files, "two builds of the same sources differ")
	assert.Equal(t, first.ISO, second.ISO, "two builds of the same sources give different ISOs")
	assert.Equal(t, first.SourceDigest, second.SourceDigest)

	assert.LessOrEqual(t, second.TotalBytes, int64(MaxImageBytes), "kernel + initramfs over budget: %s", sizes(second))
	t.Logf("image: %s, %d modules", sizes(second), len(second.Modules))

	data, err := os.ReadFile(filepath.Join(out, InitramfsFile))
	require.NoError(t, err)
	byName := map[string]cpio.Record{}
	for _, r := range readInitramfs(t, data) {
		byName[r.Name] = r
	}
	for _, name := range []string{"init", MetalprobePath, LoadOrderFile, "dev/console", "proc", "sys", "run", "tmp", "etc", ModulesDir + "/virtio_net.ko", ModulesDir + "/ahci.ko", ModulesDir + "/nvme.ko", ModulesDir + "/virtio-rng.ko"} {
		assert.Contains(t, byName, name)
	}
	assert.Len(t, second.Modules, len(byName)-countNonModules(byName))
}

func countNonModules(recs map[string]cpio.Record) int {
	n := 0
	for name := range recs {
		if filepath.Ext(name) != ".ko" {
			n++
		}
	}
	return n
}

func gunzip(t *testing.T, gz []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	require.NoError(t, err)
	assert.True(t, zr.ModTime.IsZero(), "gzip header has no time")
	assert.Empty(t, zr.Name, "gzip header has no name")
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	return raw
}
