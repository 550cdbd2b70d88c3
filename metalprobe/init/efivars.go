package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// efiVarsDir is where efivarfs goes: the mount point the kernel makes under /sys/firmware/efi
// on a host UEFI booted. The probe reads the firmware's SecureBoot variable there
// (metalprobe/collect, the boot step).
const efiVarsDir = "/sys/firmware/efi/efivars"

// mountEFIVars mounts efivarfs, read-only (the probe only reads the firmware's variables, and a
// firmware can be bricked by deleting some), when the firmware is UEFI. It runs after the
// kernel modules are loaded: Debian builds efivarfs as a module. It says what went wrong, for
// the console; the probe then learns Secure Boot from the kernel's boot_params, or says it
// could not.
func mountEFIVars(root string) error {
	dir := filepath.Join(root, efiVarsDir)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // legacy BIOS boot: no EFI variables
	}
	err := unix.Mount("efivarfs", dir, "efivarfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if err != nil && !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("mounting efivarfs on %s: %w", efiVarsDir, err)
	}
	return nil
}
