package ipmi

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

func TestBootFlags(t *testing.T) {
	const dell = 674
	for _, tc := range []struct {
		target           bmc.BootTarget
		persistent, uefi bool
		manufacturer     uint32
		want             [5]byte
	}{
		{bmc.BootPXE, false, true, 0, [5]byte{0xa0, 0x04}},
		{bmc.BootPXE, true, true, 0, [5]byte{0xe0, 0x04}},
		{bmc.BootPXE, false, false, 0, [5]byte{0x80, 0x04}},
		{bmc.BootDisk, true, false, 0, [5]byte{0xc0, 0x08}},
		{bmc.BootDisk, false, true, 0, [5]byte{0xa0, 0x08}},
		{bmc.BootCd, false, true, 0, [5]byte{0xa0, 0x14}},
		{bmc.BootDisk, false, true, dell, [5]byte{0xa0, 0x08}},
	} {
		got, err := BootFlags(tc.target, tc.persistent, tc.uefi, tc.manufacturer)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s persistent=%t uefi=%t manufacturer=%d", tc.target, tc.persistent, tc.uefi, tc.manufacturer)
	}
	_, err := BootFlags("Floppy", false, false, 0)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
}

// TestSupermicroUEFIDiskSelector: a Supermicro BMC in UEFI mode gets its "UEFI hard disk"
// selector (byte 2 0x24) for a disk boot, once or persistent, as Ironic sends it; the standard
// 0x08 makes it skip the disk. Legacy disk, and PXE and CD in either mode, are the standard
// bytes.
func TestSupermicroUEFIDiskSelector(t *testing.T) {
	for _, tc := range []struct {
		target           bmc.BootTarget
		persistent, uefi bool
		want             [5]byte
	}{
		{bmc.BootDisk, false, true, [5]byte{0xa0, 0x24}},
		{bmc.BootDisk, true, true, [5]byte{0xe0, 0x24}},
		{bmc.BootDisk, false, false, [5]byte{0x80, 0x08}},
		{bmc.BootDisk, true, false, [5]byte{0xc0, 0x08}},
		{bmc.BootPXE, false, true, [5]byte{0xa0, 0x04}},
		{bmc.BootPXE, true, false, [5]byte{0xc0, 0x04}},
		{bmc.BootCd, false, true, [5]byte{0xa0, 0x14}},
	} {
		got, err := BootFlags(tc.target, tc.persistent, tc.uefi, IANASupermicro)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "Supermicro %s persistent=%t uefi=%t", tc.target, tc.persistent, tc.uefi)
	}
}

func TestBootMemory(t *testing.T) {
	var m bootMemory
	m.set(bmc.BootDisk, true, metalv1alpha1.BootModeLegacy)
	assert.Equal(t, bootMemory{persistent: bmc.BootDisk, persistentMode: metalv1alpha1.BootModeLegacy}, m, "persistent remembered with its mode, re-sent before power-on")
	m.set(bmc.BootPXE, false, metalv1alpha1.BootModeUEFI)
	assert.True(t, m.oncePending, "a one-time override is not overwritten by the re-send")
	m.powerActionDone()
	assert.Equal(t, bootMemory{persistent: bmc.BootDisk, persistentMode: metalv1alpha1.BootModeLegacy}, m, "after the power action, disk again, in its mode")
}

// getFlags is a Get System Boot Options answer for parameter 5: version, selector, 5 bytes.
func getFlags(data ...byte) []byte {
	b := append([]byte{0x01, bootParamFlags}, data...)
	for len(b) < 7 {
		b = append(b, 0)
	}
	return b
}

// TestEFIBitFollowsTheMode: the flags sent for each mode asked for, whatever flags the BMC has
// (the opposite of the mode, so a bit taken from the BMC instead fails); without a mode, the
// BMC's valid EFI bit, else the remembered one.
func TestEFIBitFollowsTheMode(t *testing.T) {
	validEFI, validLegacy, staleEFI := getFlags(0xa0, 0x04), getFlags(0x80, 0x04), getFlags(0x20, 0x04)
	for _, tc := range []struct {
		name       string
		remembered bootMemory
		mode       metalv1alpha1.BootMode
		current    []byte // nil: the BMC gave no flags (a completion code)
		target     bmc.BootTarget
		persistent bool
		want       [5]byte
		fromGuess  bool
	}{
		{"Legacy clears the BMC's valid EFI bit", bootMemory{}, metalv1alpha1.BootModeLegacy, validEFI, bmc.BootPXE, false, [5]byte{0x80, 0x04}, false},
		{"Legacy over a remembered UEFI", bootMemory{uefi: true, uefiKnown: true}, metalv1alpha1.BootModeLegacy, nil, bmc.BootDisk, true, [5]byte{0xc0, 0x08}, false},
		{"UEFI sets it over valid legacy flags", bootMemory{}, metalv1alpha1.BootModeUEFI, validLegacy, bmc.BootPXE, false, [5]byte{0xa0, 0x04}, false},
		{"UEFISecureBoot sets it too", bootMemory{}, metalv1alpha1.BootModeUEFISecureBoot, validLegacy, bmc.BootCd, false, [5]byte{0xa0, 0x14}, false},
		{"UEFI persistent disk, no flags", bootMemory{}, metalv1alpha1.BootModeUEFI, nil, bmc.BootDisk, true, [5]byte{0xe0, 0x08}, false},
		{"no mode: the BMC's valid EFI bit", bootMemory{}, "", validEFI, bmc.BootPXE, false, [5]byte{0xa0, 0x04}, false},
		{"no mode: the BMC's valid legacy bit over a remembered UEFI", bootMemory{uefi: true, uefiKnown: true}, "", validLegacy, bmc.BootPXE, false, [5]byte{0x80, 0x04}, false},
		{"no mode, stale EFI bit: remembered UEFI", bootMemory{uefi: true, uefiKnown: true}, "", staleEFI, bmc.BootDisk, true, [5]byte{0xe0, 0x08}, false},
		{"no mode, stale EFI bit, nothing known: the legacy guess", bootMemory{}, "", staleEFI, bmc.BootPXE, false, [5]byte{0x80, 0x04}, true},
		{"no mode, no flags, nothing known: the legacy guess", bootMemory{}, "", nil, bmc.BootPXE, false, [5]byte{0x80, 0x04}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.remembered
			uefi, fromGuess := m.efiBit(tc.mode, tc.current)
			got, err := BootFlags(tc.target, tc.persistent, uefi, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.fromGuess, fromGuess)
			if !tc.fromGuess {
				assert.Equal(t, bootMemory{uefi: got[0]&0x20 != 0, uefiKnown: true}, m, "the bit sent is remembered")
			}
		})
	}
}

func TestBootModeOf(t *testing.T) {
	for flags, want := range map[[5]byte]metalv1alpha1.BootMode{
		{0xa0, 0x04}: metalv1alpha1.BootModeUEFI,   // valid, EFI, PXE once
		{0xe0, 0x08}: metalv1alpha1.BootModeUEFI,   // valid, persistent, EFI, disk
		{0x80, 0x04}: metalv1alpha1.BootModeLegacy, // valid, legacy
		{0xc0, 0x08}: metalv1alpha1.BootModeLegacy, // valid, persistent, legacy
		{0x20, 0x04}: "",                           // EFI bit without the valid bit: stale
		{0x00, 0x00}: "",                           // consumed or expired
		{0x60, 0x08}: "",                           // persistent and EFI, not valid
	} {
		assert.Equal(t, want, BootModeOf(flags), "% x", flags)
	}
}
