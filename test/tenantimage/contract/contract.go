// Package contract is what the tenant test image's /init (test/tenantimage/init) and the tests
// that boot it agree on: the console lines it prints, where it finds its user_data, the
// user_data key that asks it to report, and the report it posts. It has no dependencies
// beyond the standard library, so that /init stays small; test/tenantimage re-exports it.
package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
)

// The console lines /init prints, each on a line of its own, in this order.
const (
	// ConsolePrefix starts every line /init prints.
	ConsolePrefix = "ironfleet-tenant: "
	// LineBooted is followed by "kernel=<uname -r> cmdline=<the kernel command line>"
	// (BootedLine). The command line of a disk boot starts with syslinux's BOOT_IMAGE=.
	LineBooted = ConsolePrefix + "booted "
	// LineConfigDrive is followed by "<dev> user_data_sha256=<hex> bytes=<n>" (ConfigDriveLine).
	LineConfigDrive = ConsolePrefix + "config-drive="
	// LineNoConfigDrive: no block device carried a config-2 ISO9660 filesystem within
	// ConfigDriveWait.
	LineNoConfigDrive = ConsolePrefix + "no config drive"
	// LineNoUserData is followed by " on <dev>": the config drive has no user_data.
	LineNoUserData = ConsolePrefix + "no user_data"
	// LineNoTestConfig: the user_data is not JSON with a TestConfigKey object, so /init
	// reports nothing (it is not an error: any user_data is welcome).
	LineNoTestConfig = ConsolePrefix + "no " + TestConfigKey + " in user_data"
	// LineNetwork is followed by "<ifname> <address>": the NIC /init configured.
	LineNetwork = ConsolePrefix + "network "
	// LineReported is followed by the report URL (ReportedLine).
	LineReported = ConsolePrefix + "reported to "
	// LineMarked is followed by "<dev> bytes=<n> blocks=<n>": a disk /init wrote the tenant's
	// data on, as a Reply asked; the report that follows has them all (Report.Marked).
	LineMarked = ConsolePrefix + "marked "
	// LineError is followed by what went wrong; /init then idles.
	LineError = ConsolePrefix + "error: "
	// LineIdle is the last line: /init idles until the machine is powered off.
	LineIdle = ConsolePrefix + "idle"
)

// Where the image builder puts the kernel modules /init loads: flat in ModulesDir, one a line
// in LoadOrderFile, dependencies first, each with what decides whether a machine needs it (the
// probe image's layout: metalprobe/image.LoadOrderFile, LoadOrder). Paths inside the
// initramfs, without the leading slash.
const (
	ModulesDir    = "lib/modules"
	LoadOrderFile = ModulesDir + "/load-order"
)

// KernelArgTenant is on the kernel command line of the image's syslinux entry.
const KernelArgTenant = "ironfleet.tenant=1"

// The OpenStack config drive /init reads.
const (
	// ConfigDriveLabel is the ISO9660 volume identifier of the config drive.
	ConfigDriveLabel = "config-2"
	// UserDataPath and MetaDataPath are the files /init reads, relative to the drive's root.
	UserDataPath = "openstack/latest/user_data"
	MetaDataPath = "openstack/latest/meta_data.json"
)

// TestConfigKey is the user_data key (a top-level field of a JSON object) that asks /init to
// configure a NIC and report: its value is a TestConfig.
const TestConfigKey = "ironfleetTenantTest"

// TestConfig is what a test puts under TestConfigKey in the user_data.
type TestConfig struct {
	// Address is the IPv4 address and prefix /init sets on the first NIC with a link
	// ("10.1.2.3/24"). /init never runs DHCP.
	Address string `json:"address"`
	// ReportURL is where /init POSTs its Report ("http://10.1.2.1:8099/report").
	ReportURL string `json:"reportURL"`
	// Gateway, when set, becomes the default route; without it the report URL must be on the
	// address's subnet.
	Gateway string `json:"gateway,omitempty"`
}

// Validate checks that the address is an IPv4 prefix, the URL is http(s) with a host and the
// gateway, when set, is an IPv4 address.
func (c TestConfig) Validate() error {
	var errs []error
	if p, err := netip.ParsePrefix(c.Address); err != nil || !p.Addr().Is4() {
		errs = append(errs, fmt.Errorf("address %q is not an IPv4 address with a prefix length", c.Address))
	}
	if u, err := url.Parse(c.ReportURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("reportURL %q is not an http(s) URL", c.ReportURL))
	}
	if c.Gateway != "" {
		if a, err := netip.ParseAddr(c.Gateway); err != nil || !a.Is4() {
			errs = append(errs, fmt.Errorf("gateway %q is not an IPv4 address", c.Gateway))
		}
	}
	return errors.Join(errs...)
}

// ErrNoTestConfig says the user_data is not a JSON object with a TestConfigKey field.
var ErrNoTestConfig = errors.New("no " + TestConfigKey + " object in the user_data")

// ParseTestConfig reads the TestConfig from user_data: the first JSON value in it must be an
// object with a TestConfigKey object. What follows that first value is ignored, so user_data
// may carry arbitrary bytes after the JSON. It returns ErrNoTestConfig when the user_data is
// not such JSON, and an error saying what is wrong when the TestConfig is invalid.
func ParseTestConfig(userData []byte) (TestConfig, error) {
	var doc map[string]json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(userData)).Decode(&doc); err != nil {
		return TestConfig{}, ErrNoTestConfig
	}
	raw, ok := doc[TestConfigKey]
	if !ok {
		return TestConfig{}, ErrNoTestConfig
	}
	var cfg TestConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return TestConfig{}, fmt.Errorf("%s: %w", TestConfigKey, err)
	}
	if err := cfg.Validate(); err != nil {
		return TestConfig{}, fmt.Errorf("%s: %w", TestConfigKey, err)
	}
	return cfg, nil
}

// UserData renders a JSON object with cfg under TestConfigKey and the extra fields, followed
// by trailer (any bytes: /init ignores what follows the JSON, and reports the whole user_data).
func UserData(cfg TestConfig, extra map[string]any, trailer []byte) ([]byte, error) {
	doc := map[string]any{}
	for k, v := range extra {
		doc[k] = v
	}
	doc[TestConfigKey] = cfg
	data, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return append(data, trailer...), nil
}

// Report is what /init POSTs (as JSON) to TestConfig.ReportURL.
type Report struct {
	// UserData is the user_data file, byte for byte (base64 in the JSON).
	UserData []byte `json:"userData"`
	// MetaData is meta_data.json as it was on the drive when it is JSON, else null.
	MetaData json.RawMessage `json:"metaData"`
	// ConfigDrive is the block device the config drive was found on ("vda2").
	ConfigDrive string `json:"configDrive"`
	// Cmdline is /proc/cmdline without its trailing newline.
	Cmdline string `json:"cmdline"`
	// Kernel is uname -r.
	Kernel string `json:"kernel"`
	// Firmware is how the firmware booted the OS: FirmwareBIOS, FirmwareUEFI or
	// FirmwareUEFISecureBoot.
	Firmware string `json:"firmware"`
	// Interface and Address are the NIC /init configured and its address.
	Interface string `json:"interface"`
	Address   string `json:"address"`
	// Marked is set in the report /init posts after a Reply asked it to MarkDisks: the disks it
	// wrote the tenant's data on.
	Marked []MarkedDisk `json:"marked,omitempty"`
}

// The boots a Report's Firmware tells apart.
const (
	// FirmwareBIOS: no /sys/firmware/efi, so no UEFI firmware booted the kernel.
	FirmwareBIOS = "BIOS"
	// FirmwareUEFI: UEFI firmware, and the kernel's EFI stub found Secure Boot off (or could
	// not tell).
	FirmwareUEFI = "UEFI"
	// FirmwareUEFISecureBoot: UEFI firmware enforcing Secure Boot, as the EFI stub found it
	// (boot_params' secure_boot): every loader on the way, and the kernel, were signed.
	FirmwareUEFISecureBoot = "UEFISecureBoot"
)

// Reply is what a test may answer a report with (200, JSON) to give /init more to do; an
// answer without a body (204) gives it nothing.
type Reply struct {
	// MarkDisks asks /init to write the tenant's data across every whole disk the OS sees
	// (MarkOffsets, TenantData), sync each, and post the report again with Marked.
	MarkDisks bool `json:"markDisks,omitempty"`
}

// MarkedDisk is a disk /init wrote the tenant's data on.
type MarkedDisk struct {
	// Device is the kernel's name for it ("vda", "nvme0n1").
	Device string `json:"device"`
	// Bytes is its size; Blocks is how many MarkBlock-byte blocks were written
	// (len(MarkOffsets(Bytes))).
	Bytes  int64 `json:"bytes"`
	Blocks int   `json:"blocks"`
}

// Where the tenant's data goes on a disk when a Reply asks for it: a MarkBlock-byte block in
// each MarkStride bytes of the device, from its first byte to its last.
const (
	MarkBlock  = 4096
	MarkStride = 1 << 20
)

// MarkOffsets are the offsets of the blocks of the tenant's data on a device of size bytes:
// one in each whole MarkStride, at a place within it that moves from one stride to the next
// (a wipe that skips the same part of every stride misses some), the first block of the
// device, and its last whole block.
func MarkOffsets(size int64) []int64 {
	const perStride = MarkStride / MarkBlock
	var offs []int64
	for i := int64(0); (i+1)*MarkStride <= size; i++ {
		offs = append(offs, i*MarkStride+(i*37%perStride)*MarkBlock)
	}
	if last := size/MarkBlock*MarkBlock - MarkBlock; last >= 0 && (len(offs) == 0 || offs[len(offs)-1] != last) {
		offs = append(offs, last)
	}
	return offs
}

// TenantDataPrefix starts every record of the tenant's data.
const TenantDataPrefix = "tenant-data@"

// TenantDataRecord is the length of one record of the tenant's data.
const TenantDataRecord = 32

// TenantData is the tenant's data for the n bytes at off, both multiples of TenantDataRecord:
// records "tenant-data@<off, 19 digits>\n", each naming its own offset, so that a record found
// anywhere says where it was written.
func TenantData(off int64, n int) []byte {
	buf := make([]byte, 0, n)
	for at := off; len(buf) < n; at += TenantDataRecord {
		buf = fmt.Appendf(buf, "%s%019d\n", TenantDataPrefix, at)
	}
	return buf[:n]
}

// BootedLine is the first line /init prints.
func BootedLine(kernel, cmdline string) string {
	return LineBooted + "kernel=" + kernel + " cmdline=" + cmdline
}

// ConfigDriveLine is the line /init prints once it has read the user_data from dev.
func ConfigDriveLine(dev string, userData []byte) string {
	sum := sha256.Sum256(userData)
	return fmt.Sprintf("%s%s user_data_sha256=%s bytes=%d", LineConfigDrive, dev, hex.EncodeToString(sum[:]), len(userData))
}

// ReportedLine is the line /init prints once the report was accepted.
func ReportedLine(reportURL string) string { return LineReported + reportURL }
