package configdrive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"unicode/utf16"
)

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
