package vm

import (
	"encoding/binary"
	"fmt"
	"os"
	"unicode/utf16"
)

// The variable of EDK II's Secure Boot configuration that holds whether Secure Boot is on
// (gEfiSecureBootEnableDisableGuid, f0a30bc7-af08-4556-99c4-001009c93a44): the firmware's own
// record, which its Secure Boot setup page writes and the firmware reads at every boot to
// decide whether to enforce signatures. (The SecureBoot variable the OS reads is volatile:
// derived from it at boot, never stored.)
var secureBootEnableGUID = [16]byte{0xc7, 0x0b, 0xa3, 0xf0, 0x08, 0xaf, 0x56, 0x45, 0x99, 0xc4, 0x00, 0x10, 0x09, 0xc9, 0x3a, 0x44}

// The layout of an authenticated variable in EDK II's variable store
// (AUTHENTICATED_VARIABLE_HEADER): StartId 0x55AA, State, a reserved byte, Attributes (4),
// MonotonicCount (8), TimeStamp (16), PubKeyIndex (4), NameSize (4), DataSize (4),
// VendorGuid (16); then the UTF-16 name and the data.
const (
	varStartID   = 0x55AA
	varAdded     = 0x3F // State of a live variable; deleted and in-transition ones differ
	varHeaderLen = 60
)

// SecureBootEnabled reads an OVMF variable store file: whether its live SecureBootEnable
// variable says Secure Boot is on. A store without one (Debian's OVMF_VARS_4M.fd) has it off.
func SecureBootEnabled(varsFile string) (bool, error) {
	data, err := os.ReadFile(varsFile)
	if err != nil {
		return false, err
	}
	name := utf16.Encode([]rune("SecureBootEnable\x00"))
	nameBytes := make([]byte, 2*len(name))
	for i, c := range name {
		binary.LittleEndian.PutUint16(nameBytes[2*i:], c)
	}
	for off := 0; off+varHeaderLen <= len(data); off += 4 { // headers are 4-byte aligned
		h := data[off : off+varHeaderLen]
		if binary.LittleEndian.Uint16(h) != varStartID || h[2] != varAdded {
			continue
		}
		nameSize := int(binary.LittleEndian.Uint32(h[36:]))
		dataSize := int(binary.LittleEndian.Uint32(h[40:]))
		if nameSize != len(nameBytes) || [16]byte(h[44:60]) != secureBootEnableGUID {
			continue
		}
		rest := data[off+varHeaderLen:]
		if len(rest) < nameSize+dataSize || string(rest[:nameSize]) != string(nameBytes) {
			continue
		}
		if dataSize != 1 {
			return false, fmt.Errorf("%s: SecureBootEnable has %d bytes of data, not 1", varsFile, dataSize)
		}
		return rest[nameSize] == 1, nil
	}
	return false, nil
}
