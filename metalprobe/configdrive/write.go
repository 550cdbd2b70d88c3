package configdrive

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"unicode/utf16"
)

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
