package image

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"

	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
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

func TestPCIAliases(t *testing.T) {
	info := parseModinfo([]byte("alias=pci:v00008086d0000100Esv*sd*bc*sc*i*\x00alias=pci:v*d*sv*sd*bc01sc06i01*\x00alias=pci:v00008086d0000100Esv*sd*bc*sc*i*\x00name=x\x00"))
	assert.Equal(t, []string{"pci:v*d*sv*sd*bc01sc06i01*", "pci:v00008086d0000100Esv*sd*bc*sc*i*"}, pciAliases("x", info), "sorted, once each")
	// mpt3sas's older name and mlx5_core's own auxiliary devices are no device a machine has
	// without their PCI device.
	assert.Equal(t, []string{"pci:v00001000d00000097sv*sd*bc*sc*i*"},
		pciAliases("mpt3sas", parseModinfo([]byte("alias=mpt2sas\x00alias=pci:v00001000d00000097sv*sd*bc*sc*i*\x00"))))
	assert.Equal(t, []string{"pci:v000015B3d00001017sv*sd*bc*sc*i*"},
		pciAliases("mlx5_core", parseModinfo([]byte("alias=auxiliary:mlx5_core.eth\x00alias=pci:v000015B3d00001017sv*sd*bc*sc*i*\x00alias=auxiliary:mlx5_core.eth-rep\x00"))))
	// A device alias of another bus, and the module is not for PCI devices only: it loads
	// always. So does one without any PCI alias.
	for _, modinfo := range []string{
		"alias=pci:v00001AF4d*sv*sd*bc*sc*i*\x00alias=virtio:d00000001v*\x00",
		"alias=usb:v04B4p0BDCd*dc*dsc*dp*ic*isc*ip*in*\x00alias=pci:v000014E4d000043A3sv*sd*bc*sc*i*\x00",
		"alias=pci:v000015B3d00001017sv*sd*bc*sc*i*\x00alias=auxiliary:mlx5_core.eth\x00",
		"alias=pci:v00008086d*sv*sd*bc*sc*i*\x00alias=acpi*:PNP0401:*\x00",
		"alias=scsi:t-0x00*\x00alias=scsi:t-0x07*\x00alias=block-major-8-*\x00",
		"alias=fs-efivarfs\x00",
		"depends=scsi_mod\x00name=sd_mod\x00",
	} {
		assert.Nil(t, pciAliases("x", parseModinfo([]byte(modinfo))), modinfo)
	}
}

// TestLoadOrder writes a load order in the format earlyboot reads back, refuses what it could
// not write unambiguously, and writes the same bytes whatever order lists arrive in.
func TestLoadOrder(t *testing.T) {
	modules := []Module{
		{Name: "libata", File: "libata.ko", Dependency: true},
		{Name: "ahci", File: "ahci.ko", Depends: []string{"libata"}, PCI: []string{"pci:v00001B4Bd00009230sv*sd*bc*sc*i*", "pci:v*d*sv*sd*bc01sc06i01*"}},
		{Name: "virtio_rng", File: "virtio-rng.ko", Depends: []string{"libata", "ahci"}},
	}
	data, err := LoadOrder(modules)
	require.NoError(t, err)
	assert.Equal(t, "# Kernel modules in load order (dependencies first), written by metalprobe/image.\n"+
		"# <file> [depends=<module>,...] [pci=<alias pattern>,...] [dependency]: see image.LoadOrder.\n"+
		"libata.ko dependency\n"+
		"ahci.ko depends=libata pci=pci:v*d*sv*sd*bc01sc06i01*,pci:v00001B4Bd00009230sv*sd*bc*sc*i*\n"+
		"virtio-rng.ko depends=ahci,libata\n", string(data))
	assert.Equal(t, []string{"pci:v00001B4Bd00009230sv*sd*bc*sc*i*", "pci:v*d*sv*sd*bc01sc06i01*"}, modules[1].PCI, "the caller's lists are not sorted in place")

	parsed, err := earlyboot.ParseLoadOrder(bytes.NewReader(data))
	require.NoError(t, err, "/init reads what the builder writes")
	assert.Equal(t, []earlyboot.Module{
		{File: "libata.ko", Name: "libata", Dependency: true},
		{File: "ahci.ko", Name: "ahci", Depends: []string{"libata"}, PCI: []string{"pci:v*d*sv*sd*bc01sc06i01*", "pci:v00001B4Bd00009230sv*sd*bc*sc*i*"}},
		{File: "virtio-rng.ko", Name: "virtio_rng", Depends: []string{"ahci", "libata"}},
	}, parsed)

	for why, bad := range map[string]Module{
		"a space in a pattern":    {Name: "x", File: "x.ko", PCI: []string{"pci:v1 *"}},
		"a comma in a pattern":    {Name: "x", File: "x.ko", PCI: []string{"pci:v1*,v2"}},
		"a newline in a pattern":  {Name: "x", File: "x.ko", PCI: []string{"pci:v1*\nevil.ko"}},
		"a pattern not for PCI":   {Name: "x", File: "x.ko", PCI: []string{"virtio:d*"}},
		"a space in a file name":  {Name: "x_y", File: "x y.ko"},
		"a slash in a file name":  {Name: "x", File: "sub/x.ko"},
		"not a .ko":               {Name: "x", File: "x.ko.xz"},
		"a file not of its name":  {Name: "y", File: "x.ko"},
		"a dependency not before": {Name: "x", File: "x.ko", Depends: []string{"later"}},
		"listed twice":            {Name: "libata", File: "libata.ko"},
	} {
		_, err := LoadOrder(append(slices.Clone(modules), bad))
		assert.Error(t, err, why)
	}
	_, err = LoadOrder([]Module{{Name: "x", File: "x.ko", PCI: []string{"pci:v1 *"}}})
	assert.ErrorContains(t, err, `module x: its alias "pci:v1 *" cannot be written in the load order`)
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
// The second build is make's command (build-probe-image -force), run as make runs it: not
// inside this test binary, whose race detector would make its compression several times slower.
func TestInitramfsBuildsBitIdentically(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	_, first := testImage(t) // the build the boot test uses, reused when current
	out := t.TempDir()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "run", "./cmd/build-probe-image", "-out", out, "-version", first.ProbeVersion, "-force")
	output, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", output)
	require.Contains(t, string(output), "built in", "a forced build builds: %s", output)
	data, err := os.ReadFile(filepath.Join(out, ManifestFile))
	require.NoError(t, err)
	var second *Manifest
	require.NoError(t, json.Unmarshal(data, &second))
	t.Logf("second build in %s", time.Since(start).Round(10*time.Millisecond))
	assert.Equal(t, first.Files, second.Files, "two builds of the same sources differ")
	assert.Equal(t, first.ISO, second.ISO, "two builds of the same sources give different ISOs")
	assert.Equal(t, first.SourceDigest, second.SourceDigest)

	assert.LessOrEqual(t, second.TotalBytes, int64(MaxImageBytes), "kernel + initramfs over budget: %s", sizes(second))
	t.Logf("image: %s, %d modules", sizes(second), len(second.Modules))

	data, err = os.ReadFile(filepath.Join(out, InitramfsFile))
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

// QEMU's PCI devices, as the probe's /init reads them from /sys/bus/pci/devices/*/modalias.
var (
	// q35 with -device ahci, virtio-net-pci and e1000: its host bridge, LPC bridge, built-in
	// ICH9 AHCI controller and SMBus, then the devices.
	q35Devices = []string{
		"pci:v00008086d000029C0sv00001AF4sd00001100bc06sc00i00",
		"pci:v00008086d00002918sv00001AF4sd00001100bc06sc01i00",
		"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
		"pci:v00008086d00002930sv00001AF4sd00001100bc0Csc05i00",
		"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
		"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
		"pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00",
	}
	// pc (i440FX, PIIX3) with virtio-net-pci and an NVMe disk.
	pcDevices = []string{
		"pci:v00008086d00001237sv00001AF4sd00001100bc06sc00i00",
		"pci:v00008086d00007000sv00001AF4sd00001100bc06sc01i00",
		"pci:v00008086d00007010sv00001AF4sd00001100bc01sc01i80",
		"pci:v00008086d00007113sv00001AF4sd00001100bc06sc80i00",
		"pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00",
		"pci:v00001B36d00000010sv00001AF4sd00001100bc01sc08i02",
	}
)

// TestImageLoadsWhatTheMachineNeeds reads the image's load order as /init does and decides,
// for two QEMU machines, what it loads: their NIC and storage drivers, what every machine
// loads (virtio_net, sd_mod, efivarfs...) and their dependencies, none of the drivers for
// hardware they do not have.
func TestImageLoadsWhatTheMachineNeeds(t *testing.T) {
	dir, m := testImage(t)
	data, err := os.ReadFile(filepath.Join(dir, InitramfsFile))
	require.NoError(t, err)
	var order []byte
	for _, r := range readInitramfs(t, data) {
		if r.Name == LoadOrderFile {
			order, err = io.ReadAll(io.NewSectionReader(r, 0, int64(r.FileSize)))
			require.NoError(t, err)
		}
	}
	modules, err := earlyboot.ParseLoadOrder(bytes.NewReader(order))
	require.NoError(t, err)
	require.Len(t, modules, len(m.Modules))
	byName := map[string]earlyboot.Module{}
	for i, mod := range modules {
		byName[mod.Name] = mod
		assert.Equal(t, m.Modules[i].File, mod.File, "the manifest lists the modules in load order")
		assert.Len(t, mod.PCI, m.Modules[i].PCIAliases, mod.Name)
		assert.Equal(t, m.Modules[i].Dependency, mod.Dependency, mod.Name)
	}
	for _, name := range WantedModules {
		if mod, ok := byName[name]; ok {
			assert.False(t, mod.Dependency, "%s is wanted", name)
		}
	}
	assert.Contains(t, byName["ahci"].PCI, "pci:v*d*sv*sd*bc01sc06i01*", "ahci binds AHCI controllers by class")
	assert.Contains(t, byName["e1000"].PCI, "pci:v00008086d0000100Esv*sd*bc*sc*i*")
	assert.Empty(t, byName["virtio_net"].PCI, "virtio_net binds virtio devices, whatever their transport")
	assert.Empty(t, byName["sd_mod"].PCI, "sd_mod binds SCSI disks")
	assert.True(t, byName["scsi_mod"].Dependency)

	everywhere := []string{"virtio_net", "virtio_blk", "virtio_scsi", "virtio_rng", "sd_mod", "8021q", "efivarfs", "scsi_mod", "virtio"}
	neverInQEMU := []string{"mpt3sas", "megaraid_sas", "smartpqi", "ice", "i40e", "ixgbe", "mlx5_core", "bnxt_en", "tg3", "igb", "e1000e", "raid_class", "scsi_transport_sas", "mlxfw", "dca"}
	for _, machine := range []struct {
		name      string
		devices   []string
		load, not []string
	}{
		{"q35", q35Devices, []string{"virtio_pci", "e1000", "ahci", "libahci", "libata"}, []string{"nvme", "nvme_core"}},
		{"pc", pcDevices, []string{"virtio_pci", "nvme", "nvme_core"}, []string{"ahci", "libahci", "libata", "e1000"}},
	} {
		load, skip := earlyboot.Select(modules, machine.devices)
		var loaded []string
		for _, mod := range load {
			loaded = append(loaded, mod.Name)
		}
		t.Logf("%s: loads %d of %d modules: %s", machine.name, len(load), len(modules), strings.Join(loaded, " "))
		assert.Len(t, skip, len(modules)-len(load))
		assert.Subset(t, loaded, append(slices.Clone(everywhere), machine.load...), machine.name)
		for _, name := range append(slices.Clone(neverInQEMU), machine.not...) {
			assert.NotContains(t, loaded, name, machine.name)
		}
	}
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
