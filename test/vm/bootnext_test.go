package vm_test

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/ciskip"
	"github.com/ironfleet/ironfleet/test/vm"
)

// copyVars copies an OVMF variable store template into the test's directory.
func copyVars(t *testing.T, template string) string {
	t.Helper()
	src, err := os.Open(template)
	ciskip.Unless(t, err == nil, "OVMF is not installed (apt-get install --no-install-recommends ovmf): %v", err)
	defer src.Close()
	path := filepath.Join(t.TempDir(), "OVMF_VARS.fd")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())
	return path
}

// variable is one variable of a store as this test reads it, independently of the package.
type variable struct {
	name  string
	state byte
	guid  [16]byte
	data  []byte
}

// readStore walks a store file's variables the way EDK II does: from the header after the
// firmware volume's and the store's own, each next header 4-byte aligned, up to the first
// that does not start with 0x55AA; a header whose State or sizes are still erased (0xFF...)
// has no name or data. It also returns the offset of that free space.
func readStore(t *testing.T, path string) ([]variable, int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	start := int(binary.LittleEndian.Uint16(data[0x30:]))
	end := start + int(binary.LittleEndian.Uint32(data[start+16:]))
	var out []variable
	off := (start + 28 + 3) &^ 3
	for off+60 <= end && binary.LittleEndian.Uint16(data[off:]) == 0x55AA {
		nameSize := int(binary.LittleEndian.Uint32(data[off+36:]))
		dataSize := int(binary.LittleEndian.Uint32(data[off+40:]))
		if data[off+2] == 0xFF || nameSize == 0xFFFFFFFF || dataSize == 0xFFFFFFFF {
			out = append(out, variable{name: "(header only)", state: data[off+2]})
			off += 60
			continue
		}
		units := make([]uint16, nameSize/2-1)
		for i := range units {
			units[i] = binary.LittleEndian.Uint16(data[off+60+2*i:])
		}
		require.Zero(t, binary.LittleEndian.Uint16(data[off+60+nameSize-2:]), "names end in NUL")
		out = append(out, variable{name: string(utf16.Decode(units)), state: data[off+2], guid: [16]byte(data[off+44 : off+60]),
			data: data[off+60+nameSize : off+60+nameSize+dataSize]})
		off = (off + 60 + nameSize + dataSize + 3) &^ 3
	}
	return out, off
}

var globalGUID = [16]byte{0x61, 0xdf, 0xe4, 0x8b, 0xca, 0x93, 0xd2, 0x11, 0xaa, 0x0d, 0x00, 0xe0, 0x98, 0x03, 0x2b, 0x8c}

// live counts the live (State 0x3F) copies of a global variable, and returns the last.
func live(vars []variable, name string) (int, variable) {
	n, last := 0, variable{}
	for _, v := range vars {
		if v.name == name && v.guid == globalGUID && v.state == 0x3F {
			n++
			last = v
		}
	}
	return n, last
}

// wantLoadOption is Boot0F00's data for uri, spelled out from the UEFI specification.
func wantLoadOption(uri string) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 1)                    // LOAD_OPTION_ACTIVE
	b = binary.LittleEndian.AppendUint16(b, uint16(4+len(uri)+4)) // FilePathListLength
	for _, c := range "Ironfleet HTTP boot\x00" {
		b = binary.LittleEndian.AppendUint16(b, uint16(c))
	}
	b = append(b, 0x03, 0x18) // Messaging, URI
	b = binary.LittleEndian.AppendUint16(b, uint16(4+len(uri)))
	b = append(b, uri...)
	return append(b, 0x7F, 0xFF, 4, 0) // End Entire Device Path
}

func TestSetHTTPBootNextRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		template   string
		secureBoot bool
	}{
		{vm.DefaultOVMFVars, false},
		{vm.SecureBootOVMFVars, true},
		{"/usr/share/OVMF/OVMF_VARS.fd", false}, // the 2 MB build's store
		{"/usr/share/OVMF/OVMF_VARS.ms.fd", true},
	} {
		t.Run(filepath.Base(tc.template), func(t *testing.T) {
			vars := copyVars(t, tc.template)
			uri, err := vm.HTTPBootNext(vars)
			require.NoError(t, err)
			assert.Empty(t, uri, "the template has no BootNext")
			before, freeBefore := readStore(t, vars)

			first := "http://10.213.1.1:8080/boot/t0ken-1/probe.iso"
			second := "https://boot.example:8443/boot/t0ken-2/a-longer-name-than-the-first.iso"
			require.NoError(t, vm.SetHTTPBootNext(vars, first))
			uri, err = vm.HTTPBootNext(vars)
			require.NoError(t, err)
			assert.Equal(t, first, uri)
			require.NoError(t, vm.SetHTTPBootNext(vars, second))
			uri, err = vm.HTTPBootNext(vars)
			require.NoError(t, err)
			assert.Equal(t, second, uri)

			after, freeAfter := readStore(t, vars)
			n, option := live(after, "Boot0F00")
			assert.Equal(t, 1, n, "one live Boot0F00")
			assert.Equal(t, wantLoadOption(second), option.data)
			n, next := live(after, "BootNext")
			assert.Equal(t, 1, n, "one live BootNext")
			assert.Equal(t, []byte{0x00, 0x0F}, next.data)
			assert.Len(t, after, len(before)+4, "two writes of two variables, appended")
			for i, v := range before { // the template's variables are untouched
				assert.Equal(t, v, after[i], "variable %d (%s)", i, v.name)
			}
			for _, v := range after[len(before) : len(before)+2] {
				assert.Equal(t, byte(0x3D), v.state, "%s of the first write is deleted (0x3F & 0xFD)", v.name)
			}
			assert.Greater(t, freeAfter, freeBefore)
			data, err := os.ReadFile(vars)
			require.NoError(t, err)
			assert.Equal(t, byte(0xFF), data[freeAfter], "the free space is still erased")
			st, err := os.Stat(vars)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file keeps its mode")

			on, err := vm.SecureBootEnabled(vars)
			require.NoError(t, err)
			assert.Equal(t, tc.secureBoot, on, "Secure Boot reads as before")
		})
	}
}

// syntheticStore writes a variable store of size bytes (after its header) holding vars.
func syntheticStore(t *testing.T, size int, vars ...variable) string {
	t.Helper()
	const fvLen = 0x48
	data := make([]byte, fvLen+28+size+64)
	for i := range data {
		data[i] = 0xFF
	}
	copy(data[0x28:], "_FVH")
	binary.LittleEndian.PutUint16(data[0x30:], fvLen)
	copy(data[fvLen:], []byte{0x78, 0x2c, 0xf3, 0xaa, 0x7b, 0x94, 0x9a, 0x43, 0xa1, 0x80, 0x2e, 0x14, 0x4e, 0xc3, 0x77, 0x92})
	binary.LittleEndian.PutUint32(data[fvLen+16:], uint32(28+size))
	data[fvLen+20], data[fvLen+21], data[fvLen+22], data[fvLen+23] = 0x5A, 0xFE, 0, 0
	binary.LittleEndian.PutUint32(data[fvLen+24:], 0)
	off := fvLen + 28
	for _, v := range vars {
		units := utf16.Encode([]rune(v.name + "\x00"))
		h := make([]byte, 60)
		binary.LittleEndian.PutUint16(h, 0x55AA)
		h[2], h[3] = v.state, 0
		binary.LittleEndian.PutUint32(h[4:], 7)
		binary.LittleEndian.PutUint32(h[36:], uint32(2*len(units)))
		binary.LittleEndian.PutUint32(h[40:], uint32(len(v.data)))
		copy(h[44:], v.guid[:])
		for _, u := range units {
			h = binary.LittleEndian.AppendUint16(h, u)
		}
		h = append(h, v.data...)
		copy(data[off:], h)
		off = (off + len(h) + 3) &^ 3
	}
	path := filepath.Join(t.TempDir(), "vars.fd")
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

func TestHTTPBootNextReadsOnlyURIBootOptions(t *testing.T) {
	// Boot0001 is a disk's: a PCI node, then the end.
	disk := binary.LittleEndian.AppendUint32(nil, 1)
	disk = binary.LittleEndian.AppendUint16(disk, 10)
	disk = append(disk, 'D', 0, 0, 0)
	disk = append(disk, 0x01, 0x01, 6, 0, 0, 1, 0x7F, 0xFF, 4, 0)
	store := syntheticStore(t, 4096,
		variable{name: "Boot0001", state: 0x3F, guid: globalGUID, data: disk},
		variable{name: "BootNext", state: 0x3D, guid: globalGUID, data: []byte{0x00, 0x0F}}, // deleted: not read
		variable{name: "BootNext", state: 0x3F, guid: globalGUID, data: []byte{0x01, 0x00}},
	)
	uri, err := vm.HTTPBootNext(store)
	require.NoError(t, err)
	assert.Empty(t, uri, "BootNext names a disk")

	dangling := syntheticStore(t, 4096, variable{name: "BootNext", state: 0x3F, guid: globalGUID, data: []byte{0x02, 0x00}})
	_, err = vm.HTTPBootNext(dangling)
	assert.ErrorContains(t, err, "Boot0002")

	require.NoError(t, vm.SetHTTPBootNext(store, "http://10.0.0.1/x.iso"))
	uri, err = vm.HTTPBootNext(store)
	require.NoError(t, err)
	assert.Equal(t, "http://10.0.0.1/x.iso", uri)
	vars, _ := readStore(t, store)
	n, disk1 := live(vars, "Boot0001")
	assert.Equal(t, 1, n, "other boot options stay")
	assert.Equal(t, disk, disk1.data)
}

func TestSetHTTPBootNextFailsClearly(t *testing.T) {
	secret := "s3cr3t-t0ken"
	vars := copyVars(t, vm.DefaultOVMFVars)
	for _, bad := range []string{"", "tftp://10.0.0.1/" + secret, "/boot/" + secret + "/x.iso", "http:///" + secret,
		"http://10.0.0.1/" + secret + string(make([]byte, 5000))} {
		err := vm.SetHTTPBootNext(vars, bad)
		require.Error(t, err, "%.40q", bad)
		assert.NotContains(t, err.Error(), secret, "the URI is not in the error")
	}

	// A store too small for the two variables.
	uri := "http://10.0.0.1/boot/" + secret + "/probe.iso"
	small := syntheticStore(t, 200)
	before, err := os.ReadFile(small)
	require.NoError(t, err)
	err = vm.SetHTTPBootNext(small, uri)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no room")
	assert.NotContains(t, err.Error(), secret)
	after, err := os.ReadFile(small)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a failed write leaves the store as it was")

	notAStore := filepath.Join(t.TempDir(), "junk.fd")
	require.NoError(t, os.WriteFile(notAStore, make([]byte, 4096), 0o600))
	assert.ErrorContains(t, vm.SetHTTPBootNext(notAStore, uri), "_FVH")
	_, err = vm.HTTPBootNext(notAStore)
	assert.Error(t, err)
	assert.Error(t, vm.SetHTTPBootNext(filepath.Join(t.TempDir(), "missing.fd"), uri))
}

// TestSetHTTPBootNextReclaimsTheStore: a full store, or one whose last variable the firmware
// was writing when QEMU was killed, is reclaimed the firmware's way before the write.
func TestSetHTTPBootNextReclaimsTheStore(t *testing.T) {
	uri := "http://10.0.0.1/boot/t0ken/probe.iso"
	// Room for one copy of the two variables, not for a second beside it.
	small := syntheticStore(t, 300)
	require.NoError(t, vm.SetHTTPBootNext(small, uri))
	require.NoError(t, vm.SetHTTPBootNext(small, uri+"?again"))
	got, err := vm.HTTPBootNext(small)
	require.NoError(t, err)
	assert.Equal(t, uri+"?again", got)
	vars, _ := readStore(t, small)
	require.Len(t, vars, 2, "the deleted copies are gone")
	assert.Equal(t, "Boot0F00", vars[0].name)
	assert.Equal(t, "BootNext", vars[1].name)

	// QEMU killed while the firmware updated a variable: the old copy is being deleted
	// (0x3E), the new one is a header alone, its State still erased (as seen on a VM killed
	// while its firmware rewrote a NIC's configuration). The firmware steps over the header
	// alone (60 bytes, whatever its sizes say), so the new variables go right after it.
	other := [16]byte{1, 2, 3}
	headerOnly := syntheticStore(t, 8192,
		variable{name: "Kept", state: 0x3F, guid: other, data: []byte("kept")},
		variable{name: "Gone", state: 0x3D, guid: other, data: []byte("deleted")},
		variable{name: "Updating", state: 0x3E, guid: other, data: []byte("old value")},
	)
	data, err := os.ReadFile(headerOnly)
	require.NoError(t, err)
	_, free := readStore(t, headerOnly)
	header := data[free : free+60]
	binary.LittleEndian.PutUint16(header, 0x55AA)
	header[2], header[3] = 0xFF, 0
	binary.LittleEndian.PutUint32(header[4:], 3)
	binary.LittleEndian.PutUint32(header[36:], 18) // "Updating": its name and data are not written yet
	binary.LittleEndian.PutUint32(header[40:], 9)
	copy(header[44:], other[:])
	require.NoError(t, os.WriteFile(headerOnly, data, 0o600))
	require.NoError(t, vm.SetHTTPBootNext(headerOnly, uri))
	got, err = vm.HTTPBootNext(headerOnly)
	require.NoError(t, err)
	assert.Equal(t, uri, got)
	assert.Equal(t, []string{"Kept 0x3f", "Gone 0x3d", "Updating 0x3e", "(header only) 0xff", "Boot0F00 0x3f", "BootNext 0x3f"},
		storeNames(t, headerOnly), "appended after the header alone, as the firmware walks it")

	// A StartId half written (0xAA of 0x55AA): the space after the last variable is not
	// erased, so the firmware would reclaim the store at its next start; so is it here, before
	// the write. The update that did not finish keeps the old value, as added.
	torn := syntheticStore(t, 8192,
		variable{name: "Kept", state: 0x3F, guid: other, data: []byte("kept")},
		variable{name: "Gone", state: 0x3D, guid: other, data: []byte("deleted")},
		variable{name: "Updating", state: 0x3E, guid: other, data: []byte("old value")},
	)
	data, err = os.ReadFile(torn)
	require.NoError(t, err)
	_, free = readStore(t, torn)
	data[free] = 0xAA
	require.NoError(t, os.WriteFile(torn, data, 0o600))
	require.NoError(t, vm.SetHTTPBootNext(torn, uri))
	got, err = vm.HTTPBootNext(torn)
	require.NoError(t, err)
	assert.Equal(t, uri, got)
	assert.Equal(t, []string{"Kept 0x3f", "Updating 0x3f", "Boot0F00 0x3f", "BootNext 0x3f"}, storeNames(t, torn))
	vars, free = readStore(t, torn)
	assert.Equal(t, []byte("old value"), vars[1].data)
	data, err = os.ReadFile(torn)
	require.NoError(t, err)
	for _, b := range data[free : free+4096] {
		require.Equal(t, byte(0xFF), b, "erased after the last variable")
	}
}

// storeNames lists a store's variables as "name state".
func storeNames(t *testing.T, path string) []string {
	t.Helper()
	vars, _ := readStore(t, path)
	names := make([]string, len(vars))
	for i, v := range vars {
		names[i] = fmt.Sprintf("%s %#x", v.name, v.state)
	}
	return names
}
