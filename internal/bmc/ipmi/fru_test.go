package ipmi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// field is one type/length-prefixed FRU field.
type field struct {
	typ  byte // 0 binary, 1 BCD plus, 2 6-bit ASCII, 3 8-bit
	data []byte
}

func ascii(s string) field { return field{typ: 3, data: []byte(s)} }

// fruArea builds an info area: its prefix (after version and length), the fields, the end
// marker, padding to 8 bytes and the checksum.
func fruArea(prefix []byte, fields ...field) []byte {
	a := append([]byte{0x01, 0x00}, prefix...)
	for _, f := range fields {
		a = append(a, f.typ<<6|byte(len(f.data)))
		a = append(a, f.data...)
	}
	a = append(a, fruEndOfFields)
	for (len(a)+1)%8 != 0 {
		a = append(a, 0)
	}
	a[1] = byte((len(a) + 1) / 8)
	return append(a, -checksum(a))
}

// buildFRU lays out a common header and the given areas (nil = absent).
func buildFRU(chassis, board, product []byte) []byte {
	header := []byte{0x01, 0, 0, 0, 0, 0, 0, 0}
	data := []byte{}
	offset := 1
	for i, area := range [][]byte{chassis, board, product} {
		if area == nil {
			continue
		}
		header[2+i] = byte(offset)
		data = append(data, area...)
		offset += len(area) / 8
	}
	header[7] = -checksum(header[:7])
	return append(header, data...)
}

func TestParseFRUAllAreas(t *testing.T) {
	data := buildFRU(
		fruArea([]byte{0x17}, ascii("CH-PART"), ascii("CH-SERIAL")),
		fruArea([]byte{0x19, 0x00, 0x00, 0x10}, ascii("Board Maker"), ascii("Board X"), ascii("BSN-1"), ascii("BPN-1"), ascii("")),
		fruArea([]byte{0x19}, ascii("Ironfleet Labs"), ascii("IF-1000"), ascii("IF-1000-A"), ascii("v2"), ascii("SN-IPMI-0001"), ascii("asset 7"), ascii(""), ascii("custom one")),
	)
	fru, err := ParseFRU(data)
	require.NoError(t, err)
	assert.Empty(t, fru.Warnings)
	assert.Equal(t, ChassisArea{Type: 0x17, PartNumber: "CH-PART", SerialNumber: "CH-SERIAL"}, fru.Chassis)
	assert.Equal(t, BoardArea{MfgMinutes: 0x100000, Manufacturer: "Board Maker", ProductName: "Board X", SerialNumber: "BSN-1", PartNumber: "BPN-1"}, fru.Board)
	assert.Equal(t, ProductArea{Manufacturer: "Ironfleet Labs", Name: "IF-1000", PartModel: "IF-1000-A", Version: "v2",
		SerialNumber: "SN-IPMI-0001", AssetTag: "asset 7", Custom: []string{"custom one"}}, fru.Product)
	m, model, serial := fru.Identity()
	assert.Equal(t, []string{"Ironfleet Labs", "IF-1000", "SN-IPMI-0001"}, []string{m, model, serial})
}

func TestParseFRUFieldEncodings(t *testing.T) {
	// "IPMI" in 6-bit ASCII: I=0x29 P=0x30 M=0x2d I=0x29 → packed LSB first.
	sixBit := field{typ: 2, data: []byte{0x29 | 0x30<<6&0xff, 0x30>>2 | (0x2d&0x0f)<<4, 0x2d>>4 | 0x29<<2}}
	bcd := field{typ: 1, data: []byte{0x12, 0xb3, 0xc4}} // "12-3.4"
	binary := field{typ: 0, data: []byte{0xde, 0xad}}
	latin1 := field{typ: 3, data: []byte{'M', 0xfc, 'l', 'l', 'e', 'r', ' ', ' ', 0}} // "Müller", padded
	data := buildFRU(nil, nil, fruArea([]byte{0x19}, latin1, sixBit, bcd, binary))
	fru, err := ParseFRU(data)
	require.NoError(t, err)
	assert.Equal(t, "Müller", fru.Product.Manufacturer)
	assert.Equal(t, "IPMI", fru.Product.Name)
	assert.Equal(t, "12-3.4", fru.Product.PartModel)
	assert.Equal(t, "dead", fru.Product.Version)
}

func TestParseFRUTolerance(t *testing.T) {
	good := buildFRU(nil,
		fruArea([]byte{0x19, 0, 0, 0}, ascii("Board Maker"), ascii("Board X"), ascii("BSN-1")), // no part number, no file ID
		fruArea([]byte{0x19}, ascii("Maker"), ascii("")))                                       // product without serial

	t.Run("missing fields fall back to the board", func(t *testing.T) {
		fru, err := ParseFRU(good)
		require.NoError(t, err)
		m, model, serial := fru.Identity()
		assert.Equal(t, []string{"Maker", "Board X", "BSN-1"}, []string{m, model, serial})
		assert.Empty(t, fru.Warnings)
	})
	t.Run("bad checksums are warnings", func(t *testing.T) {
		bad := append([]byte(nil), good...)
		bad[7]++  // header checksum
		bad[20]++ // inside the board area
		fru, err := ParseFRU(bad)
		require.NoError(t, err)
		assert.Len(t, fru.Warnings, 2)
		assert.Equal(t, "Maker", fru.Product.Manufacturer)
	})
	t.Run("truncated data keeps what it has", func(t *testing.T) {
		for n := range len(good) {
			fru, err := ParseFRU(good[:n])
			if n < fruHeaderLen {
				require.ErrorIs(t, err, ErrNoFRU)
				continue
			}
			require.NoError(t, err, "at %d bytes", n)
			if n >= 8+6+1+11 { // header, board prefix, manufacturer field
				assert.Equal(t, "Board Maker", fru.Board.Manufacturer, "at %d bytes", n)
			}
		}
	})
	t.Run("no header", func(t *testing.T) {
		_, err := ParseFRU([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		require.ErrorIs(t, err, ErrNoFRU)
	})
	t.Run("area past the data", func(t *testing.T) {
		data := []byte{0x01, 0, 0, 0, 0x20, 0, 0, 0}
		data[7] = -checksum(data[:7])
		fru, err := ParseFRU(data)
		require.NoError(t, err)
		assert.NotEmpty(t, fru.Warnings)
	})
}

func FuzzParseFRU(f *testing.F) {
	f.Add(buildFRU(
		fruArea([]byte{0x17}, ascii("CH-PART"), ascii("CH-SERIAL")),
		fruArea([]byte{0x19, 0, 0, 0}, ascii("Board Maker"), ascii("Board X"), ascii("BSN-1"), ascii("BPN-1"), ascii("")),
		fruArea([]byte{0x19}, ascii("Ironfleet Labs"), ascii("IF-1000"), field{typ: 2, data: []byte{1, 2, 3}}, field{typ: 1, data: []byte{0x12}}),
	))
	f.Add([]byte{0x01, 0, 0, 1, 0, 0, 0, 0xfe, 0x01, 0xff, 0, 0, 0, 0, 0xff})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		fru, err := ParseFRU(data)
		if err != nil {
			return
		}
		m, model, serial := fru.Identity()
		if len(m)+len(model)+len(serial) > 4*len(data) { // hex doubles, Latin-1 at most doubles
			t.Fatalf("identity longer than the data allows")
		}
	})
}
