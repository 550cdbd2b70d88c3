package collect

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// Where the firmware's boot mode is read, relative to the root.
const (
	// efiDir exists when the kernel was booted by UEFI firmware (and only then).
	efiDir = "sys/firmware/efi"
	// efiVarsDir is efivarfs' mount point; the kernel makes it, empty, under efiDir, and /init
	// mounts efivarfs on it.
	efiVarsDir = efiDir + "/efivars"
	// secureBootVar is the UEFI global variable SecureBoot (EFI_GLOBAL_VARIABLE's GUID): 1 when
	// the firmware enforces Secure Boot, 0 when it does not. efivarfs shows a variable as its 4
	// bytes of attributes, then its data: one byte here.
	secureBootVar = "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
	// bootParams is the x86 boot protocol's boot_params as the kernel received them. The EFI
	// stub records in its secure_boot byte what it read of the SecureBoot variable: the way
	// left when efivarfs is not mounted (Debian builds it as a module).
	bootParams = "sys/kernel/boot_params/data"
	// bootParamsSecureBoot is secure_boot's offset in struct boot_params (x86 bootparam.h).
	bootParamsSecureBoot = 0x1ec
)

// The EFI stub's efi_secureboot_mode values in boot_params' secure_boot.
const (
	secureBootUnset    = 0
	secureBootUnknown  = 1
	secureBootDisabled = 2
	secureBootEnabled  = 3
)

// boot fills the mode the firmware booted this host in, from the firmware's own variables:
// Legacy without an EFI directory in sysfs, else UEFISecureBoot when the SecureBoot variable
// says Secure Boot is enforced, else UEFI. When a UEFI host's Secure Boot state cannot be read,
// the mode is left empty (the registry then keeps what the BMC said) and the step warns.
func (c *collector) boot(_ context.Context, rep *report.Report) error {
	mode, err := c.bootMode()
	rep.Inventory.BootMode = mode
	return err
}

func (c *collector) bootMode() (metalv1alpha1.BootMode, error) {
	if !c.exists(efiDir) {
		// A root without sysfs is no legacy host: it is a probe that cannot see anything.
		if !c.exists("sys", "devices") && !c.exists("sys", "class") {
			return "", errors.New("no /sys: the boot mode is unknown")
		}
		return metalv1alpha1.BootModeLegacy, nil
	}
	mode, efiErr := c.efiVarBootMode()
	if efiErr == nil {
		return mode, nil
	}
	mode, paramsErr := c.bootParamsMode()
	if paramsErr == nil {
		c.note("boot: %v; the kernel's boot_params say %s", efiErr, mode)
		return mode, nil
	}
	return "", fmt.Errorf("UEFI, but whether Secure Boot is enforced is unknown: %v; %v", efiErr, paramsErr)
}

// efiVarBootMode reads the SecureBoot variable through efivarfs. A firmware without the
// variable has no Secure Boot (UEFI); efivarfs not mounted (its mount point empty) is an error.
func (c *collector) efiVarBootMode() (metalv1alpha1.BootMode, error) {
	data, err := os.ReadFile(c.path(efiVarsDir, secureBootVar))
	if errors.Is(err, fs.ErrNotExist) {
		mounted, derr := c.dirHasEntries(efiVarsDir)
		switch {
		case derr != nil:
			return "", fmt.Errorf("listing /%s: %v", efiVarsDir, unwrapPath(derr))
		case !mounted:
			return "", fmt.Errorf("efivarfs is not mounted on /%s", efiVarsDir)
		}
		return metalv1alpha1.BootModeUEFI, nil
	}
	if err != nil {
		return "", fmt.Errorf("reading /%s/%s: %v", efiVarsDir, secureBootVar, unwrapPath(err))
	}
	// 4 bytes of attributes, then the variable's one byte.
	if len(data) < 5 {
		return "", fmt.Errorf("/%s/%s holds %d bytes, not the 4 of its attributes and 1 of its value", efiVarsDir, secureBootVar, len(data))
	}
	switch data[4] {
	case 1:
		return metalv1alpha1.BootModeUEFISecureBoot, nil
	case 0:
		return metalv1alpha1.BootModeUEFI, nil
	default:
		return "", fmt.Errorf("/%s/%s says %d, neither 0 nor 1", efiVarsDir, secureBootVar, data[4])
	}
}

// bootParamsMode reads what the EFI stub found of Secure Boot (x86 only).
func (c *collector) bootParamsMode() (metalv1alpha1.BootMode, error) {
	data, err := os.ReadFile(c.path(bootParams))
	if err != nil {
		return "", fmt.Errorf("reading /%s: %v", bootParams, unwrapPath(err))
	}
	if len(data) <= bootParamsSecureBoot {
		return "", fmt.Errorf("/%s holds %d bytes, too few for its secure_boot byte", bootParams, len(data))
	}
	switch data[bootParamsSecureBoot] {
	case secureBootEnabled:
		return metalv1alpha1.BootModeUEFISecureBoot, nil
	case secureBootDisabled:
		return metalv1alpha1.BootModeUEFI, nil
	case secureBootUnset, secureBootUnknown:
		return "", fmt.Errorf("/%s: the EFI stub did not learn the Secure Boot state", bootParams)
	default:
		return "", fmt.Errorf("/%s: secure_boot is %d, no value the EFI stub writes", bootParams, data[bootParamsSecureBoot])
	}
}

// unwrapPath drops the path from a file system error (warnings name paths relative to the
// root, and the caller says which).
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
