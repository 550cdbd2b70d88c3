package ipmi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

func TestBootFlags(t *testing.T) {
	for _, tc := range []struct {
		target           bmc.BootTarget
		persistent, uefi bool
		want             [5]byte
	}{
		{bmc.BootPXE, false, true, [5]byte{0xa0, 0x04}},
		{bmc.BootPXE, true, true, [5]byte{0xe0, 0x04}},
		{bmc.BootPXE, false, false, [5]byte{0x80, 0x04}},
		{bmc.BootDisk, true, false, [5]byte{0xc0, 0x08}},
		{bmc.BootDisk, false, true, [5]byte{0xa0, 0x08}},
		{bmc.BootCd, false, true, [5]byte{0xa0, 0x14}},
	} {
		got, err := BootFlags(tc.target, tc.persistent, tc.uefi)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s persistent=%t uefi=%t", tc.target, tc.persistent, tc.uefi)
	}
	_, err := BootFlags("Floppy", false, false)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
}

func TestBootMemory(t *testing.T) {
	var m bootMemory
	m.set(bmc.BootDisk, true)
	assert.Equal(t, bootMemory{persistent: bmc.BootDisk}, m, "persistent remembered, re-sent before power-on")
	m.set(bmc.BootPXE, false)
	assert.True(t, m.oncePending, "a one-time override is not overwritten by the re-send")
	m.powerActionDone()
	assert.Equal(t, bootMemory{persistent: bmc.BootDisk}, m, "after the power action, disk again")
}
