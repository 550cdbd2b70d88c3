// Package tenantimage builds a real tenant operating system image for tests: a raw disk that
// a server's firmware (SeaBIOS) boots with Debian's syslinux into Debian's kernel (the probe's
// pinned one, metalprobe/image/kernel.version) and a small initramfs whose /init
// (test/tenantimage/init) reads the OpenStack config drive, prints the user_data's digest on
// the console and, when the user_data asks for it, reports to the test over a static address.
// `make tenant-image` builds it into bin/tenant; see README.md.
//
// The contract between /init and the tests (console lines, the user_data key, the report) is
// in the contract package and re-exported here.
package tenantimage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// Output files in the build directory.
const (
	DiskFile     = "disk.raw"
	DiskGzFile   = "disk.raw.gz"
	DiskZstFile  = "disk.raw.zst"
	DiskXzFile   = "disk.raw.xz"
	SumsFile     = "SHA256SUMS"
	ManifestFile = "manifest.json"
)

// The disk's layout.
const (
	// DiskBytes is the size of disk.raw.
	DiskBytes = 64 << 20
	// PartitionStart is where the boot partition (partition 1: FAT32, bootable) starts.
	PartitionStart = 1 << 20
	// PartitionBytes is the boot partition's size; the rest of the disk is unpartitioned.
	PartitionBytes = 47 << 20
	// PartitionType is the MBR type of the boot partition: FAT32 with LBA.
	PartitionType = 0x0c
	// DiskSignature is the MBR disk identifier (PARTUUID 1f2e3d4c-01).
	DiskSignature = 0x1f2e3d4c
	// VolumeLabel and VolumeID name the FAT filesystem.
	VolumeLabel = "TENANT"
	VolumeID    = "1F2E3D4C"
)

// Files on the boot partition.
const (
	BootKernel    = "vmlinuz"
	BootInitrd    = "initrd.img"
	SyslinuxCfg   = "syslinux.cfg"
	SyslinuxLabel = "tenant"
	// The UEFI boot, through Debian's signed chain so that it boots with Secure Boot on: the
	// removable-media path, where firmware finds a loader on a disk without a boot entry, is
	// shim, which loads the signed GRUB beside it; GRUB reads its configuration from its
	// prefix, /EFI/debian, and boots the kernel shim verifies.
	EFIShim    = "EFI/BOOT/BOOTX64.EFI"
	EFIGRUB    = "EFI/BOOT/grubx64.efi"
	EFIGRUBCfg = "EFI/debian/grub.cfg"
)

// KernelCmdline is the APPEND line of the syslinux entry; syslinux puts BOOT_IMAGE=/vmlinuz
// in front of it.
const KernelCmdline = "initrd=/" + BootInitrd + " console=ttyS0,115200 " + contract.KernelArgTenant

// SyslinuxConfig is syslinux.cfg: the console on the first serial port, and the one entry,
// booted at once.
const SyslinuxConfig = "SERIAL 0 115200\n" +
	"DEFAULT " + SyslinuxLabel + "\n" +
	"LABEL " + SyslinuxLabel + "\n" +
	"  KERNEL /" + BootKernel + "\n" +
	"  APPEND " + KernelCmdline + "\n"

// GRUBConfig is /EFI/debian/grub.cfg: the same kernel and command line as syslinux's entry
// (GRUB, too, puts BOOT_IMAGE=/vmlinuz in front of it), booted at once.
const GRUBConfig = "set timeout=0\n" +
	"linux /" + BootKernel + " " + KernelCmdline + "\n" +
	"initrd /" + BootInitrd + "\n" +
	"boot\n"

// DirEnv names the build directory when set; the Makefile exports it (bin/tenant).
const DirEnv = "IRONFLEET_TENANT_DIR"

// Dir is where `make tenant-image` builds: $IRONFLEET_TENANT_DIR, else bin/tenant in the
// repository that holds the working directory.
func Dir() (string, error) {
	if dir := os.Getenv(DirEnv); dir != "" {
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "tenant"), nil
}

// repoRoot is the nearest directory above the working directory whose go.mod is this module's.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(strings.TrimSpace(string(data)), "module "+modulePath+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory; set %s", modulePath, DirEnv)
		}
		dir = parent
	}
}

const modulePath = "github.com/ironfleet/ironfleet"

// The contract with /init, re-exported (see the contract package).
const (
	ConsolePrefix     = contract.ConsolePrefix
	LineBooted        = contract.LineBooted
	LineConfigDrive   = contract.LineConfigDrive
	LineNoConfigDrive = contract.LineNoConfigDrive
	LineNoUserData    = contract.LineNoUserData
	LineNoTestConfig  = contract.LineNoTestConfig
	LineNetwork       = contract.LineNetwork
	LineReported      = contract.LineReported
	LineError         = contract.LineError
	LineIdle          = contract.LineIdle
	KernelArgTenant   = contract.KernelArgTenant
	ConfigDriveLabel  = contract.ConfigDriveLabel
	UserDataPath      = contract.UserDataPath
	MetaDataPath      = contract.MetaDataPath
	TestConfigKey     = contract.TestConfigKey
)

type (
	// TestConfig is what a test puts under TestConfigKey in the user_data.
	TestConfig = contract.TestConfig
	// Report is what /init POSTs to TestConfig.ReportURL.
	Report = contract.Report
)

// ErrNoTestConfig: the user_data has no TestConfigKey object.
var ErrNoTestConfig = contract.ErrNoTestConfig

// ParseTestConfig reads the TestConfig from user_data as /init does.
func ParseTestConfig(userData []byte) (TestConfig, error) { return contract.ParseTestConfig(userData) }

// UserData renders user_data with cfg under TestConfigKey, the extra fields, and trailer.
func UserData(cfg TestConfig, extra map[string]any, trailer []byte) ([]byte, error) {
	return contract.UserData(cfg, extra, trailer)
}

// BootedLine, ConfigDriveLine and ReportedLine are /init's console lines.
func BootedLine(kernel, cmdline string) string { return contract.BootedLine(kernel, cmdline) }

// ConfigDriveLine is the line /init prints once it has read the user_data from dev.
func ConfigDriveLine(dev string, userData []byte) string {
	return contract.ConfigDriveLine(dev, userData)
}

// ReportedLine is the line /init prints once the report was accepted.
func ReportedLine(reportURL string) string { return contract.ReportedLine(reportURL) }

// errTools wraps a missing host tool.
var errTools = errors.New("the tenant image needs syslinux, mtools and dosfstools (make tenant-image installs them; as root: apt-get install -y syslinux syslinux-common mtools dosfstools)")
