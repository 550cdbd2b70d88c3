package configdrive

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"strings"
	"unicode/utf16"
)

// disk is an open disk: a block device or a disk-image file.
type disk struct {
	f       *os.File
	path    string
	size    int64  // bytes, Seek(0, io.SeekEnd)
	ss      int64  // logical sector size
	sectors uint64 // size / ss
	isBlock bool
}

func openDisk(f *os.File, path string) (*disk, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	d := &disk{f: f, path: path, ss: 512, isBlock: fi.Mode()&os.ModeDevice != 0}
	switch {
	case d.isBlock:
		ss, err := logicalSectorSize(f)
		if err != nil {
			return nil, fmt.Errorf("logical sector size of %s: %w", path, err)
		}
		d.ss = int64(ss)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is neither a block device nor a regular file", path)
	}
	if d.ss < 512 || d.ss&(d.ss-1) != 0 {
		return nil, fmt.Errorf("%s has a logical sector size of %d bytes", path, d.ss)
	}
	if d.size, err = f.Seek(0, io.SeekEnd); err != nil {
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	d.sectors = uint64(d.size / d.ss)
	return d, nil
}

func (d *disk) readAt(n int64, off int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := d.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("reading %d bytes at byte %d of %s: %w", n, off, d.path, err)
	}
	return b, nil
}

func (d *disk) writeAt(b []byte, off int64) error {
	if _, err := d.f.WriteAt(b, off); err != nil {
		return fmt.Errorf("writing %d bytes at byte %d of %s: %w", len(b), off, d.path, err)
	}
	return nil
}

func (d *disk) sync() error {
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", d.path, err)
	}
	return nil
}

// fsKind is what a partition's first bytes say it holds, as far as config drives go.
type fsKind int

const (
	fsOther fsKind = iota
	fsISO
	fsFAT
)

// part is a used partition table entry.
type part struct {
	number     int    // 1-based: MBR entry or GPT entry index + 1
	start, end uint64 // sectors, end exclusive
	name       string // GPT partition name
	// set by findConfigDrive
	fs    fsKind
	label string
}

const (
	mbrEntries    = 446
	mbrEntrySize  = 16
	mbrSignature  = 510
	mbrTypeLinux  = 0x83
	mbrTypeGPT    = 0xee
	gptHeaderMin  = 92
	gptEntryMin   = 128
	gptEntriesMax = 1 << 20 // bytes of a partition entry array we accept
)

// Linux filesystem data, 0FC63DAF-8483-4772-8E79-3D69D8477DE4, as stored on disk.
var gptTypeLinux = guidBytes([16]byte{0x0f, 0xc6, 0x3d, 0xaf, 0x84, 0x83, 0x47, 0x72, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4})

// guidBytes turns a GUID's big-endian (text) bytes into its on-disk mixed-endian bytes.
func guidBytes(g [16]byte) [16]byte {
	var b [16]byte
	b[0], b[1], b[2], b[3] = g[3], g[2], g[1], g[0]
	b[4], b[5] = g[5], g[4]
	b[6], b[7] = g[7], g[6]
	copy(b[8:], g[8:])
	return b
}

// layout is a disk's partition table as read.
type layout struct {
	gpt   bool
	mbr   []byte // LBA 0, one sector
	parts []part

	// MBR
	freeMBR int // first free entry, -1 if none

	// GPT
	hdr                     []byte // primary header sector, raw
	hdrSize                 uint32
	entries                 []byte // primary entry array, raw (count*size bytes)
	entrySize, entryCount   uint32
	entriesLBA              uint64
	firstUsable, lastUsable uint64
	altLBA                  uint64
	freeGPT                 int // first free entry index, -1 if none
}

func (l *layout) kind() string {
	if l.gpt {
		return "GPT"
	}
	return "MBR"
}

// maxEnd is the sector after the last partition.
func (l *layout) maxEnd() uint64 {
	var end uint64
	for _, p := range l.parts {
		end = max(end, p.end)
	}
	return end
}

// readLayout reads the disk's partition table. Like Linux, it takes the disk for GPT when
// the MBR has a 0xEE entry, and for MBR when it has other entries only; a valid primary GPT
// header behind an MBR without entries (or without the 55AA signature) counts as GPT too.
func readLayout(d *disk) (*layout, error) {
	noTable := func(why string) error {
		msg := fmt.Errorf("%w on %s: the image is not a partitioned disk image", ErrNoPartitionTable, d.path)
		if why != "" {
			msg = fmt.Errorf("%w (%s)", msg, why)
		}
		return msg
	}
	if d.sectors < 2 {
		return nil, noTable(fmt.Sprintf("the disk is only %d bytes", d.size))
	}
	lba0, err := d.readAt(d.ss, 0)
	if err != nil {
		return nil, err
	}
	l := &layout{mbr: lba0, freeMBR: -1, freeGPT: -1}
	mbrSig := lba0[mbrSignature] == 0x55 && lba0[mbrSignature+1] == 0xaa
	var mbrParts []part
	hasEE, mbrValid := false, mbrSig
	if mbrSig {
		for i := range 4 {
			e := lba0[mbrEntries+i*mbrEntrySize : mbrEntries+(i+1)*mbrEntrySize]
			if e[0] != 0 && e[0] != 0x80 {
				mbrValid = false
				break
			}
			typ := e[4]
			start := uint64(binary.LittleEndian.Uint32(e[8:12]))
			size := uint64(binary.LittleEndian.Uint32(e[12:16]))
			if typ == 0 && size == 0 {
				if l.freeMBR < 0 {
					l.freeMBR = i
				}
				continue
			}
			if typ == mbrTypeGPT {
				hasEE = true
			}
			if size == 0 || start == 0 {
				// an entry Linux would skip, but one we do not overwrite either
				continue
			}
			mbrParts = append(mbrParts, part{number: i + 1, start: start, end: start + size})
		}
	}
	gptErr := l.readGPT(d)
	switch {
	case hasEE && gptErr != nil:
		return nil, fmt.Errorf("%s has a protective MBR but no valid primary GPT: %w", d.path, gptErr)
	case gptErr == nil && (hasEE || !mbrValid || len(mbrParts) == 0):
		l.gpt = true
	case mbrValid && len(mbrParts) > 0:
		l.parts = mbrParts
	case !mbrSig:
		return nil, noTable("")
	case !mbrValid:
		return nil, noTable("a 55AA boot signature, but not partition entries")
	default:
		return nil, noTable("an MBR without partitions")
	}
	for _, p := range l.parts {
		if p.end > d.sectors {
			return nil, fmt.Errorf("%s partition %d of %s ends at byte %d, past the end of the device (%d bytes)",
				l.kind(), p.number, d.path, int64(p.end)*d.ss, d.size)
		}
	}
	return l, nil
}

// readGPT reads and checks the primary GPT header and its entries.
func (l *layout) readGPT(d *disk) error {
	hdr, err := d.readAt(d.ss, d.ss)
	if err != nil {
		return err
	}
	if string(hdr[0:8]) != "EFI PART" {
		return errors.New("no GPT header signature at LBA 1")
	}
	hsize := binary.LittleEndian.Uint32(hdr[12:16])
	if hsize < gptHeaderMin || int64(hsize) > d.ss {
		return fmt.Errorf("GPT header size %d", hsize)
	}
	if crc := binary.LittleEndian.Uint32(hdr[16:20]); crc != headerCRC(hdr, hsize) {
		return fmt.Errorf("GPT header CRC %08x, computed %08x", crc, headerCRC(hdr, hsize))
	}
	if my := binary.LittleEndian.Uint64(hdr[24:32]); my != 1 {
		return fmt.Errorf("primary GPT header says it is at LBA %d", my)
	}
	l.hdr, l.hdrSize = hdr, hsize
	l.altLBA = binary.LittleEndian.Uint64(hdr[32:40])
	l.firstUsable = binary.LittleEndian.Uint64(hdr[40:48])
	l.lastUsable = binary.LittleEndian.Uint64(hdr[48:56])
	l.entriesLBA = binary.LittleEndian.Uint64(hdr[72:80])
	l.entryCount = binary.LittleEndian.Uint32(hdr[80:84])
	l.entrySize = binary.LittleEndian.Uint32(hdr[84:88])
	if l.entrySize < gptEntryMin || l.entrySize&(l.entrySize-1) != 0 {
		return fmt.Errorf("GPT entry size %d", l.entrySize)
	}
	n := uint64(l.entryCount) * uint64(l.entrySize)
	if n == 0 || n > gptEntriesMax {
		return fmt.Errorf("GPT entry array of %d entries of %d bytes", l.entryCount, l.entrySize)
	}
	if l.entriesLBA < 2 || l.entriesLBA+l.arraySectors(d) > l.firstUsable || l.firstUsable > l.lastUsable {
		return fmt.Errorf("GPT entries at LBA %d and usable LBAs %d-%d do not fit together", l.entriesLBA, l.firstUsable, l.lastUsable)
	}
	if l.entriesLBA+l.arraySectors(d) > d.sectors {
		return fmt.Errorf("GPT entries at LBA %d past the end of the device", l.entriesLBA)
	}
	entries, err := d.readAt(int64(n), int64(l.entriesLBA)*d.ss)
	if err != nil {
		return err
	}
	if crc := binary.LittleEndian.Uint32(hdr[88:92]); crc != crc32.ChecksumIEEE(entries) {
		return fmt.Errorf("GPT entries CRC %08x, computed %08x", crc, crc32.ChecksumIEEE(entries))
	}
	l.entries = entries
	l.parts = nil
	for i := range int(l.entryCount) {
		e := entries[i*int(l.entrySize) : (i+1)*int(l.entrySize)]
		if isZero(e[0:16]) {
			if l.freeGPT < 0 {
				l.freeGPT = i
			}
			continue
		}
		first := binary.LittleEndian.Uint64(e[32:40])
		last := binary.LittleEndian.Uint64(e[40:48])
		if last < first {
			return fmt.Errorf("GPT partition %d ends (LBA %d) before it starts (LBA %d)", i+1, last, first)
		}
		l.parts = append(l.parts, part{number: i + 1, start: first, end: last + 1, name: gptName(e[56:128])})
	}
	return nil
}

func (l *layout) arraySectors(d *disk) uint64 {
	n := uint64(l.entryCount) * uint64(l.entrySize)
	ss := uint64(d.ss)
	return (n + ss - 1) / ss
}

func headerCRC(hdr []byte, size uint32) uint32 {
	h := bytes.Clone(hdr[:size])
	clear(h[16:20])
	return crc32.ChecksumIEEE(h)
}

func gptName(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

func isZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// findConfigDrive finds the partition that is a config drive: an ISO9660 or FAT filesystem
// labelled config-2, or a GPT partition named config-2. More than one is an error.
func findConfigDrive(d *disk, l *layout) (part, bool, error) {
	var found []part
	for _, p := range l.parts {
		p.fs, p.label = probeFS(d, p)
		if (p.fs != fsOther && strings.EqualFold(p.label, Label)) || (l.gpt && p.name == Label) {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return part{}, false, nil
	case 1:
		return found[0], true, nil
	}
	nums := make([]string, len(found))
	for i, p := range found {
		nums[i] = fmt.Sprint(p.number)
	}
	return part{}, false, fmt.Errorf("%s has %d %s partitions (%s): refusing to guess which one the OS would use",
		d.path, len(found), Label, strings.Join(nums, ", "))
}

// probeFS says whether a partition holds an ISO9660 or FAT filesystem, and its label.
func probeFS(d *disk, p part) (fsKind, string) {
	size := int64(p.end-p.start) * d.ss
	start := int64(p.start) * d.ss
	if size >= pvdOffset+isoBlock {
		if b, err := d.readAt(isoBlock, start+pvdOffset); err == nil && isPVD(b) {
			return fsISO, pvdVolumeID(b)
		}
	}
	if size >= 512 {
		if b, err := d.readAt(512, start); err == nil && b[510] == 0x55 && b[511] == 0xaa {
			switch {
			case string(b[82:87]) == "FAT32":
				return fsFAT, strings.TrimRight(string(b[71:82]), " \x00")
			case string(b[54:57]) == "FAT":
				return fsFAT, strings.TrimRight(string(b[43:54]), " \x00")
			}
		}
	}
	return fsOther, ""
}

// writeDisk writes the config drive's ISO onto the disk behind dev.
func writeDisk(d *disk, iso []byte) (Result, error) {
	path := d.path
	l, err := readLayout(d)
	if err != nil {
		return Result{}, err
	}
	partBytes := (int64(len(iso)) + Align - 1) / Align * Align
	partBytes = max(partBytes, MinPartitionSize)
	if partBytes > MaxPartitionSize {
		return Result{}, fmt.Errorf("the config drive is %d bytes, more than the %d bytes (%d MiB) a config-2 partition may have",
			len(iso), MaxPartitionSize, MaxPartitionSize>>20)
	}
	if partBytes%d.ss != 0 {
		return Result{}, fmt.Errorf("%s has a logical sector size of %d bytes, which does not divide 1 MiB", path, d.ss)
	}

	existing, found, err := findConfigDrive(d, l)
	if err != nil {
		return Result{}, err
	}
	var p part
	if found {
		p = existing
		if have := int64(p.end-p.start) * d.ss; int64(len(iso)) > have {
			return Result{}, fmt.Errorf("%s partition %d of %s is %d bytes, too small for the new config drive of %d bytes; "+
				"it is not moved or grown", Label, p.number, path, have, len(iso))
		}
	} else {
		p, err = plan(d, l, uint64(partBytes/d.ss))
		if err != nil {
			return Result{}, err
		}
	}
	// The content goes first: until the table names the partition, its sectors are free space.
	if err := writeContent(d, p, iso); err != nil {
		return Result{}, err
	}
	if err := d.sync(); err != nil {
		return Result{}, err
	}
	switch {
	case l.gpt:
		err = writeGPT(d, l, p, !found)
	case !found:
		err = writeMBREntry(d, l, p)
	}
	if err != nil {
		return Result{}, err
	}
	if d.isBlock {
		// Errors are ignored: the table on the disk is right; see Write.
		_ = rereadPartitions(d.f, p)
	}
	return Result{Partition: p.number, Start: int64(p.start) * d.ss, Size: int64(p.end-p.start) * d.ss}, nil
}

// plan places a new partition of n sectors after the last partition.
func plan(d *disk, l *layout, n uint64) (part, error) {
	align := uint64(Align / d.ss)
	lo := max(l.maxEnd(), align)
	var limit uint64 // sector after the last one the partition may use
	if l.gpt {
		if l.freeGPT < 0 {
			return part{}, fmt.Errorf("all %d GPT entries of %s are used", l.entryCount, d.path)
		}
		lo = max(lo, l.firstUsable)
		lastUsable, err := l.deviceLastUsable(d)
		if err != nil {
			return part{}, err
		}
		limit = lastUsable + 1
	} else {
		if l.freeMBR < 0 {
			return part{}, fmt.Errorf("all 4 primary MBR entries of %s are used: no room for a %s partition", d.path, Label)
		}
		limit = min(d.sectors, 1<<32)
	}
	start := (lo + align - 1) / align * align
	if start+n > limit {
		where := "the end of the device"
		if l.gpt {
			where = "the backup GPT at the end of the device"
		}
		return part{}, fmt.Errorf("no room for the %s partition on %s: it needs %d bytes from byte %d (the first 1 MiB boundary after the last partition, which ends at byte %d), "+
			"but %s leaves only up to byte %d (the device is %d bytes)",
			Label, d.path, int64(n)*d.ss, int64(start)*d.ss, int64(l.maxEnd())*d.ss, where, int64(limit)*d.ss, d.size)
	}
	p := part{start: start, end: start + n}
	if l.gpt {
		p.number = l.freeGPT + 1
	} else {
		p.number = l.freeMBR + 1
	}
	return p, nil
}

// deviceLastUsable is the last usable LBA of a GPT that ends at the end of the device.
func (l *layout) deviceLastUsable(d *disk) (uint64, error) {
	arr := l.arraySectors(d)
	if d.sectors < 2+arr+l.firstUsable {
		return 0, fmt.Errorf("%s is too small for its GPT", d.path)
	}
	last := d.sectors - 2 - arr
	if end := l.maxEnd(); end > last+1 {
		return 0, fmt.Errorf("GPT partitions of %s end at byte %d, past the space the backup GPT leaves at the end of the device (%d bytes)",
			d.path, int64(end)*d.ss, d.size)
	}
	return last, nil
}

// writeContent writes iso at the start of partition p and zeroes the rest of it.
func writeContent(d *disk, p part, iso []byte) error {
	start, end := int64(p.start)*d.ss, int64(p.end)*d.ss
	if start+int64(len(iso)) > end {
		return fmt.Errorf("internal error: %d bytes do not fit in partition %d", len(iso), p.number)
	}
	if err := d.writeAt(iso, start); err != nil {
		return err
	}
	zero := make([]byte, Align)
	for off := start + int64(len(iso)); off < end; {
		n := min(int64(len(zero)), end-off)
		if err := d.writeAt(zero[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// writeMBREntry fills the free MBR entry with partition p; no other byte of the MBR changes.
func writeMBREntry(d *disk, l *layout, p part) error {
	size := p.end - p.start
	if p.start > 0xffffffff || size > 0xffffffff {
		return fmt.Errorf("internal error: partition at sector %d of %d sectors does not fit in an MBR", p.start, size)
	}
	e := make([]byte, mbrEntrySize)
	copy(e[1:4], chs(p.start))
	e[4] = mbrTypeLinux
	copy(e[5:8], chs(p.end-1))
	binary.LittleEndian.PutUint32(e[8:12], uint32(p.start))
	binary.LittleEndian.PutUint32(e[12:16], uint32(size))
	if err := d.writeAt(e, int64(mbrEntries+(p.number-1)*mbrEntrySize)); err != nil {
		return err
	}
	return d.sync()
}

// chs is the CHS address (head, sector|cylinder high bits, cylinder) of an LBA in the
// 255-head, 63-sector geometry, or the 1023/254/63 marker past its reach.
func chs(lba uint64) []byte {
	const heads, spt = 255, 63
	c := lba / (heads * spt)
	if c > 1023 {
		return []byte{254, 0xff, 0xff}
	}
	h := (lba / spt) % heads
	s := lba%spt + 1
	return []byte{byte(h), byte(s) | byte((c>>2)&0xc0), byte(c)}
}

// writeGPT rewrites the GPT for the size of the device, with partition p added when add is
// set: backup entries and header at the end of the device first, then the primary ones,
// then the protective MBR, and last the stale backup header the image left behind.
func writeGPT(d *disk, l *layout, p part, add bool) error {
	entries := bytes.Clone(l.entries)
	if add {
		e := entries[(p.number-1)*int(l.entrySize) : p.number*int(l.entrySize)]
		clear(e)
		copy(e[0:16], gptTypeLinux[:])
		if _, err := rand.Read(e[16:32]); err != nil {
			return err
		}
		e[16+7] = e[16+7]&0x0f | 0x40 // version 4 (byte 7 holds the high byte of time_hi on disk)
		e[16+8] = e[16+8]&0x3f | 0x80 // RFC 4122 variant
		binary.LittleEndian.PutUint64(e[32:40], p.start)
		binary.LittleEndian.PutUint64(e[40:48], p.end-1)
		for i, c := range utf16.Encode([]rune(Label)) {
			binary.LittleEndian.PutUint16(e[56+2*i:], c)
		}
	}
	lastUsable, err := l.deviceLastUsable(d)
	if err != nil {
		return err
	}
	backupLBA := d.sectors - 1
	backupEntriesLBA := lastUsable + 1
	if p.end > lastUsable+1 || p.start < l.firstUsable {
		return fmt.Errorf("internal error: partition %d (LBA %d-%d) outside usable LBAs %d-%d", p.number, p.start, p.end-1, l.firstUsable, lastUsable)
	}
	entriesCRC := crc32.ChecksumIEEE(entries)
	header := func(my, alt, entriesLBA uint64) []byte {
		h := bytes.Clone(l.hdr)
		binary.LittleEndian.PutUint64(h[24:32], my)
		binary.LittleEndian.PutUint64(h[32:40], alt)
		binary.LittleEndian.PutUint64(h[48:56], lastUsable)
		binary.LittleEndian.PutUint64(h[72:80], entriesLBA)
		binary.LittleEndian.PutUint32(h[88:92], entriesCRC)
		binary.LittleEndian.PutUint32(h[16:20], headerCRC(h, l.hdrSize))
		return h
	}
	// The image's backup header, if it is where the primary said and no partition covers it.
	staleBackup := int64(-1)
	if old := l.altLBA; old != backupLBA && old > l.lastUsable && old < backupEntriesLBA && !covered(l.parts, p, old) {
		if b, err := d.readAt(d.ss, int64(old)*d.ss); err == nil && string(b[0:8]) == "EFI PART" &&
			binary.LittleEndian.Uint64(b[24:32]) == old {
			staleBackup = int64(old) * d.ss
		}
	}

	for _, w := range []struct {
		b   []byte
		off int64
	}{
		{entries, int64(backupEntriesLBA) * d.ss},
		{header(backupLBA, 1, backupEntriesLBA), int64(backupLBA) * d.ss},
		{entries, int64(l.entriesLBA) * d.ss},
		{header(1, backupLBA, l.entriesLBA), d.ss},
	} {
		if err := d.writeAt(w.b, w.off); err != nil {
			return err
		}
		if err := d.sync(); err != nil {
			return err
		}
	}
	if err := writeProtectiveMBR(d, l); err != nil {
		return err
	}
	if staleBackup >= 0 {
		if err := d.writeAt(make([]byte, d.ss), staleBackup); err != nil {
			return err
		}
	}
	return d.sync()
}

// covered says whether an LBA is inside one of the partitions.
func covered(parts []part, extra part, lba uint64) bool {
	in := func(q part) bool { return lba >= q.start && lba < q.end }
	for _, q := range parts {
		if in(q) {
			return true
		}
	}
	return in(extra)
}

// writeProtectiveMBR makes the protective MBR's 0xEE entry cover the device. A hybrid MBR
// (0xEE with other entries) is left alone; an MBR without entries gets a protective one.
// Boot code and disk signature are never touched.
func writeProtectiveMBR(d *disk, l *layout) error {
	size := min(d.sectors-1, 0xffffffff)
	mbr := l.mbr
	sig := mbr[mbrSignature] == 0x55 && mbr[mbrSignature+1] == 0xaa
	ee, others := -1, 0
	if sig {
		for i := range 4 {
			e := mbr[mbrEntries+i*mbrEntrySize : mbrEntries+(i+1)*mbrEntrySize]
			switch {
			case e[4] == mbrTypeGPT && ee < 0:
				ee = i
			case !isZero(e):
				others++
			}
		}
	}
	switch {
	case ee >= 0 && others == 0:
		off := mbrEntries + ee*mbrEntrySize
		e := bytes.Clone(mbr[off : off+mbrEntrySize])
		if binary.LittleEndian.Uint32(e[8:12]) != 1 {
			return nil // not the usual protective entry: leave it
		}
		copy(e[5:8], chs(size))
		binary.LittleEndian.PutUint32(e[12:16], uint32(size))
		return d.writeAt(e, int64(off))
	case ee >= 0:
		return nil // hybrid MBR
	default:
		b := make([]byte, 512-mbrEntries)
		e := b[:mbrEntrySize]
		copy(e[1:4], chs(1))
		e[4] = mbrTypeGPT
		copy(e[5:8], chs(size))
		binary.LittleEndian.PutUint32(e[8:12], 1)
		binary.LittleEndian.PutUint32(e[12:16], uint32(size))
		b[len(b)-2], b[len(b)-1] = 0x55, 0xaa
		return d.writeAt(b, mbrEntries)
	}
}
