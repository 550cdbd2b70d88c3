package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat16"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"github.com/ironfleet/ironfleet/internal/bootmedia"
)

// The probe's template ISO (internal/bootmedia), written next to the kernel and initramfs.
const (
	ISOFile         = bootmedia.ISOFile
	ISOManifestFile = bootmedia.ManifestFile
)

// Paths in the ISO, as Rock Ridge names them. Both loaders read Rock Ridge names when there
// are any, and compare them case-sensitively: isolinux looks for its own directory and
// ldlinux.c32 in lower case (/isolinux/ldlinux.c32: "Failed to load ldlinux.c32" with upper
// case names), GRUB for /.disk/info and /boot/grub/grub.cfg, where Debian's gcdx64.efi looks for
// them. So every name is lower case, and 8.3-safe for the plain ISO9660 names (VMLINUZ.;1,
// IGNITION.IMG;1) that firmware and other readers see.
const (
	ISOKernelPath   = "/vmlinuz"
	ISOInitrdPath   = "/initrd.gz"
	ISOEmbedPath    = "/ignition.img"
	ISOESPPath      = "/efiboot.img"
	ISOIsolinuxPath = "/isolinux/isolinux.bin"
	isoLdlinuxPath  = "/isolinux/ldlinux.c32"
	isoIsolinuxCfg  = "/isolinux/isolinux.cfg"
	isoDiskInfo     = "/.disk/info"
	isoGrubCfg      = "/boot/grub/grub.cfg"
	// isoBootCatalog is hidden from the directory tree (xorriso's default is to show it; nothing
	// needs it there, and go-diskfs stamps its record with the build's time).
	isoBootCatalog = "/boot.cat"
	// ISOVolumeID labels the volume; never "config-2", the installed OS's config drive's.
	ISOVolumeID = "IRONFLEET_PROBE"
	// espSize is the EFI system partition image: 8 MiB of FAT16 (8 K clusters of 1 KiB, well
	// inside FAT16's range, unlike a FAT32 of this size) for GRUB's 3.8 MB, and below the
	// 32 MiB up to which El Torito can state an entry's size.
	espSize = 8 << 20
)

// KernelCommandLine is what both boot loaders pass the kernel: the console on the first
// serial port (where BMCs' serial-over-LAN and the tests look) and nothing from the boot
// service: the ignition and the boot URL come from the embed (ignition.MediaIgnitionFile),
// never from ironfleet.boot.
const KernelCommandLine = "console=ttyS0,115200 quiet"

// isoEpoch is the time recorded everywhere in the ISO and its ESP: fixed, so that the same
// inputs give the same bytes. FAT cannot record a time before 1980.
var isoEpoch = time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC)

func isolinuxCfg() string {
	return "SERIAL 0 115200\nDEFAULT probe\nPROMPT 0\nTIMEOUT 0\nLABEL probe\n" +
		"  KERNEL " + ISOKernelPath + "\n" +
		// isolinux pads every initrd but the last to 4 KiB and loads them one after the other.
		"  INITRD " + ISOInitrdPath + "," + ISOEmbedPath + "\n" +
		"  APPEND " + KernelCommandLine + "\n"
}

func grubCfg() string {
	return "serial --unit=0 --speed=115200\nterminal_input serial console\nterminal_output serial console\n" +
		"set timeout=0\nset default=0\n" +
		"menuentry 'Ironfleet probe' {\n" +
		"\tlinux " + ISOKernelPath + " " + KernelCommandLine + "\n" +
		"\tinitrd " + ISOInitrdPath + " " + ISOEmbedPath + "\n" +
		"}\n"
}

// buildISO writes the template ISO into work and returns its bytes and manifest. Layout:
// El Torito with a BIOS default entry (isolinux.bin, no emulation, 4 sectors, boot info table)
// and an EFI section entry (EFIBOOT.IMG, a FAT16 ESP holding EFI/BOOT/BOOTX64.EFI = Debian's
// signed shim and EFI/BOOT/grubx64.efi = Debian's signed CD GRUB, gcdx64.efi, which shim loads
// from beside itself: the ISO boots with Secure Boot on or off); both loaders read /VMLINUZ, /INITRD.GZ and the embed area /IGNITION.IMG
// (bootmedia.DefaultEmbedSize zeros) from the ISO9660 tree, the embed as a second initrd.
// The embed area's offset is read back from the finished ISO.
func buildISO(work string, kernel, initramfs []byte, bl bootloaders) ([]byte, bootmedia.Manifest, error) {
	root := filepath.Join(work, "iso-root")
	files := []struct {
		path string
		data []byte
	}{
		{ISOKernelPath, kernel},
		{ISOInitrdPath, initramfs},
		{ISOEmbedPath, make([]byte, bootmedia.DefaultEmbedSize)},
		{ISOIsolinuxPath, bl.isolinux},
		{isoLdlinuxPath, bl.ldlinux},
		{isoIsolinuxCfg, []byte(isolinuxCfg())},
		// GRUB's search --file /.disk/info finds the ISO by this file.
		{isoDiskInfo, []byte("Ironfleet probe\n")},
		{isoGrubCfg, []byte(grubCfg())},
	}
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, bootmedia.Manifest{}, err
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			return nil, bootmedia.Manifest{}, err
		}
	}
	if err := writeESP(filepath.Join(root, filepath.FromSlash(ISOESPPath)), bl.shim, bl.grubCD); err != nil {
		return nil, bootmedia.Manifest{}, err
	}
	// Rock Ridge records modes and times: make them independent of the umask and the clock
	// (the change time cannot be set; normalizeISO overwrites it).
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		return os.Chtimes(p, isoEpoch, isoEpoch)
	}); err != nil {
		return nil, bootmedia.Manifest{}, fmt.Errorf("preparing the ISO's files: %w", err)
	}

	isoPath := filepath.Join(work, ISOFile)
	out, err := os.OpenFile(isoPath, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, bootmedia.Manifest{}, err
	}
	defer func() { _ = out.Close() }()
	isofs, err := iso9660.Create(file.New(out, false), 0, 0, isoBlock, root)
	if err != nil {
		return nil, bootmedia.Manifest{}, fmt.Errorf("creating the ISO: %w", err)
	}
	// Finalize removes root.
	if err := isofs.Finalize(iso9660.FinalizeOptions{
		RockRidge:        true,
		VolumeIdentifier: ISOVolumeID,
		ElTorito: &iso9660.ElTorito{
			BootCatalog:     isoBootCatalog,
			HideBootCatalog: true,
			Entries: []*iso9660.ElToritoEntry{
				// Load size: go-diskfs's default for no emulation, 4 sectors, as isolinux wants.
				{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: ISOIsolinuxPath, BootTable: true},
				{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: ISOESPPath},
			},
		},
	}); err != nil {
		return nil, bootmedia.Manifest{}, fmt.Errorf("writing the ISO: %w", err)
	}
	iso, err := os.ReadFile(isoPath)
	if err != nil {
		return nil, bootmedia.Manifest{}, err
	}
	if err := normalizeISO(iso); err != nil {
		return nil, bootmedia.Manifest{}, err
	}
	offset, err := isoFileOffset(iso, ISOEmbedPath)
	if err != nil {
		return nil, bootmedia.Manifest{}, err
	}
	if !bytes.Equal(iso[offset:offset+bootmedia.DefaultEmbedSize], make([]byte, bootmedia.DefaultEmbedSize)) {
		return nil, bootmedia.Manifest{}, fmt.Errorf("the ISO's %s at %d is not the zero-filled embed area", ISOEmbedPath, offset)
	}
	sum := sha256.Sum256(iso)
	return iso, bootmedia.Manifest{
		Size: int64(len(iso)), SHA256: hex.EncodeToString(sum[:]),
		EmbedOffset: offset, EmbedSize: bootmedia.DefaultEmbedSize,
	}, nil
}

// isoFileOffset reads the ISO back with go-diskfs and returns the byte offset of p's data.
func isoFileOffset(iso []byte, p string) (int64, error) {
	isofs, err := iso9660.Read(file.New(&memFile{Reader: bytes.NewReader(iso)}, true), int64(len(iso)), 0, isoBlock)
	if err != nil {
		return 0, fmt.Errorf("reading the ISO back: %w", err)
	}
	f, err := isofs.OpenFile(p, os.O_RDONLY)
	if err != nil {
		return 0, fmt.Errorf("finding %s in the ISO: %w", p, err)
	}
	defer func() { _ = f.Close() }()
	isoFile, ok := f.(*iso9660.File)
	if !ok {
		return 0, fmt.Errorf("%s in the ISO is a %T", p, f)
	}
	return int64(isoFile.Location()) * isoBlock, nil
}

// memFile is an fs.File over bytes, for go-diskfs's file backend.
type memFile struct{ *bytes.Reader }

func (memFile) Close() error                 { return nil }
func (m memFile) Stat() (fs.FileInfo, error) { return nil, errors.New("no file info") }

// The ESP's files: shim as the removable-media loader firmware boots, and the GRUB shim loads
// from beside itself by this name.
const (
	espBootDir  = "/EFI/BOOT"
	ESPShimPath = espBootDir + "/BOOTX64.EFI"
	ESPGRUBPath = espBootDir + "/grubx64.efi"
)

// writeESP writes the EFI system partition image: FAT16 with EFI/BOOT/BOOTX64.EFI (shim) and
// EFI/BOOT/grubx64.efi (GRUB), every recorded time isoEpoch.
func writeESP(p string, shim, grub []byte) error {
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := f.Truncate(espSize); err != nil {
		return err
	}
	esp, err := fat16.Create(file.New(f, false), espSize, 0, 512, "", true)
	if err != nil {
		return fmt.Errorf("creating the ESP: %w", err)
	}
	if err := esp.Mkdir(espBootDir); err != nil {
		return fmt.Errorf("creating the ESP's %s: %w", espBootDir, err)
	}
	for _, e := range []struct {
		path string
		data []byte
	}{{ESPShimPath, shim}, {ESPGRUBPath, grub}} {
		w, err := esp.OpenFile(e.path, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("creating the ESP's %s: %w", e.path, err)
		}
		if _, err := w.Write(e.data); err != nil {
			return fmt.Errorf("writing the ESP's %s: %w", e.path, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("writing the ESP's %s: %w", e.path, err)
		}
	}
	// go-diskfs stamps directory entries with the clock (or $SOURCE_DATE_EPOCH, which a library
	// should not set for its process); Chtimes reaches every entry but the volume label's.
	for _, e := range []string{"/EFI", "/EFI/.", "/EFI/..", espBootDir, espBootDir + "/.", espBootDir + "/..", ESPShimPath, ESPGRUBPath} {
		if err := esp.Chtimes(e, isoEpoch, isoEpoch, isoEpoch); err != nil {
			return fmt.Errorf("setting the ESP's times: %w", err)
		}
	}
	return clearFATLabelTime(f)
}

// clearFATLabelTime sets the times of the volume label entries in a FAT12/16 root directory to
// isoEpoch (go-diskfs writes a "NO NAME" label entry stamped with the clock and offers no way
// to change it). The root directory follows the reserved sectors and the FATs (BPB fields).
func clearFATLabelTime(f *os.File) error {
	bpb := make([]byte, 512)
	if _, err := f.ReadAt(bpb, 0); err != nil {
		return err
	}
	sector := int64(binary.LittleEndian.Uint16(bpb[11:13]))
	reserved := int64(binary.LittleEndian.Uint16(bpb[14:16]))
	fats := int64(bpb[16])
	rootEntries := int64(binary.LittleEndian.Uint16(bpb[17:19]))
	fatSectors := int64(binary.LittleEndian.Uint16(bpb[22:24]))
	start := (reserved + fats*fatSectors) * sector
	dir := make([]byte, rootEntries*32)
	if _, err := f.ReadAt(dir, start); err != nil {
		return err
	}
	date := uint16((isoEpoch.Year()-1980)<<9 | int(isoEpoch.Month())<<5 | isoEpoch.Day())
	for i := 0; i < len(dir); i += 32 {
		e := dir[i : i+32]
		if e[0] == 0 {
			break
		}
		if e[11]&0x08 == 0 || e[11] == 0x0f { // not a label, or a long-name entry
			continue
		}
		e[13] = 0
		binary.LittleEndian.PutUint16(e[14:16], 0) // creation time
		binary.LittleEndian.PutUint16(e[16:18], date)
		binary.LittleEndian.PutUint16(e[18:20], date) // access date
		binary.LittleEndian.PutUint16(e[22:24], 0)    // modification time
		binary.LittleEndian.PutUint16(e[24:26], date)
	}
	_, err := f.WriteAt(dir, start)
	return err
}

// ISO9660 layout used by normalizeISO (ECMA-119 and Rock Ridge 1.12).
const (
	isoBlock      = 2048
	isoPVDOffset  = 16 * isoBlock
	pvdRootRecord = 156
)

// normalizeISO overwrites what go-diskfs v1.9.4 takes from the clock and the build host (and
// pads the volume descriptor's identifiers as ECMA-119 says): the
// primary volume descriptor's dates (time.Now()), every directory record's recording date and
// Rock Ridge TF time stamps (the workspace's times; a file's change time cannot be set), and
// Rock Ridge PX owner, group and link count (the builder's uid/gid, the workspace
// filesystem's link counts). They become isoEpoch, root:root, 1 (files) and 2 (directories).
// go-diskfs offers no option for any of these, so the finished image is patched: the
// directory tree is walked from the root record, following Rock Ridge continuation areas.
func normalizeISO(iso []byte) error {
	if len(iso) < isoPVDOffset+isoBlock || iso[isoPVDOffset] != 1 || string(iso[isoPVDOffset+1:isoPVDOffset+6]) != "CD001" {
		return errors.New("normalizing the ISO: no primary volume descriptor at sector 16")
	}
	pvd := iso[isoPVDOffset : isoPVDOffset+isoBlock]
	// The identifiers (system, volume, volume set, publisher, preparer, application, copyright,
	// abstract and bibliographic files) are padded with spaces in ECMA-119; go-diskfs pads with
	// NULs, which BMCs and blkid would show or cut differently.
	for _, field := range [][2]int{{8, 40}, {40, 72}, {190, 318}, {318, 446}, {446, 574}, {574, 702}, {702, 739}, {739, 776}, {776, 813}} {
		for i := field[0]; i < field[1]; i++ {
			if pvd[i] == 0 {
				pvd[i] = ' '
			}
		}
	}
	stamp := []byte(isoEpoch.Format("20060102150405") + "00\x00")
	copy(pvd[813:830], stamp)                  // creation
	copy(pvd[830:847], stamp)                  // modification
	copy(pvd[847:864], "0000000000000000\x00") // expiration: not specified
	copy(pvd[864:881], stamp)                  // effective
	n := &isoNormalizer{iso: iso, seen: map[uint32]bool{}}
	rootRec := pvd[pvdRootRecord : pvdRootRecord+34]
	if err := n.record(rootRec); err != nil {
		return err
	}
	return n.directory(binary.LittleEndian.Uint32(rootRec[2:6]), binary.LittleEndian.Uint32(rootRec[10:14]))
}

type isoNormalizer struct {
	iso  []byte
	seen map[uint32]bool
}

func (n *isoNormalizer) directory(block, size uint32) error {
	if n.seen[block] {
		return nil
	}
	n.seen[block] = true
	start := int64(block) * isoBlock
	end := start + int64(size)
	if end > int64(len(n.iso)) {
		return fmt.Errorf("normalizing the ISO: directory at block %d runs past the end", block)
	}
	for off := start; off < end; {
		l := int64(n.iso[off])
		if l == 0 { // records do not cross blocks: the rest of this one is padding
			off = (off/isoBlock + 1) * isoBlock
			continue
		}
		rec := n.iso[off : off+l]
		if err := n.record(rec); err != nil {
			return err
		}
		nameLen := rec[32]
		self := nameLen == 1 && (rec[33] == 0 || rec[33] == 1)
		if rec[25]&0x02 != 0 && !self {
			if err := n.directory(binary.LittleEndian.Uint32(rec[2:6]), binary.LittleEndian.Uint32(rec[10:14])); err != nil {
				return err
			}
		}
		off += l
	}
	return nil
}

// record normalizes one directory record and its Rock Ridge entries.
func (n *isoNormalizer) record(rec []byte) error {
	isDir := rec[25]&0x02 != 0
	copy(rec[18:25], isoRecordingDate())
	su := 33 + int(rec[32])
	if su%2 == 1 {
		su++ // the padding byte after an even-length name
	}
	if su > len(rec) {
		return nil
	}
	return n.susp(rec[su:], isDir)
}

func (n *isoNormalizer) susp(area []byte, isDir bool) error {
	for len(area) >= 4 {
		sig, l := string(area[0:2]), int(area[2])
		if l < 4 || l > len(area) {
			return nil
		}
		e := area[:l]
		switch sig {
		case "TF":
			size := 7
			if e[4]&0x80 != 0 {
				return errors.New("normalizing the ISO: long-form Rock Ridge time stamps")
			}
			for off := 5; off+size <= l; off += size {
				copy(e[off:off+size], isoRecordingDate())
			}
		case "PX":
			links := uint32(1)
			if isDir {
				links = 2
			}
			if l >= 36 {
				putBoth32(e[12:20], links)
				putBoth32(e[20:28], 0)
				putBoth32(e[28:36], 0)
			}
		case "CE":
			if l >= 28 {
				block := binary.LittleEndian.Uint32(e[4:8])
				off := int64(block)*isoBlock + int64(binary.LittleEndian.Uint32(e[12:16]))
				size := int64(binary.LittleEndian.Uint32(e[20:24]))
				if off+size > int64(len(n.iso)) {
					return errors.New("normalizing the ISO: a continuation area past the end")
				}
				if err := n.susp(n.iso[off:off+size], isDir); err != nil {
					return err
				}
			}
		case "ST":
			return nil
		}
		area = area[l:]
	}
	return nil
}

// isoRecordingDate is isoEpoch as a directory record's 7-byte date (years since 1900, UTC).
func isoRecordingDate() []byte {
	t := isoEpoch
	return []byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}
}

// putBoth32 writes v as ISO9660's both-endian 32-bit number.
func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b[0:4], v)
	binary.BigEndian.PutUint32(b[4:8], v)
}
