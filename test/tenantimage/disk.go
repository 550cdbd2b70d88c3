package tenantimage

// The disk is written with Debian's own tools, none of which needs root or a loop device:
// mkfs.vfat formats the partition inside the image file (--offset), mtools' mcopy copies the
// kernel, initramfs, syslinux.cfg and the UEFI loaders onto it (-i file@@offset; mmd makes
// their directories), and syslinux installs ldlinux.sys, ldlinux.c32 and its boot sector the
// same way (--offset). The MBR is syslinux's mbr.bin with a partition table written here.
//
// Reproducibility: mkfs.vfat --invariant fixes the time stamps it writes and -i the volume
// ID; mtools (and so syslinux, which runs mcopy and mattrib) takes "now" from
// SOURCE_DATE_EPOCH (FATEpoch), in UTC; the rest is a function of the inputs.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// FATEpoch is the time stamp (SOURCE_DATE_EPOCH, 2024-01-01T00:00:00Z) of every file on the
// boot partition.
const FATEpoch = 1704067200

// MBRCode is Debian's syslinux MBR: it loads the boot sector of the active partition.
const MBRCode = "/usr/lib/syslinux/mbr/mbr.bin"

// toolPackages are the Debian packages whose programs and files go into the disk.
var toolPackages = []string{"syslinux", "syslinux-common", "mtools", "dosfstools"}

// tools are the programs that write the disk.
type tools struct {
	syslinux, mcopy, mmd, mkfs string
	mbr                        []byte
	versions                   map[string]string
}

// findTools finds the programs and mbr.bin, and the versions of their packages.
func findTools(ctx context.Context) (*tools, error) {
	t := &tools{versions: map[string]string{}}
	var missing []string
	look := func(name string, dirs ...string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, d := range dirs { // mkfs.vfat is in /usr/sbin, not in a user's PATH
			if p := filepath.Join(d, name); isExecutable(p) {
				return p
			}
		}
		missing = append(missing, name)
		return ""
	}
	t.syslinux = look("syslinux")
	t.mcopy = look("mcopy")
	t.mmd = look("mmd")
	t.mkfs = look("mkfs.vfat", "/usr/sbin", "/sbin")
	mbr, err := os.ReadFile(MBRCode)
	switch {
	case err != nil:
		missing = append(missing, MBRCode)
	case len(mbr) > 440:
		return nil, fmt.Errorf("%s is %d bytes, more than the 440 of an MBR's boot code", MBRCode, len(mbr))
	}
	t.mbr = mbr
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s missing: %w", strings.Join(missing, ", "), errTools)
	}
	args := append([]string{"-W", "-f", "${Package} ${Version}\n"}, toolPackages...)
	out, err := exec.CommandContext(ctx, "dpkg-query", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-query %s: %v: %w", strings.Join(toolPackages, " "), err, errTools)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if pkg, version, ok := strings.Cut(line, " "); ok && version != "" {
			t.versions[pkg] = version
		}
	}
	for _, pkg := range toolPackages {
		if t.versions[pkg] == "" {
			return nil, fmt.Errorf("package %s is not installed: %w", pkg, errTools)
		}
	}
	return t, nil
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// bootFile is a file copied onto the boot partition; name is its path there, in directories
// (EFI/BOOT/...) or not.
type bootFile struct {
	name string
	data []byte
}

// assembleDisk writes the disk in dir and returns its bytes.
func assembleDisk(ctx context.Context, t *tools, dir string, files []bootFile, log io.Writer) ([]byte, error) {
	if err := os.MkdirAll(filepath.Join(dir, "files"), 0o755); err != nil {
		return nil, err
	}
	disk := filepath.Join(dir, DiskFile)
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		return nil, err
	}
	if err := os.Truncate(disk, DiskBytes); err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"SOURCE_DATE_EPOCH="+strconv.Itoa(FATEpoch), "TZ=UTC", "LC_ALL=C",
		// The image file holds a partition table before the filesystem; mtools would check
		// the geometry of a floppy.
		"MTOOLS_SKIP_CHECK=1")
	run := func(name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = env
		var out bytes.Buffer
		w := io.MultiWriter(log, &out)
		cmd.Stdout, cmd.Stderr = w, w // one writer: exec copies both to it from one goroutine
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
		}
		return nil
	}
	const sector = 512
	if err := run(t.mkfs, "--invariant", "-i", VolumeID, "-n", VolumeLabel,
		"-F", "32", "-s", "1", "-S", strconv.Itoa(sector),
		"-h", strconv.Itoa(PartitionStart/sector), "--offset", strconv.Itoa(PartitionStart/sector),
		disk, strconv.Itoa(PartitionBytes/1024)); err != nil {
		return nil, err
	}
	// Directories first, parents before children, each once; then every file, in the order
	// given, to its path: FAT keeps entries in the order they were written.
	part := fmt.Sprintf("%s@@%d", disk, PartitionStart)
	made := map[string]bool{}
	for i, f := range files {
		if err := mkdirs(path.Dir(f.name), made, func(d string) error { return run(t.mmd, "-i", part, "::/"+d) }); err != nil {
			return nil, err
		}
		local := filepath.Join(dir, "files", strconv.Itoa(i))
		if err := os.WriteFile(local, f.data, 0o644); err != nil {
			return nil, err
		}
		if err := run(t.mcopy, "-i", part, "-o", local, "::/"+f.name); err != nil {
			return nil, err
		}
	}
	if err := run(t.syslinux, "--offset", strconv.Itoa(PartitionStart), "--install", disk); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(disk)
	if err != nil {
		return nil, err
	}
	copyBackupBootSector(data[PartitionStart:])
	writeMBR(data[:sector], t.mbr)
	return data, nil
}

// mkdirs makes dir and its parents on the partition with mkdir, those not in made yet.
func mkdirs(dir string, made map[string]bool, mkdir func(string) error) error {
	if dir == "." || dir == "/" || dir == "" || made[dir] {
		return nil
	}
	if err := mkdirs(path.Dir(dir), made, mkdir); err != nil {
		return err
	}
	made[dir] = true
	return mkdir(dir)
}

// writeMBR writes the boot code, the disk signature and a partition table with one entry,
// the bootable boot partition, into the first sector.
func writeMBR(sector, code []byte) {
	clear(sector)
	copy(sector, code)
	binary.LittleEndian.PutUint32(sector[440:], DiskSignature)
	const lba = 512
	start, count := uint32(PartitionStart/lba), uint32(PartitionBytes/lba)
	e := sector[446:462]
	e[0] = 0x80 // active: mbr.bin boots it
	s := chs(start)
	copy(e[1:4], s[:])
	e[4] = PartitionType
	end := chs(start + count - 1)
	copy(e[5:8], end[:])
	binary.LittleEndian.PutUint32(e[8:], start)
	binary.LittleEndian.PutUint32(e[12:], count)
	sector[510], sector[511] = 0x55, 0xaa
}

// chs is an LBA's cylinder-head-sector address in an MBR entry, for 255 heads and 63 sectors
// per track; beyond cylinder 1023 it is the customary 1023/254/63.
func chs(lba uint32) [3]byte {
	const heads, sectors = 255, 63
	c := lba / (heads * sectors)
	if c > 1023 {
		return [3]byte{0xfe, 0xff, 0xff}
	}
	h := (lba / sectors) % heads
	s := lba%sectors + 1
	return [3]byte{byte(h), byte(s) | byte(c>>2)&0xc0, byte(c)}
}

// copyBackupBootSector copies the FAT32 boot sector syslinux wrote (its boot code, in front
// of the BPB) to the backup boot sector (BPB_BkBootSec, 6 with mkfs.vfat), which syslinux
// leaves as mkfs.vfat wrote it; fsck.fat would otherwise report that they differ.
func copyBackupBootSector(fat []byte) {
	const sector = 512
	backup := int(binary.LittleEndian.Uint16(fat[50:52]))
	if backup == 0 || backup == 0xffff || (backup+1)*sector > len(fat) {
		return
	}
	copy(fat[backup*sector:(backup+1)*sector], fat[:sector])
}
