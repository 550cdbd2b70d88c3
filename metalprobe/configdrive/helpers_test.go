package configdrive

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/stretchr/testify/require"
)

const (
	mib      = int64(1 << 20)
	diskGUID = "A1B2C3D4-E5F6-4711-8899-AABBCCDDEEFF"
	p1GUID   = "11111111-2222-4333-8444-555555555555"
	p2GUID   = "66666666-7777-4888-9999-AAAAAAAAAAAA"
)

// pattern is n reproducible bytes, NULs included.
func pattern(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func writeAtFile(t *testing.T, path string, b []byte, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// fillPartitions puts known bytes at the start and the end of each partition, and boot code
// (and, for MBR, a disk signature) in LBA 0.
func fillPartitions(t *testing.T, path string, ss int64, parts [][2]int64) {
	t.Helper()
	writeAtFile(t, path, pattern(1, 440), 0)
	for i, p := range parts {
		writeAtFile(t, path, pattern(uint64(10+i), 4096), p[0]*ss)
		writeAtFile(t, path, pattern(uint64(20+i), 4096), p[1]*ss-4096)
	}
}

// makeMBR makes a disk image of size bytes with MBR partitions (start, size in sectors).
func makeMBR(t *testing.T, size int64, parts ...[2]uint32) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mbr.img")
	d, err := diskfs.Create(path, size, diskfs.SectorSize512)
	require.NoError(t, err)
	table := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512}
	var ranges [][2]int64
	for i, p := range parts {
		table.Partitions = append(table.Partitions, &mbr.Partition{
			Bootable: i == 0, Type: mbr.Linux, Start: p[0], Size: p[1],
		})
		ranges = append(ranges, [2]int64{int64(p[0]), int64(p[0]) + int64(p[1])})
	}
	require.NoError(t, d.Partition(table))
	require.NoError(t, d.Close())
	fillPartitions(t, path, 512, ranges)
	writeAtFile(t, path, []byte{0xde, 0xad, 0xbe, 0xef, 0, 0}, 440) // disk signature
	return path
}

// makeGPT makes a GPT disk image of imgSize bytes with an EFI system partition (1 MiB at 1
// MiB) and a root partition up to the last usable LBA, and copies it into a file of devSize
// bytes, so that its backup GPT is not at the end of the "device".
func makeGPT(t *testing.T, imgSize, devSize int64, ss int) string {
	t.Helper()
	dir := t.TempDir()
	img := filepath.Join(dir, "gpt-small.img")
	d, err := diskfs.Create(img, imgSize, diskfs.SectorSize(ss))
	require.NoError(t, err)
	sectors := uint64(imgSize) / uint64(ss)
	lastUsable := sectors - 1 - uint64(128*128/ss) - 1
	table := &gpt.Table{
		LogicalSectorSize: ss, PhysicalSectorSize: ss, ProtectiveMBR: true, GUID: diskGUID,
		Partitions: []*gpt.Partition{
			{Index: 1, Start: uint64(mib) / uint64(ss), End: uint64(2*mib)/uint64(ss) - 1, Type: gpt.EFISystemPartition,
				Name: "EFI-SYSTEM", GUID: p1GUID, Attributes: 1},
			{Index: 2, Start: uint64(2*mib) / uint64(ss), End: lastUsable, Type: gpt.LinuxFilesystem,
				Name: "root", GUID: p2GUID, Attributes: 1 << 60},
		},
	}
	require.NoError(t, d.Partition(table))
	require.NoError(t, d.Close())
	fillPartitions(t, img, int64(ss), [][2]int64{
		{mib / int64(ss), 2 * mib / int64(ss)},
		{2 * mib / int64(ss), int64(lastUsable) + 1},
	})
	if devSize == imgSize {
		return img
	}
	path := filepath.Join(dir, "gpt.img")
	b := readFile(t, img)
	require.NoError(t, os.WriteFile(path, b, 0o644))
	require.NoError(t, os.Truncate(path, devSize))
	return path
}

// gptHeader is a parsed GPT header, checked independently of the package's code.
type gptHeader struct {
	my, alt, firstUsable, lastUsable, entriesLBA uint64
	count, size                                  uint32
	guid                                         []byte
	entries                                      []byte
}

// readGPTHeaderAt parses and CRC-checks the GPT header at lba and its entry array.
func readGPTHeaderAt(t *testing.T, img []byte, ss int64, lba uint64) gptHeader {
	t.Helper()
	h := img[int64(lba)*ss : int64(lba+1)*ss]
	require.Equal(t, "EFI PART", string(h[:8]), "GPT signature at LBA %d", lba)
	hsize := binary.LittleEndian.Uint32(h[12:16])
	c := bytes.Clone(h[:hsize])
	clear(c[16:20])
	require.Equal(t, binary.LittleEndian.Uint32(h[16:20]), crc32.ChecksumIEEE(c), "header CRC at LBA %d", lba)
	g := gptHeader{
		my: binary.LittleEndian.Uint64(h[24:32]), alt: binary.LittleEndian.Uint64(h[32:40]),
		firstUsable: binary.LittleEndian.Uint64(h[40:48]), lastUsable: binary.LittleEndian.Uint64(h[48:56]),
		guid: bytes.Clone(h[56:72]), entriesLBA: binary.LittleEndian.Uint64(h[72:80]),
		count: binary.LittleEndian.Uint32(h[80:84]), size: binary.LittleEndian.Uint32(h[84:88]),
	}
	require.Equal(t, lba, g.my)
	off := int64(g.entriesLBA) * ss
	g.entries = img[off : off+int64(g.count)*int64(g.size)]
	require.Equal(t, binary.LittleEndian.Uint32(h[88:92]), crc32.ChecksumIEEE(g.entries), "entries CRC of header at LBA %d", lba)
	return g
}

// assertOnlyChanged fails when a byte outside the allowed [from, to) ranges differs.
func assertOnlyChanged(t *testing.T, before, after []byte, allowed ...[2]int64) {
	t.Helper()
	require.Equal(t, len(before), len(after), "disk size changed")
	in := func(i int64) bool {
		for _, r := range allowed {
			if i >= r[0] && i < r[1] {
				return true
			}
		}
		return false
	}
	for i := range before {
		if before[i] != after[i] && !in(int64(i)) {
			t.Fatalf("byte %d (0x%x) changed from %#02x to %#02x outside the partition and the table", i, i, before[i], after[i])
		}
	}
}

// isoOf returns the bytes of the partition Result describes.
func isoOf(t *testing.T, path string, r Result) []byte {
	t.Helper()
	return readFile(t, path)[r.Start : r.Start+r.Size]
}

// openISO opens the ISO9660 filesystem of the partition with go-diskfs.
func openISO(t *testing.T, path string, r Result) *iso9660.FileSystem {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	// A copy of the partition alone: go-diskfs must not need anything outside it.
	part := filepath.Join(t.TempDir(), "part.iso")
	require.NoError(t, os.WriteFile(part, isoOf(t, path, r), 0o644))
	pf, err := os.Open(part)
	require.NoError(t, err)
	t.Cleanup(func() { pf.Close() })
	fsys, err := iso9660.Read(file.New(pf, true), r.Size, 0, 2048)
	require.NoError(t, err)
	return fsys
}

var installOnce sync.Once

// tool finds a command, installing the Debian packages gdisk and fdisk once when running
// as root and one of sgdisk and sfdisk is missing. "" when it is not there.
func tool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if (name == "sgdisk" || name == "sfdisk") && os.Geteuid() == 0 {
		installOnce.Do(func() {
			if _, err := exec.LookPath("apt-get"); err != nil {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			apt := func(args ...string) ([]byte, error) {
				cmd := exec.CommandContext(ctx, "apt-get", args...)
				cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
				return cmd.CombinedOutput()
			}
			install := []string{"install", "-y", "--no-install-recommends", "gdisk", "fdisk"}
			if _, err := apt(install...); err == nil {
				return
			}
			// A fresh container has no package lists yet.
			if out, err := apt("update"); err != nil {
				t.Logf("apt-get update: %v\n%s", err, out)
				return
			}
			if out, err := apt(install...); err != nil {
				t.Logf("apt-get install gdisk fdisk: %v\n%s", err, out)
			}
		})
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Logf("%s is not installed: its check is left out", name)
	return ""
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}

// checkSgdisk runs sgdisk -v when it is there.
func checkSgdisk(t *testing.T, path string) {
	t.Helper()
	sg := tool(t, "sgdisk")
	if sg == "" {
		return
	}
	out, err := run(t, sg, "-v", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "No problems found", out)
	for _, bad := range []string{"Warning", "Problem", "rror", "Partition 3 doesn't"} {
		require.NotContains(t, out, bad, out)
	}
}

// checkSfdisk runs sfdisk --verify when it is there.
func checkSfdisk(t *testing.T, path string) {
	t.Helper()
	sf := tool(t, "sfdisk")
	if sf == "" {
		return
	}
	out, err := run(t, sf, "--verify", path)
	require.NoError(t, err, out)
	require.Contains(t, out, "No errors detected", out)
	low := strings.ToLower(out)
	for _, bad := range []string{"warn", "problem", "overlap", "not on the end", "corrupt", "invalid", "exceed", "misalign"} {
		require.NotContains(t, low, bad, out)
	}
}

// checkISOTools lists the ISO's Rock Ridge names with isoinfo or xorriso when one is there.
func checkISOTools(t *testing.T, path string, r Result, want []string) {
	t.Helper()
	part := filepath.Join(t.TempDir(), "part.iso")
	require.NoError(t, os.WriteFile(part, isoOf(t, path, r), 0o644))
	var out string
	var err error
	switch {
	case tool(t, "isoinfo") != "":
		out, err = run(t, "isoinfo", "-R", "-f", "-i", part)
		require.NoError(t, err, out)
		vd, err := run(t, "isoinfo", "-d", "-i", part)
		require.NoError(t, err, vd)
		require.Contains(t, vd, "Volume id: config-2", vd)
		require.Contains(t, vd, "Rock Ridge signatures version 1 found", vd)
	case tool(t, "xorriso") != "":
		out, err = run(t, "xorriso", "-indev", part, "-find", "/", "-exec", "lsdl")
		require.NoError(t, err, out)
	default:
		return
	}
	for _, w := range want {
		require.Contains(t, out, w, out)
	}
}

func guidText(b []byte) string {
	return fmt.Sprintf("%08X-%04X-%04X-%X-%X", binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}
