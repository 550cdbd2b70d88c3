package ipmi

import (
	"testing"

	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeDeviceID(t *testing.T) {
	// ipmi_sim's "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02".
	id, err := DecodeDeviceID([]byte{0x00, 0x23, 0x09, 0x08, 0x02, 0x9f, 0x91, 0x12, 0x00, 0x02, 0x0f})
	require.NoError(t, err)
	assert.Equal(t, DeviceID{FirmwareMajor: 9, FirmwareMinor: 0x08, ManufacturerID: 4753, ProductID: 0x0f02}, id)
	assert.Equal(t, "9.08", id.FirmwareVersion())
	assert.Equal(t, "MontaVista (OpenIPMI)", ManufacturerName(id.ManufacturerID))
	assert.Equal(t, "IANA 99999", ManufacturerName(99999))
	_, err = DecodeDeviceID(make([]byte, 10))
	require.Error(t, err)
}

func TestDecodeSystemGUID(t *testing.T) {
	raw := []byte{0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0}
	got, err := DecodeSystemGUID(raw)
	require.NoError(t, err)
	// The research's QEMU run: this is the VM's -uuid and its SMBIOS product_uuid.
	assert.Equal(t, "3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0", got)
	// Same as go-ipmi's SMBIOS decoding, so the two never disagree.
	u, err := types.ParseGUID(raw, types.GUIDModeSMBIOS)
	require.NoError(t, err)
	assert.Equal(t, u.String(), got)
	_, err = DecodeSystemGUID(raw[:15])
	require.Error(t, err)
}

func TestDecodeSmallResponses(t *testing.T) {
	on, err := DecodeChassisPower([]byte{0x01, 0x00, 0x00})
	require.NoError(t, err)
	assert.True(t, on)
	on, err = DecodeChassisPower([]byte{0x60})
	require.NoError(t, err)
	assert.False(t, on)

	flags, err := DecodeBootFlags([]byte{0x01, 0x05, 0xa0, 0x04, 0, 0, 0})
	require.NoError(t, err)
	assert.Equal(t, [5]byte{0xa0, 0x04}, flags)
	_, err = DecodeBootFlags([]byte{0x01, 0x04, 0xa0, 0x04, 0, 0, 0})
	require.Error(t, err, "another parameter")

	mac, err := DecodeLANMAC([]byte{0x11, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56})
	require.NoError(t, err)
	assert.Equal(t, "52:54:00:12:34:56", mac)
	mac, err = DecodeLANMAC([]byte{0x11, 0, 0, 0, 0, 0, 0})
	require.NoError(t, err)
	assert.Empty(t, mac)

	lan, err := DecodeChannelIsLAN([]byte{0x01, 0x04, 0x01})
	require.NoError(t, err)
	assert.True(t, lan)
	lan, err = DecodeChannelIsLAN([]byte{0x0f, 0x0c})
	require.NoError(t, err)
	assert.False(t, lan)
}

// FuzzDecoders feeds the same bytes to every response decoder: none may panic.
func FuzzDecoders(f *testing.F) {
	f.Add([]byte{0x00, 0x23, 0x09, 0x08, 0x02, 0x9f, 0x91, 0x12, 0x00, 0x02, 0x0f})
	f.Add([]byte{0x01, 0x05, 0xa0, 0x04, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeDeviceID(b)
		_, _ = DecodeSystemGUID(b)
		_, _ = DecodeChassisPower(b)
		_, _ = DecodeBootFlags(b)
		_, _ = DecodeLANMAC(b)
		_, _ = DecodeChannelIsLAN(b)
	})
}
