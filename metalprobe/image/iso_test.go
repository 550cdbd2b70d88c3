package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/pe"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bootmedia"
)

func TestParseDebPins(t *testing.T) {
	pins := DefaultBootloaderPins()
	require.Len(t, pins, 4)
	assert.Equal(t, "isolinux=3:6.04~git20190206.bf6db5b4+dfsg1-3", pins[0].String())
	assert.Equal(t, "isolinux_3%3a6.04~git20190206.bf6db5b4+dfsg1-3_*.deb", pins[0].debGlob())

	_, err := ParseDebPins("isolinux 1\nsyslinux-common 1\n")
	assert.ErrorContains(t, err, "is not pinned")
	_, err = ParseDebPins("isolinux 1\nisolinux 2\n")
	assert.ErrorContains(t, err, "twice")
	_, err = ParseDebPins("bash 5\n")
	assert.ErrorContains(t, err, "not one the builder")
	_, err = ParseDebPins("isolinux\n")
	assert.ErrorContains(t, err, "want")
}

// testBootloaders fetches the pinned boot loader packages (cached as make probe-image caches
// them) and unpacks them into a temporary directory.
func testBootloaders(t *testing.T) bootloaders {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bl, err := prepareBootloaders(ctx, Options{Log: io.Discard}, DefaultBootloaderPins(), t.TempDir())
	require.NoError(t, err)
	require.Len(t, bl.isolinux, 38912, "isolinux.bin")
	require.NotEmpty(t, bl.ldlinux)
	require.NotEmpty(t, bl.shim)
	require.NotEmpty(t, bl.grubCD)
	require.NotEmpty(t, bl.grubNet)
	return bl
}

// TestSignedChainKeepsItsSignatures: shimx64.efi and grubx64.efi are the packages' signed
// binaries, unchanged: each is a PE image whose certificate table (Authenticode) names its
// signer — Microsoft's UEFI CA for shim, which firmware with Microsoft's keys enrolled checks,
// and Debian's Secure Boot signer for GRUB, which shim checks against the key built into it.
func TestSignedChainKeepsItsSignatures(t *testing.T) {
	bl := testBootloaders(t)
	for _, c := range []struct {
		name   string
		data   []byte
		signer string
	}{
		{ShimFile, bl.shim, "Microsoft Corporation UEFI CA 2011"},
		{GRUBFile, bl.grubNet, "Debian Secure Boot Signer"},
		{"gcdx64.efi (the ISO's)", bl.grubCD, "Debian Secure Boot Signer"},
	} {
		f, err := pe.NewFile(bytes.NewReader(c.data))
		require.NoError(t, err, c.name)
		oh, ok := f.OptionalHeader.(*pe.OptionalHeader64)
		require.True(t, ok, "%s is a 64-bit PE image", c.name)
		sec := oh.DataDirectory[pe.IMAGE_DIRECTORY_ENTRY_SECURITY]
		require.NotZero(t, sec.Size, "%s has a certificate table", c.name)
		require.LessOrEqual(t, int(sec.VirtualAddress+sec.Size), len(c.data), c.name)
		assert.Contains(t, string(c.data[sec.VirtualAddress:sec.VirtualAddress+sec.Size]), c.signer, "%s is signed by %s", c.name, c.signer)
		assert.Equal(t, uint16(pe.IMAGE_SUBSYSTEM_EFI_APPLICATION), oh.Subsystem, "%s is an EFI application", c.name)
	}
}

// TestTemplateISOLayout builds the template ISO from a stand-in kernel and initramfs with the
// real boot loaders, twice, and reads it back: the same bytes both times, no build time
// recorded, the El Torito catalog (a BIOS default entry: isolinux.bin, no emulation, 4
// sectors, boot info table; an EFI section entry: the FAT16 ESP whose EFI/BOOT/BOOTX64.EFI is
// Debian's signed shim and EFI/BOOT/grubx64.efi its signed gcdx64.efi), both loaders'
// configurations, and the manifest's embed area: zeros where
// /ignition.img's data lies.
func TestTemplateISOLayout(t *testing.T) {
	bl := testBootloaders(t)
	kernel, initramfs := make([]byte, 3<<20+123), make([]byte, 5<<20+7)
	_, _ = rand.Read(kernel)
	_, _ = rand.Read(initramfs)
	started := time.Now()
	iso, m, err := buildISO(t.TempDir(), kernel, initramfs, bl)
	require.NoError(t, err)
	again, m2, err := buildISO(t.TempDir(), kernel, initramfs, bl)
	require.NoError(t, err)
	assert.Equal(t, m, m2)
	require.True(t, bytes.Equal(iso, again), "two builds of the same inputs differ")

	assert.EqualValues(t, len(iso), m.Size)
	assert.Zero(t, len(iso)%isoBlock)
	assert.EqualValues(t, bootmedia.DefaultEmbedSize, m.EmbedSize)
	assert.Zero(t, m.EmbedOffset%isoBlock)
	assert.Equal(t, make([]byte, m.EmbedSize), iso[m.EmbedOffset:m.EmbedOffset+m.EmbedSize], "the embed area is zeros")

	isofs, err := iso9660.Read(file.New(&memFile{Reader: bytes.NewReader(iso)}, true), int64(len(iso)), 0, isoBlock)
	require.NoError(t, err)
	assert.Equal(t, ISOVolumeID+strings.Repeat(" ", 32-len(ISOVolumeID)), isofs.Label(), "padded with spaces")
	// go-diskfs v1.9.4 reads files in the root directory, but not in subdirectories of a Rock
	// Ridge ISO (it wants an NM entry in "." and "..", which its writer, like xorriso's, leaves
	// out): lookupRR finds those by their Rock Ridge names, as isolinux and GRUB do.
	content := func(p string) []byte {
		t.Helper()
		off, size := lookupRR(t, iso, p)
		if strings.Count(p, "/") == 1 {
			f, err := isofs.OpenFile(p, os.O_RDONLY)
			require.NoError(t, err, p)
			defer func() { _ = f.Close() }()
			data, err := io.ReadAll(f)
			require.NoError(t, err, p)
			require.Equal(t, int64(f.(*iso9660.File).Location())*isoBlock, off, "%s: where go-diskfs finds it", p)
			require.True(t, bytes.Equal(data, iso[off:off+size]), "%s: what go-diskfs reads", p)
		}
		return iso[off : off+size]
	}
	location := func(p string) int64 {
		t.Helper()
		off, _ := lookupRR(t, iso, p)
		return off
	}
	assert.Equal(t, kernel, content(ISOKernelPath))
	assert.Equal(t, initramfs, content(ISOInitrdPath))
	assert.Equal(t, bl.ldlinux, content(isoLdlinuxPath))
	assert.Equal(t, m.EmbedOffset, location(ISOEmbedPath))
	assert.Len(t, content(ISOEmbedPath), bootmedia.DefaultEmbedSize)
	assert.Equal(t, "Ironfleet probe\n", string(content(isoDiskInfo)))
	assert.Contains(t, string(content(isoIsolinuxCfg)), "INITRD /initrd.gz,/ignition.img\n  APPEND console=ttyS0,115200 quiet\n")
	assert.Contains(t, string(content(isoGrubCfg)), "\tlinux /vmlinuz console=ttyS0,115200 quiet\n\tinitrd /initrd.gz /ignition.img\n")
	for _, cfg := range []string{isoIsolinuxCfg, isoGrubCfg} {
		assert.NotContains(t, string(content(cfg)), "ironfleet.boot", "the boot URL comes from the embed")
	}

	// Every recorded time is isoEpoch, none the build's.
	root, err := isofs.ReadDir(".")
	require.NoError(t, err)
	require.NotEmpty(t, root)
	for _, d := range root {
		info, err := d.Info()
		require.NoError(t, err, d.Name())
		assert.True(t, info.ModTime().Equal(isoEpoch), "%s: %s", d.Name(), info.ModTime())
	}
	pvd := iso[isoPVDOffset : isoPVDOffset+isoBlock]
	for _, off := range []int{813, 830, 864} {
		assert.Equal(t, "1980010100000000", string(pvd[off:off+16]), "volume dates")
	}
	catalogLBA := int64(binary.LittleEndian.Uint32(iso[17*isoBlock+0x47:]))
	today := isoRecordingDate()
	now := started.UTC()
	today[0], today[1], today[2] = byte(now.Year()-1900), byte(now.Month()), byte(now.Day())
	assert.False(t, bytes.Contains(iso[isoPVDOffset:catalogLBA*isoBlock], today[:3]), "the build's date in the ISO's metadata")

	// El Torito: the boot record (sector 17) points at the catalog.
	brvd := iso[17*isoBlock : 18*isoBlock]
	assert.Equal(t, []byte("\x00CD001\x01EL TORITO SPECIFICATION"), brvd[:30])
	cat := iso[catalogLBA*isoBlock:]
	// Validation entry: header 1, platform x86, checksum to 0, key 55 AA.
	assert.Equal(t, byte(1), cat[0])
	assert.Equal(t, byte(iso9660.BIOS), cat[1])
	assert.Equal(t, []byte{0x55, 0xaa}, cat[0x1e:0x20])
	var sum uint16
	for i := 0; i < 0x20; i += 2 {
		sum += binary.LittleEndian.Uint16(cat[i:])
	}
	assert.Zero(t, sum, "validation entry checksum")
	// Default entry: bootable, no emulation, 4 sectors of isolinux.bin.
	def := cat[0x20:0x40]
	assert.Equal(t, byte(0x88), def[0])
	assert.Equal(t, byte(iso9660.NoEmulation), def[1])
	assert.EqualValues(t, 4, binary.LittleEndian.Uint16(def[6:]))
	isolinuxAt := location(ISOIsolinuxPath)
	assert.EqualValues(t, isolinuxAt/isoBlock, binary.LittleEndian.Uint32(def[8:]))
	// The last section header, for EFI, with one entry: the ESP image.
	hdr := cat[0x40:0x60]
	assert.Equal(t, byte(0x91), hdr[0])
	assert.Equal(t, byte(iso9660.EFI), hdr[1])
	assert.EqualValues(t, 1, binary.LittleEndian.Uint16(hdr[2:]))
	efi := cat[0x60:0x80]
	assert.Equal(t, byte(0x88), efi[0])
	assert.Equal(t, byte(iso9660.NoEmulation), efi[1])
	assert.EqualValues(t, espSize/512, binary.LittleEndian.Uint16(efi[6:]))
	espAt := location(ISOESPPath)
	assert.EqualValues(t, espAt/isoBlock, binary.LittleEndian.Uint32(efi[8:]))

	// isolinux.bin carries the boot info table at 8: PVD sector, its own sector and length,
	// the checksum of its 32-bit words from byte 64.
	table := iso[isolinuxAt+8 : isolinuxAt+24]
	assert.EqualValues(t, 16, binary.LittleEndian.Uint32(table[0:]))
	assert.EqualValues(t, isolinuxAt/isoBlock, binary.LittleEndian.Uint32(table[4:]))
	assert.EqualValues(t, len(bl.isolinux), binary.LittleEndian.Uint32(table[8:]))
	var checksum uint32
	for i := 64; i+4 <= len(bl.isolinux); i += 4 {
		checksum += binary.LittleEndian.Uint32(bl.isolinux[i:])
	}
	assert.Equal(t, checksum, binary.LittleEndian.Uint32(table[12:]))
	assert.Equal(t, bl.isolinux[64:], iso[isolinuxAt+64:isolinuxAt+int64(len(bl.isolinux))], "isolinux.bin past the table")

	// The ESP: FAT16, EFI/BOOT/BOOTX64.EFI is Debian's signed shim, and beside it the GRUB
	// shim loads, Debian's signed gcdx64.efi, both byte for byte.
	espImage := iso[espAt : espAt+espSize]
	esp, err := fat16.Read(file.New(&memFile{Reader: bytes.NewReader(espImage)}, true), espSize, 0, 512)
	require.NoError(t, err)
	boot, err := esp.ReadFile(ESPShimPath)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(bl.shim, boot), "BOOTX64.EFI is shimx64.efi.signed")
	grub, err := esp.ReadFile(ESPGRUBPath)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(bl.grubCD, grub), "grubx64.efi is gcdx64.efi.signed")
	assert.Equal(t, []byte("FAT16   "), espImage[54:62], "FAT16 file system type")
	var espNames []string
	for _, dir := range []string{".", "EFI", "EFI/BOOT"} {
		entries, err := esp.ReadDir(dir)
		require.NoError(t, err, dir)
		for _, e := range entries {
			espNames = append(espNames, e.Name())
			info, err := e.Info()
			require.NoError(t, err)
			assert.True(t, info.ModTime().Equal(isoEpoch), "ESP %s/%s: %s", dir, e.Name(), info.ModTime())
		}
	}
	assert.Subset(t, espNames, []string{"EFI", "BOOT", "BOOTX64.EFI", "grubx64.efi"})
	// The root directory (the volume label's entry included) holds no FAT date of today.
	rootDir := (int(binary.LittleEndian.Uint16(espImage[14:])) + int(espImage[16])*int(binary.LittleEndian.Uint16(espImage[22:]))) * 512
	fatToday := make([]byte, 2)
	binary.LittleEndian.PutUint16(fatToday, uint16((now.Year()-1980)<<9|int(now.Month())<<5|now.Day()))
	assert.False(t, bytes.Contains(espImage[rootDir:rootDir+512*32], fatToday), "the build's date in the ESP's root directory")
}

// TestTheBuildWritesTheTemplateISO checks the build directory's probe.iso against its
// probe-iso.json as the boot service loads it, and the image manifest's digests of both.
func TestTheBuildWritesTheTemplateISO(t *testing.T) {
	dir, m := testImage(t)
	tmpl, err := bootmedia.LoadTemplate(dir)
	require.NoError(t, err)
	require.Len(t, m.ISO, 2)
	assert.Equal(t, ISOFile, m.ISO[0].Name)
	assert.Equal(t, tmpl.Manifest.Size, m.ISO[0].Size)
	assert.Equal(t, tmpl.Manifest.SHA256, m.ISO[0].SHA256)
	assert.Equal(t, ISOManifestFile, m.ISO[1].Name)
	assert.Equal(t, DefaultBootloaderPins(), m.Bootloaders)
	for _, name := range []string{ISOFile, ISOManifestFile} {
		_, err := os.Stat(filepath.Join(dir, name))
		assert.NoError(t, err)
	}
}

// lookupRR finds p (absolute, Rock Ridge names) in an ISO and returns its data's offset and
// size, walking directory records from the primary volume descriptor's root record.
func lookupRR(t *testing.T, iso []byte, p string) (int64, int64) {
	t.Helper()
	rec := iso[isoPVDOffset+pvdRootRecord : isoPVDOffset+pvdRootRecord+34]
	for _, name := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		start := int64(binary.LittleEndian.Uint32(rec[2:6])) * isoBlock
		end := start + int64(binary.LittleEndian.Uint32(rec[10:14]))
		var found []byte
		for off := start; off < end && found == nil; {
			l := int64(iso[off])
			if l == 0 {
				off = (off/isoBlock + 1) * isoBlock
				continue
			}
			r := iso[off : off+l]
			su := 33 + int(r[32])
			if su%2 == 1 {
				su++
			}
			for area := r[su:]; len(area) >= 4 && int(area[2]) >= 4 && int(area[2]) <= len(area); area = area[area[2]:] {
				if string(area[0:2]) == "NM" && string(area[5:area[2]]) == name {
					found = r
					break
				}
			}
			off += l
		}
		require.NotNil(t, found, "%s: no %q", p, name)
		rec = found
	}
	return int64(binary.LittleEndian.Uint32(rec[2:6])) * isoBlock, int64(binary.LittleEndian.Uint32(rec[10:14]))
}

// TestABuildIsKeptOnlyWithItsISO: a build directory counts as current only when its manifest
// lists the ISO's files and the signed chain's and they are intact, as the kernel's and
// initramfs's.
func TestABuildIsKeptOnlyWithItsISO(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{KernelFile: []byte("k"), InitramfsFile: []byte("i"), ISOFile: []byte("iso"), ISOManifestFile: []byte("{}"),
		ShimFile: []byte("shim"), GRUBFile: []byte("grub")}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	m := Manifest{SourceDigest: "d",
		Files:       []FileDigest{DigestOf(KernelFile, files[KernelFile]), DigestOf(InitramfsFile, files[InitramfsFile])},
		ISO:         []FileDigest{DigestOf(ISOFile, files[ISOFile]), DigestOf(ISOManifestFile, files[ISOManifestFile])},
		SignedChain: []FileDigest{DigestOf(ShimFile, files[ShimFile]), DigestOf(GRUBFile, files[GRUBFile])},
	}
	write := func(m Manifest) {
		data, err := json.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644))
	}
	write(m)
	_, ok := current(dir, "d")
	assert.True(t, ok)

	require.NoError(t, os.WriteFile(filepath.Join(dir, ISOFile), []byte("isx"), 0o644))
	_, ok = current(dir, "d")
	assert.False(t, ok, "a changed probe.iso is rebuilt")
	require.NoError(t, os.WriteFile(filepath.Join(dir, ISOFile), files[ISOFile], 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, ISOManifestFile)))
	_, ok = current(dir, "d")
	assert.False(t, ok, "a missing probe-iso.json is rebuilt")

	require.NoError(t, os.WriteFile(filepath.Join(dir, ISOManifestFile), files[ISOManifestFile], 0o644))
	_, ok = current(dir, "d")
	require.True(t, ok)
	require.NoError(t, os.WriteFile(filepath.Join(dir, GRUBFile), []byte("grux"), 0o644))
	_, ok = current(dir, "d")
	assert.False(t, ok, "a changed grubx64.efi is rebuilt")
	require.NoError(t, os.WriteFile(filepath.Join(dir, GRUBFile), files[GRUBFile], 0o644))

	noChain := m
	noChain.SignedChain = nil
	write(noChain)
	_, ok = current(dir, "d")
	assert.False(t, ok, "a build from before the signed chain is rebuilt")
	m.ISO = nil
	write(m)
	_, ok = current(dir, "d")
	assert.False(t, ok, "a build from before the ISO is rebuilt")
}
