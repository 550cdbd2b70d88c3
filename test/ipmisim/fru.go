package ipmisim

import (
	"fmt"
	"unicode/utf8"
)

// FRU is what FRU device 0 holds: the product area (Manufacturer, Product, Serial,
// PartNumber, Version) and the board area (the Board* fields, each defaulting to its product
// counterpart).
type FRU struct {
	Manufacturer, Product, Serial string
	PartNumber, Version           string
	BoardManufacturer             string
	BoardProduct                  string
	BoardSerial                   string
	BoardPartNumber               string
}

// maxFRUField is the longest field a type/length byte describes (6 bits).
const maxFRUField = 63

// EncodeFRU renders f as an IPMI Platform Management FRU Information Storage v1.0 image:
// the common header, a board info area and a product info area, each a multiple of 8
// bytes with a zero checksum, fields as 8-bit ASCII (type 11b), English, no
// manufacturing date, each area ending with 0xC1.
func EncodeFRU(f FRU) ([]byte, error) {
	board, err := fruArea([]byte{0x00, 0x00, 0x00, 0x00}, // language English, mfg date unspecified
		or(f.BoardManufacturer, f.Manufacturer), or(f.BoardProduct, f.Product), or(f.BoardSerial, f.Serial),
		or(f.BoardPartNumber, f.PartNumber), "")
	if err != nil {
		return nil, fmt.Errorf("FRU board area: %w", err)
	}
	product, err := fruArea([]byte{0x00}, // language English
		f.Manufacturer, f.Product, f.PartNumber, f.Version, f.Serial, "", "")
	if err != nil {
		return nil, fmt.Errorf("FRU product area: %w", err)
	}
	header := []byte{0x01, 0, 0, 1, byte(1 + len(board)/8), 0, 0, 0}
	header[7] = checksum(header[:7])
	out := append(header, board...)
	return append(out, product...), nil
}

// fruArea is one info area: version 1, its length in 8-byte units, the fixed bytes, the
// fields, the end marker, padding and the checksum.
func fruArea(fixed []byte, fields ...string) ([]byte, error) {
	a := append([]byte{0x01, 0}, fixed...)
	for _, f := range fields {
		if len(f) > maxFRUField || !utf8.ValidString(f) {
			return nil, fmt.Errorf("field %q must be at most %d bytes of text", f, maxFRUField)
		}
		for _, r := range f {
			if r < 0x20 || r > 0x7e {
				return nil, fmt.Errorf("field %q must be printable ASCII", f)
			}
		}
		a = append(a, 0xc0|byte(len(f)))
		a = append(a, f...)
	}
	a = append(a, 0xc1)
	for (len(a)+1)%8 != 0 {
		a = append(a, 0)
	}
	if len(a)+1 > 255*8 {
		return nil, fmt.Errorf("area of %d bytes is too long", len(a)+1)
	}
	a[1] = byte((len(a) + 1) / 8)
	return append(a, checksum(a)), nil
}

// checksum is the byte that makes b's sum zero modulo 256.
func checksum(b []byte) byte {
	var s byte
	for _, c := range b {
		s += c
	}
	return -s
}

func or(v, fallback string) string {
	if v != "" {
		return v
	}
	return fallback
}
