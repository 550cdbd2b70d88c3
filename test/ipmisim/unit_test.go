package ipmisim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ipmisim"
)

func TestSMBIOSGUID(t *testing.T) {
	g, err := ipmisim.SMBIOSGUID("3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0")
	require.NoError(t, err)
	assert.Equal(t, "0f1e2d3c4b5a69788796a5b4c3d2e1f0", g, "research §2.5: QEMU's SMBIOS bytes for this -uuid")
	for _, bad := range []string{"", "3c2d1e0f5a4b78698796a5b4c3d2e1f0", "3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1fz"} {
		_, err := ipmisim.SMBIOSGUID(bad)
		assert.Error(t, err, bad)
	}
}

func TestEncodeFRU(t *testing.T) {
	data, err := ipmisim.EncodeFRU(ipmisim.FRU{Manufacturer: "Ironfleet Labs", Product: "IF-1000", Serial: "SN-1"})
	require.NoError(t, err)
	sum := func(b []byte) (s byte) {
		for _, c := range b {
			s += c
		}
		return s
	}
	require.Equal(t, byte(1), data[0], "format version")
	assert.Zero(t, sum(data[:8]), "header checksum")
	board, product := int(data[3])*8, int(data[4])*8
	boardLen, productLen := int(data[board+1])*8, int(data[product+1])*8
	assert.Equal(t, product, board+boardLen, "the product area follows the board area")
	assert.Equal(t, len(data), product+productLen)
	assert.Zero(t, sum(data[board:board+boardLen]), "board checksum")
	assert.Zero(t, sum(data[product:product+productLen]), "product checksum")
	assert.Equal(t, append([]byte{0xc0 | 14}, "Ironfleet Labs"...), data[product+3:product+18])

	_, err = ipmisim.EncodeFRU(ipmisim.FRU{Product: string(make([]byte, 64))})
	assert.Error(t, err)
}
