package ipmisim

import (
	"encoding/hex"
	"fmt"
	"strings"
)

// SMBIOSGUID returns the 16 bytes of a UUID string ("3c2d1e0f-5a4b-7869-8796-a5b4c3d2e1f0")
// in SMBIOS order, as 32 hex digits: the first three fields little-endian, the rest as
// written. That is how QEMU writes -uuid into SMBIOS type 1 (Linux's product_uuid shows the
// string again) and what ipmi_sim's lan.conf guid must hold for Get System GUID to name the
// same machine (research §2.5): "0f1e2d3c4b5a69788796a5b4c3d2e1f0" for the example.
func SMBIOSGUID(uuid string) (string, error) {
	b, err := smbiosGUIDBytes(uuid)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

func smbiosGUIDBytes(uuid string) ([]byte, error) {
	parts := strings.Split(uuid, "-")
	if len(parts) != 5 || len(parts[0]) != 8 || len(parts[1]) != 4 || len(parts[2]) != 4 || len(parts[3]) != 4 || len(parts[4]) != 12 {
		return nil, fmt.Errorf("%q is not a UUID (8-4-4-4-12 hex digits)", uuid)
	}
	b, err := hex.DecodeString(strings.Join(parts, ""))
	if err != nil {
		return nil, fmt.Errorf("%q is not a UUID: %w", uuid, err)
	}
	reverse := func(s []byte) {
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
	}
	reverse(b[0:4])
	reverse(b[4:6])
	reverse(b[6:8])
	return b, nil
}
