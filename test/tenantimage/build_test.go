package tenantimage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/u-root/u-root/pkg/cpio"
	"github.com/ulikunitz/xz"

	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
	"github.com/ironfleet/ironfleet/metalprobe/image"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// TestBuildIsReproducible builds the image again, from scratch, into a new directory and
// expects every byte of every file to be what the build in bin/tenant holds (built earlier in
// this run, or by an earlier run of the same sources: the same sources give the same bytes
// whenever they are built).
func TestBuildIsReproducible(t *testing.T) {
	dir, _ := testImage(t)
	out := t.TempDir()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	log, err := runBuilder(ctx, out, true)
	require.NoError(t, err)
	t.Logf("rebuilt in %s: %s", time.Since(start).Round(10*time.Millisecond), strings.TrimSpace(log))
	for _, name := range []string{DiskFile, DiskGzFile, DiskZstFile, DiskXzFile, SumsFile, ManifestFile} {
		a, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(a, b), "%s differs between two builds", name)
	}

	// Build (in this process) keeps a build of the same sources as it is.
	root, err := repoRoot()
	require.NoError(t, err)
	start = time.Now()
	m, built, err := Build(ctx, Options{OutDir: out, ModuleDir: root})
	require.NoError(t, err)
	assert.False(t, built, "a current build was rebuilt")
	want, err := ReadManifest(out)
	require.NoError(t, err)
	assert.Equal(t, want, m)
	t.Logf("up-to-date check in %s", time.Since(start).Round(10*time.Millisecond))
}

// TestDamagedBuildIsNotCurrent: a build directory is kept only when every file is intact.
func TestDamagedBuildIsNotCurrent(t *testing.T) {
	dir, m := testImage(t)
	for _, damage := range []string{DiskFile, DiskXzFile, SumsFile, ManifestFile} {
		t.Run(damage, func(t *testing.T) {
			copyDir := t.TempDir()
			for _, name := range []string{DiskFile, DiskGzFile, DiskZstFile, DiskXzFile, SumsFile, ManifestFile} {
				data, err := os.ReadFile(filepath.Join(dir, name))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(copyDir, name), data, 0o644))
			}
			_, ok := current(copyDir, m.SourceDigest)
			require.True(t, ok, "an intact copy is current")
			_, ok = current(copyDir, "another digest")
			assert.False(t, ok, "a build of other sources is current")

			f, err := os.OpenFile(filepath.Join(copyDir, damage), os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte{'x'}, 100)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, ok = current(copyDir, m.SourceDigest)
			assert.False(t, ok, "a build with a damaged %s is current", damage)
		})
	}
}

// TestDiskLayout reads the disk with go-diskfs (not with the tools that wrote it): syslinux's
// MBR code, one bootable FAT32 partition at 1 MiB, and on it the kernel, the initramfs,
// syslinux.cfg and what syslinux installed, and the UEFI boot's shim, GRUB and grub.cfg;
// fsck.fat finds the filesystem clean.
func TestDiskLayout(t *testing.T) {
	dir, m := testImage(t)
	path := filepath.Join(dir, DiskFile)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, data, DiskBytes)

	code, err := os.ReadFile(MBRCode)
	require.NoError(t, err)
	assert.Equal(t, code, data[:len(code)], "the MBR's boot code is syslinux's mbr.bin")
	assert.Equal(t, []byte{0x4c, 0x3d, 0x2e, 0x1f}, data[440:444], "disk signature")
	assert.Equal(t, []byte{0x55, 0xaa}, data[510:512])

	d, err := diskfs.Open(path, diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	defer func() { _ = d.Close() }()
	table, err := d.GetPartitionTable()
	require.NoError(t, err)
	mt, ok := table.(*mbr.Table)
	require.True(t, ok, "an MBR partition table, not %T", table)
	var used []*mbr.Partition
	for _, p := range mt.Partitions {
		if p != nil && p.Type != mbr.Empty {
			used = append(used, p)
		}
	}
	require.Len(t, used, 1, "one partition")
	p := used[0]
	assert.True(t, p.Bootable, "the partition is active, so mbr.bin boots it")
	assert.Equal(t, mbr.Fat32LBA, p.Type)
	assert.EqualValues(t, PartitionStart, p.GetStart())
	assert.EqualValues(t, PartitionBytes, p.GetSize())
	assert.Equal(t, [3]byte{32, 33, 0}, [3]byte{p.StartHead, p.StartSector, p.StartCylinder}, "CHS of LBA 2048")

	fsys, err := d.GetFilesystem(1)
	require.NoError(t, err)
	assert.Equal(t, VolumeLabel, strings.TrimSpace(fsys.Label()))
	cfg, err := fs.ReadFile(fsys, "/"+SyslinuxCfg)
	require.NoError(t, err)
	assert.Equal(t, SyslinuxConfig, string(cfg))
	assert.Contains(t, string(cfg), "APPEND initrd=/initrd.img console=ttyS0,115200 ironfleet.tenant=1\n")
	for _, b := range m.Boot {
		got, err := fs.ReadFile(fsys, "/"+b.Name)
		require.NoError(t, err, b.Name)
		sum := sha256.Sum256(got)
		assert.Equal(t, b.SHA256, hex.EncodeToString(sum[:]), "%s on the partition is what the manifest says", b.Name)
	}
	// The UEFI boot: shim on the removable-media path, the signed GRUB beside it, and GRUB's
	// configuration at its prefix, booting what syslinux boots.
	var names []string
	for _, b := range m.Boot {
		names = append(names, b.Name)
	}
	assert.Subset(t, names, []string{EFIShim, EFIGRUB, EFIGRUBCfg})
	grubCfg, err := fs.ReadFile(fsys, "/"+EFIGRUBCfg)
	require.NoError(t, err)
	assert.Equal(t, GRUBConfig, string(grubCfg))
	assert.Contains(t, string(grubCfg), "linux /vmlinuz initrd=/initrd.img console=ttyS0,115200 ironfleet.tenant=1\n")
	shim, err := fs.ReadFile(fsys, "/"+EFIShim)
	require.NoError(t, err)
	assert.Equal(t, []byte("MZ"), shim[:2], "shim is a PE image")
	var pkgs []string
	for _, pin := range m.Disk.UEFILoaders {
		pkgs = append(pkgs, pin.Package)
	}
	assert.Equal(t, []string{"shim-signed", "grub-efi-amd64-signed"}, pkgs, "the loaders' packages, pinned in metalprobe/image/bootloaders.version")
	for _, name := range []string{"ldlinux.sys", "ldlinux.c32"} {
		got, err := fs.ReadFile(fsys, "/"+name)
		require.NoError(t, err, "syslinux installed %s", name)
		assert.NotEmpty(t, got, name)
	}
	// The kernel on the partition is the pinned package's.
	assert.Equal(t, image.DefaultKernelPin(), m.Kernel)

	// fsck.fat reads the partition as Linux would.
	part := filepath.Join(t.TempDir(), "part.raw")
	require.NoError(t, os.WriteFile(part, data[PartitionStart:PartitionStart+PartitionBytes], 0o644))
	fsck, err := exec.LookPath("fsck.fat")
	if err != nil {
		fsck = "/usr/sbin/fsck.fat"
	}
	out, err := exec.Command(fsck, "-n", "-v", part).CombinedOutput()
	require.NoError(t, err, "fsck.fat -n: %s", out)
	assert.Contains(t, string(out), "2 FATs, 32 bit entries")
	assert.Contains(t, string(out), `System ID "SYSLINUX"`, "syslinux's boot sector")
	assert.NotContains(t, string(out), "differences", "the backup boot sector is a copy of the boot sector")
}

// TestInitramfs unpacks the initramfs from the partition: /init, /dev/console and the
// modules /init needs, in an order that loads each after its dependencies.
func TestInitramfs(t *testing.T) {
	dir, m := testImage(t)
	d, err := diskfs.Open(filepath.Join(dir, DiskFile), diskfs.WithOpenMode(diskfs.ReadOnly))
	require.NoError(t, err)
	defer func() { _ = d.Close() }()
	fsys, err := d.GetFilesystem(1)
	require.NoError(t, err)
	initrd, err := fs.ReadFile(fsys, "/"+BootInitrd)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bytes.NewReader(initrd))
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	records, err := cpio.ReadAllRecords(cpio.Newc.Reader(bytes.NewReader(raw)))
	require.NoError(t, err)
	files := map[string]cpio.Record{}
	for _, r := range records {
		files[r.Name] = r
	}
	require.Contains(t, files, "init")
	assert.EqualValues(t, cpio.S_IFREG|0o755, files["init"].Mode)
	assert.Greater(t, files["init"].FileSize, uint64(1<<20), "/init is a static Go binary")
	require.Contains(t, files, "dev/console")
	assert.EqualValues(t, cpio.S_IFCHR|0o600, files["dev/console"].Mode)

	require.Contains(t, files, contract.LoadOrderFile)
	order, err := io.ReadAll(io.NewSectionReader(files[contract.LoadOrderFile], 0, int64(files[contract.LoadOrderFile].FileSize)))
	require.NoError(t, err)
	lines, err := earlyboot.ParseLoadOrder(bytes.NewReader(order))
	require.NoError(t, err, "/init's loader reads the load order")
	var loaded []string
	for _, l := range lines {
		loaded = append(loaded, l.File)
		assert.Contains(t, files, contract.ModulesDir+"/"+l.File, "the load order lists %s, which the initramfs holds", l.File)
	}
	for _, want := range []string{"virtio_pci.ko", "virtio_blk.ko", "virtio_net.ko", "nvme.ko", "ahci.ko", "sd_mod.ko", "e1000.ko", "isofs.ko"} {
		assert.Contains(t, loaded, want)
	}
	filePosition := map[string]int{}
	for i, f := range loaded {
		filePosition[f] = i
	}
	require.Len(t, m.Modules, len(loaded))
	position := map[string]int{} // by module name (file names may have hyphens)
	for _, mod := range m.Modules {
		i, ok := filePosition[mod.File]
		require.True(t, ok, "the load order lists %s", mod.File)
		position[mod.Name] = i
		line := lines[i]
		assert.Equal(t, mod.Name, line.Name)
		assert.ElementsMatch(t, mod.Depends, line.Depends, "%s's dependencies in the load order", mod.Name)
		assert.Len(t, line.PCI, mod.PCIAliases, "%s's PCI aliases in the load order", mod.Name)
		assert.Equal(t, mod.Dependency, line.Dependency, "%s is there only as a dependency", mod.Name)
	}
	for _, mod := range m.Modules {
		for _, dep := range mod.Depends {
			assert.Less(t, position[dep], position[mod.Name], "%s loads after its dependency %s", mod.Name, dep)
		}
	}
	// The image's layout of modules is the probe's, which /init's loader shares.
	assert.Equal(t, image.LoadOrderFile, contract.LoadOrderFile)
}

// TestServedFiles: the compressed copies decompress to disk.raw, and SHA256SUMS and the
// manifest name each file's digest as served.
func TestServedFiles(t *testing.T) {
	dir, m := testImage(t)
	disk, err := os.ReadFile(filepath.Join(dir, DiskFile))
	require.NoError(t, err)
	var sums strings.Builder
	for _, f := range m.Files {
		data, err := os.ReadFile(filepath.Join(dir, f.Name))
		require.NoError(t, err)
		sum := sha256.Sum256(data)
		assert.Equal(t, f.SHA256, hex.EncodeToString(sum[:]), f.Name)
		assert.EqualValues(t, len(data), f.Size, f.Name)
		sums.WriteString(hex.EncodeToString(sum[:]) + "  " + f.Name + "\n")
	}
	got, err := os.ReadFile(filepath.Join(dir, SumsFile))
	require.NoError(t, err)
	assert.Equal(t, sums.String(), string(got))
	assert.Len(t, m.Files, 4)

	// Each copy decompresses to disk.raw: with the command-line tool when it is installed
	// (another implementation than the one that compressed it), else with a Go reader.
	for name, c := range map[string]struct {
		cli    string
		reader func(io.Reader) (io.Reader, error)
	}{
		DiskGzFile:  {"gzip", func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }},
		DiskZstFile: {"zstd", func(r io.Reader) (io.Reader, error) { return zstd.NewReader(r) }},
		DiskXzFile:  {"xz", func(r io.Reader) (io.Reader, error) { return xz.NewReader(r) }},
	} {
		path := filepath.Join(dir, name)
		var data []byte
		if _, err := exec.LookPath(c.cli); err == nil {
			data, err = exec.Command(c.cli, "-dc", path).Output()
			require.NoError(t, err, "%s -dc %s", c.cli, name)
		} else {
			t.Logf("%s is not installed: reading %s in Go", c.cli, name)
			f, err := os.Open(path)
			require.NoError(t, err)
			r, err := c.reader(f)
			require.NoError(t, err, name)
			data, err = io.ReadAll(r)
			require.NoError(t, err, name)
			_ = f.Close()
		}
		assert.True(t, bytes.Equal(disk, data), "%s decompresses to %s", name, DiskFile)
	}
	head, err := os.ReadFile(filepath.Join(dir, DiskGzFile))
	require.NoError(t, err)
	assert.Equal(t, []byte{0, 0, 0, 0}, head[4:8], "the gzip header has no time")
	assert.Zero(t, head[3]&0x08, "the gzip header has no name")
}

func TestCHS(t *testing.T) {
	assert.Equal(t, [3]byte{0, 1, 0}, chs(0))
	assert.Equal(t, [3]byte{32, 33, 0}, chs(2048))
	// 98303 = cylinder 6 (6*16065 = 96390), head 30 (1913/63), sector 24 (1913%63+1).
	assert.Equal(t, [3]byte{30, 24, 6}, chs(98303))
	// Cylinder 1023 still fits; above it, the customary maximum.
	assert.Equal(t, [3]byte{254, 63 | 0xc0, 0xff}, chs(1024*255*63-1))
	assert.Equal(t, [3]byte{0xfe, 0xff, 0xff}, chs(1024*255*63))
}
