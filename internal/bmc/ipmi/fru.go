package ipmi

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// FRU is what Ironfleet reads from a FRU device's inventory (Platform Management FRU
// Information Storage Definition v1.0 / 1.3): the chassis, board and product info areas.
// Absent areas and fields are empty strings.
type FRU struct {
	Chassis ChassisArea
	Board   BoardArea
	Product ProductArea
	// Warnings lists what was wrong but tolerated (bad checksums, truncated areas).
	Warnings []string
}

// ChassisArea is the chassis info area.
type ChassisArea struct {
	Type         uint8
	PartNumber   string
	SerialNumber string
	Custom       []string
}

// BoardArea is the board info area.
type BoardArea struct {
	// MfgMinutes is the manufacturing time in minutes since 1996-01-01 00:00 (0 = unspecified).
	MfgMinutes   uint32
	Manufacturer string
	ProductName  string
	SerialNumber string
	PartNumber   string
	FileID       string
	Custom       []string
}

// ProductArea is the product info area.
type ProductArea struct {
	Manufacturer string
	Name         string
	PartModel    string
	Version      string
	SerialNumber string
	AssetTag     string
	FileID       string
	Custom       []string
}

// Identity is the system's manufacturer, model and serial number: the product area's, each
// falling back to the board area's when empty.
func (f FRU) Identity() (manufacturer, model, serial string) {
	return firstNonEmpty(f.Product.Manufacturer, f.Board.Manufacturer),
		firstNonEmpty(f.Product.Name, f.Product.PartModel, f.Board.ProductName),
		firstNonEmpty(f.Product.SerialNumber, f.Board.SerialNumber)
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ErrNoFRU is returned by ParseFRU when the data has no valid common header.
var ErrNoFRU = errors.New("no FRU common header")

const (
	fruHeaderLen   = 8
	fruEndOfFields = 0xC1
)

// ParseFRU decodes FRU data as read from the device (Read FRU Data from offset 0). Like ipmitool
// it is lenient: a bad header or area checksum, an area running past the data, or an area that
// ends before its mandatory fields only adds a warning, and whatever could be read is kept.
// Only data without a version-1 common header is an error. It never reads past data and
// allocates at most in proportion to it.
func ParseFRU(data []byte) (FRU, error) {
	var f FRU
	if len(data) < fruHeaderLen || data[0]&0x0f != 0x01 {
		return f, ErrNoFRU
	}
	if checksum(data[:fruHeaderLen]) != 0 {
		f.warnf("common header checksum mismatch")
	}
	if area := f.area(data, "chassis", data[2]); area != nil && len(area) >= 3 {
		f.Chassis.Type = area[2]
		fields, custom := f.fields(area[3:], "chassis", 2)
		f.Chassis.PartNumber, f.Chassis.SerialNumber = fields[0], fields[1]
		f.Chassis.Custom = custom
	}
	if area := f.area(data, "board", data[3]); area != nil && len(area) >= 6 {
		f.Board.MfgMinutes = uint32(area[3]) | uint32(area[4])<<8 | uint32(area[5])<<16
		fields, custom := f.fields(area[6:], "board", 5)
		f.Board.Manufacturer, f.Board.ProductName, f.Board.SerialNumber, f.Board.PartNumber, f.Board.FileID =
			fields[0], fields[1], fields[2], fields[3], fields[4]
		f.Board.Custom = custom
	}
	if area := f.area(data, "product", data[4]); area != nil && len(area) >= 3 {
		fields, custom := f.fields(area[3:], "product", 7)
		p := &f.Product
		p.Manufacturer, p.Name, p.PartModel, p.Version, p.SerialNumber, p.AssetTag, p.FileID =
			fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6]
		p.Custom = custom
	}
	return f, nil
}

func (f *FRU) warnf(format string, args ...any) {
	f.Warnings = append(f.Warnings, fmt.Sprintf(format, args...))
}

// area returns the info area starting at offset×8, cut to its declared length (byte 1, ×8) and
// to the data; nil when the header says the area is absent or it starts past the data.
func (f *FRU) area(data []byte, name string, offset byte) []byte {
	if offset == 0 {
		return nil
	}
	start := int(offset) * 8
	if start+2 > len(data) {
		f.warnf("%s area at byte %d starts past the %d bytes of FRU data", name, start, len(data))
		return nil
	}
	end := start + int(data[start+1])*8
	switch {
	case end <= start:
		f.warnf("%s area has length 0", name)
		end = len(data)
	case end > len(data):
		f.warnf("%s area runs %d bytes past the FRU data", name, end-len(data))
		end = len(data)
	default:
		if checksum(data[start:end]) != 0 {
			f.warnf("%s area checksum mismatch", name)
		}
	}
	return data[start:end]
}

// fields reads type/length-prefixed fields until the end-of-fields marker (0xC1) or the end
// of b: the first n are the area's fixed fields (missing ones stay ""), the rest custom.
func (f *FRU) fields(b []byte, name string, n int) ([]string, []string) {
	fixed := make([]string, n)
	var custom []string
	i, k := 0, 0
	for i < len(b) && b[i] != fruEndOfFields {
		tl := b[i]
		length := int(tl & 0x3f)
		i++
		if i+length > len(b) {
			f.warnf("%s area field %d runs past the area", name, k)
			length = len(b) - i
		}
		value := decodeField(tl>>6, b[i:i+length])
		i += length
		if k < n {
			fixed[k] = value
		} else {
			custom = append(custom, value)
		}
		k++
	}
	if i >= len(b) {
		f.warnf("%s area has no end-of-fields marker", name)
	}
	return fixed, custom
}

// checksum is the zero checksum FRU areas use: all bytes, checksum included, sum to 0.
func checksum(b []byte) byte {
	var sum byte
	for _, x := range b {
		sum += x
	}
	return sum
}

// bcdPlus maps BCD plus nibbles as ipmitool does (0xD–0xF are reserved in the spec).
const bcdPlus = "0123456789 -.:,_"

// decodeField decodes a field's bytes by the type code from its type/length byte: 0 binary
// (shown as hex), 1 BCD plus, 2 6-bit packed ASCII, 3 8-bit ASCII + Latin-1. Trailing spaces
// and NULs, common padding, are trimmed.
func decodeField(typ byte, b []byte) string {
	var s string
	switch typ {
	case 0:
		s = hex.EncodeToString(b)
	case 1:
		out := make([]byte, 0, 2*len(b))
		for _, x := range b {
			out = append(out, bcdPlus[x>>4], bcdPlus[x&0x0f])
		}
		s = string(out)
	case 2:
		s = decodeSixBitASCII(b)
	default:
		out := make([]rune, 0, len(b))
		for _, x := range b {
			out = append(out, rune(x)) // Latin-1 is the first 256 code points
		}
		s = string(out)
	}
	return strings.TrimRight(s, " \x00")
}

// decodeSixBitASCII unpacks 6-bit ASCII (0x20 + value), four characters per three bytes, least
// significant bits first.
func decodeSixBitASCII(b []byte) string {
	out := make([]byte, 0, len(b)*8/6)
	var acc uint32
	bits := 0
	for _, x := range b {
		acc |= uint32(x) << bits
		bits += 8
		for bits >= 6 {
			out = append(out, byte(acc&0x3f)+0x20)
			acc >>= 6
			bits -= 6
		}
	}
	return string(out)
}
