package ipmi

import (
	"fmt"
	"net"
)

// The decoders below read response data (after the completion code) of the few commands the
// client sends. Each checks the length it needs, ignores trailing bytes (newer spec revisions
// append fields) and never panics; FuzzDecoders holds them to that.

// DeviceID is the part of a Get Device ID response (IPMI v2.0 §20.1) Ironfleet reports.
type DeviceID struct {
	// FirmwareMajor is bits 6:0 of byte 3; FirmwareMinor is BCD (0x08 reads "08").
	FirmwareMajor, FirmwareMinor uint8
	// ManufacturerID is the IANA enterprise number (20 bits).
	ManufacturerID uint32
	ProductID      uint16
}

// FirmwareVersion is "major.minor" as ipmitool prints it ("9.08").
func (d DeviceID) FirmwareVersion() string {
	return fmt.Sprintf("%d.%02x", d.FirmwareMajor, d.FirmwareMinor)
}

// DecodeDeviceID decodes a Get Device ID response: device ID, revision, firmware major and
// minor, IPMI version, device support, manufacturer (3 bytes LE), product (2 bytes LE), then
// optional auxiliary revision.
func DecodeDeviceID(b []byte) (DeviceID, error) {
	if len(b) < 11 {
		return DeviceID{}, fmt.Errorf("Get Device ID response has %d bytes, want at least 11", len(b))
	}
	return DeviceID{
		FirmwareMajor:  b[2] & 0x7f,
		FirmwareMinor:  b[3],
		ManufacturerID: (uint32(b[6]) | uint32(b[7])<<8 | uint32(b[8])<<16) & 0x0fffff,
		ProductID:      uint16(b[9]) | uint16(b[10])<<8,
	}, nil
}

// DecodeSystemGUID decodes a Get System GUID response into the lower-case UUID string the host
// reports as its SMBIOS product UUID: the first three fields are little-endian on the wire
// (SMBIOS encoding), the rest in order.
func DecodeSystemGUID(b []byte) (string, error) {
	if len(b) < 16 {
		return "", fmt.Errorf("Get System GUID response has %d bytes, want 16", len(b))
	}
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]), nil
}

// DecodeChassisPower decodes a Get Chassis Status response: bit 0 of the first byte is "system
// power is on".
func DecodeChassisPower(b []byte) (bool, error) {
	if len(b) < 1 {
		return false, fmt.Errorf("Get Chassis Status response is empty")
	}
	return b[0]&0x01 != 0, nil
}

// DecodeBootFlags decodes a Get System Boot Options response for parameter 5 (boot flags):
// parameter version, parameter selector, then the 5 data bytes.
func DecodeBootFlags(b []byte) ([5]byte, error) {
	var flags [5]byte
	if len(b) < 7 {
		return flags, fmt.Errorf("Get System Boot Options (boot flags) response has %d bytes, want 7", len(b))
	}
	if sel := b[1] & 0x7f; sel != bootParamFlags {
		return flags, fmt.Errorf("Get System Boot Options answered parameter %d, asked %d", sel, bootParamFlags)
	}
	copy(flags[:], b[2:7])
	return flags, nil
}

// DecodeLANMAC decodes a Get LAN Configuration Parameters response for parameter 5 (MAC
// address): parameter revision, then 6 bytes. An all-zero MAC (none configured) is "".
func DecodeLANMAC(b []byte) (string, error) {
	if len(b) < 7 {
		return "", fmt.Errorf("Get LAN Configuration Parameters (MAC) response has %d bytes, want 7", len(b))
	}
	mac := net.HardwareAddr(b[1:7])
	for _, x := range mac {
		if x != 0 {
			return mac.String(), nil
		}
	}
	return "", nil
}

// channelMedium8023LAN is the Get Channel Info medium type of a LAN channel (table 6-3).
const channelMedium8023LAN = 0x04

// DecodeChannelIsLAN decodes a Get Channel Info response: channel number, then the medium type
// in bits 6:0 of the second byte.
func DecodeChannelIsLAN(b []byte) (bool, error) {
	if len(b) < 2 {
		return false, fmt.Errorf("Get Channel Info response has %d bytes, want at least 2", len(b))
	}
	return b[1]&0x7f == channelMedium8023LAN, nil
}
