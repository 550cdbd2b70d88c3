package bmcsim

// UUIDs firmware leaves in SMBIOS when nobody programmed one: each is shared by every machine
// whose firmware carries it (ZeroSystemUUID, AllFSystemUUID, PlaceholderSystemUUID).
const (
	// PlaceholderUUID is AMI BIOS's default (Supermicro, ASUS, Gigabyte and other AMI-based boards).
	PlaceholderUUID = "03000200-0400-0500-0006-000700080009"
	ZeroUUID        = "00000000-0000-0000-0000-000000000000"
	AllFUUID        = "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF"
)

// HostUUID is the SMBIOS UUID the host behind a system with spec UUID uuid reads in-band, under
// these quirks: the placeholder its firmware holds (ZeroSystemUUID, AllFSystemUUID,
// PlaceholderSystemUUID: the BMC reports what SMBIOS says), else its own. A BMC that hides the
// UUID (NoSystemUUID) or repeats another system's (SameUUIDEverywhere) does not change what the
// host reads.
func (q Quirks) HostUUID(uuid string) string {
	switch {
	case q.ZeroSystemUUID:
		return ZeroUUID
	case q.AllFSystemUUID:
		return AllFUUID
	case q.PlaceholderSystemUUID:
		return PlaceholderUUID
	}
	return uuid
}
