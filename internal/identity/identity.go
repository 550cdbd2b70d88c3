// Package identity is Ironfleet's one rule for what identifies a machine: when the SMBIOS system
// UUID its BMC reports can be the machine's identity, and what stands in for it when it cannot.
// The BMC reconciler names Servers by it, the probe boot's ignition carries it only then, the
// registry checks a report against it only then, and the boot service finds a host by it only
// then. docs/identity.md explains the rule and why.
package identity

import (
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Normalize is the one spelling of a UUID Ironfleet compares: no surrounding space, lower case.
func Normalize(uuid string) string {
	return strings.ToLower(strings.TrimSpace(uuid))
}

// Placeholders are SMBIOS system UUIDs that firmware leaves on many boards alike: a machine
// reporting one says nothing about which machine it is. The list is the one FreeBSD's
// rc.d/hostid refuses to take a host ID from, with the byte-order twin of the AMI default and
// other well-known fill patterns; UUIDs whose bytes are all the same (zeros, F, FE, …) are caught
// by a rule rather than listed.
var placeholders = map[string]string{
	// AMI BIOS's default, left by board makers that never program one (Supermicro, ASUS,
	// Gigabyte, ASRock and others), as SMBIOS 2.6 and later read it…
	"03000200-0400-0500-0006-000700080009": "the AMI BIOS default UUID",
	// …and the same 16 bytes read in the byte order of SMBIOS before 2.6.
	"00020003-0004-0005-0006-000700080009": "the AMI BIOS default UUID (pre-2.6 byte order)",
	// Dell derives the UUID from the service tag; a replacement board whose tag was never
	// programmed encodes seven spaces.
	"4c4c4544-0000-2010-8020-80c04f202020": "Dell's UUID of a board without a service tag",
	// OEM fill patterns seen on unprogrammed boards.
	"12345678-1234-5678-90ab-cddeefaabbcc": "an OEM placeholder UUID",
	"12345678-1234-5678-1234-567812345678": "an OEM placeholder UUID",
	"01234567-89ab-cdef-0123-456789abcdef": "an OEM placeholder UUID",
	"00010203-0405-0607-0809-0a0b0c0d0e0f": "an OEM placeholder UUID",
	"07090201-0103-0301-0807-060504030201": "an OEM placeholder UUID",
	"11111111-2222-3333-4444-555555555555": "an OEM placeholder UUID",
	// Shipped on many machines at once (FreeBSD's list).
	"890e2d14-cacd-45d1-ae66-bc80e8bfeb0f": "a UUID known to be shared by many machines",
	"8e275844-178f-44a8-aceb-a7d7e5178c63": "a UUID known to be shared by many machines",
	"dc698397-fa54-4cf2-82c8-b1b5307a6a7f": "a UUID known to be shared by many machines",
}

// Placeholders lists the known placeholder UUIDs, for documentation and tests.
func Placeholders() []string {
	out := make([]string, 0, len(placeholders))
	for u := range placeholders {
		out = append(out, u)
	}
	return out
}

// Problem says why a UUID cannot identify a machine by its value alone, or "" when it can. That a
// UUID is usable by value does not make it unique: whoever uses one as identity also checks that
// no other system reports it.
func Problem(uuid string) string {
	u := Normalize(uuid)
	if u == "" {
		return "it has none"
	}
	if !wellFormed(u) {
		return "it is not a UUID"
	}
	hex := strings.ReplaceAll(u, "-", "")
	switch {
	case strings.Trim(hex, "0") == "":
		return "it is all zeros"
	case strings.Trim(hex, "f") == "":
		return "it is all F"
	case sameBytes(hex):
		return "every byte of it is the same"
	case strings.Trim(hex[8:], "f") == "":
		return "all of it but the first field is F"
	}
	if why, ok := placeholders[u]; ok {
		return "it is " + why
	}
	return ""
}

// Usable says whether a UUID can identify a machine by its value: a UUID, not all zeros or all
// F, no byte repeated throughout, not a known placeholder.
func Usable(uuid string) bool { return Problem(uuid) == "" }

// wellFormed accepts the canonical 8-4-4-4-12 hex form (lower case, as Normalize leaves it).
func wellFormed(u string) bool {
	if len(u) != 36 {
		return false
	}
	for i, c := range u {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
				return false
			}
		}
	}
	return true
}

// sameBytes says whether the hex string is one byte repeated (fefefefe…, 58585858…).
func sameBytes(hex string) bool {
	for i := 2; i < len(hex); i += 2 {
		if hex[i:i+2] != hex[:2] {
			return false
		}
	}
	return true
}

// ServerUUID is the Server's UUID when that UUID is its identity, else "". It is when the
// Server is named by it: the BMC reconciler names a Server by its UUID only when the UUID is
// usable and no other system of its BMC, nor a Server of another BMC, has it. Only such a
// UUID goes into the probe's ignition and is compared with what the probe reads in-band.
func ServerUUID(s *metalv1alpha1.Server) string {
	u := Normalize(s.Spec.SystemUUID)
	if u == "" || s.Name != u || !Usable(u) {
		return ""
	}
	return u
}
