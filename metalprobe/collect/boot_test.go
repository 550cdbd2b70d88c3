package collect

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// efiAttributes are the 4 bytes efivarfs puts before a variable's data: SecureBoot's, boot
// service and runtime access (0x6), little-endian.
var efiAttributes = []byte{0x06, 0x00, 0x00, 0x00}

// bootTree copies the small-vm fixture and gives it what a UEFI firmware leaves in sysfs:
// /sys/firmware/efi, and in efivarfs the variables named (each with the data given); mounted
// false leaves efivarfs' mount point empty.
func bootTree(t *testing.T, mounted bool, vars map[string][]byte) string {
	t.Helper()
	root := copyTree(t, "small-vm")
	dir := filepath.Join(root, efiVarsDir)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if mounted {
		// Every UEFI firmware has boot entries: efivarfs is never empty.
		require.NoError(t, os.WriteFile(filepath.Join(dir, "BootOrder-8be4df61-93ca-11d2-aa0d-00e098032b8c"), append(efiAttributes[:4:4], 0x01, 0x00), 0o644))
	}
	for name, data := range vars {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o644))
	}
	return root
}

// secureBoot is the SecureBoot variable as efivarfs shows it, holding value.
func secureBoot(value byte) map[string][]byte {
	return map[string][]byte{secureBootVar: append(efiAttributes[:4:4], value)}
}

// withBootParams writes a boot_params whose secure_boot byte is mode.
func withBootParams(t *testing.T, root string, mode byte) {
	t.Helper()
	data := make([]byte, 4096)
	data[bootParamsSecureBoot] = mode
	path := filepath.Join(root, bootParams)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, data, 0o400))
}

func TestCollectBootMode(t *testing.T) {
	cases := []struct {
		name string
		root func(t *testing.T) string
		want metalv1alpha1.BootMode
		// warning is a substring of the boot step's warning; "" for none.
		warning string
	}{
		{"no EFI directory is Legacy", func(t *testing.T) string { return fixtureRoot(t, "small-vm") }, metalv1alpha1.BootModeLegacy, ""},
		{"SecureBoot 1 is UEFISecureBoot", func(t *testing.T) string { return bootTree(t, true, secureBoot(1)) }, metalv1alpha1.BootModeUEFISecureBoot, ""},
		{"SecureBoot 0 is UEFI", func(t *testing.T) string { return bootTree(t, true, secureBoot(0)) }, metalv1alpha1.BootModeUEFI, ""},
		{"no SecureBoot variable is UEFI", func(t *testing.T) string { return bootTree(t, true, nil) }, metalv1alpha1.BootModeUEFI, ""},
		{"a SecureBoot variable too short is unknown", func(t *testing.T) string {
			return bootTree(t, true, map[string][]byte{secureBootVar: {0x06, 0x00, 0x00}})
		}, "", "boot: UEFI, but whether Secure Boot is enforced is unknown: /sys/firmware/efi/efivars/" + secureBootVar + " holds 3 bytes"},
		{"a SecureBoot variable of another value is unknown", func(t *testing.T) string { return bootTree(t, true, secureBoot(7)) },
			"", "says 7, neither 0 nor 1"},
		{"efivarfs not mounted, no boot_params: unknown", func(t *testing.T) string { return bootTree(t, false, nil) },
			"", "boot: UEFI, but whether Secure Boot is enforced is unknown: efivarfs is not mounted on /sys/firmware/efi/efivars; reading /sys/kernel/boot_params/data"},
		{"efivarfs not mounted, boot_params say enabled", func(t *testing.T) string {
			root := bootTree(t, false, nil)
			withBootParams(t, root, secureBootEnabled)
			return root
		}, metalv1alpha1.BootModeUEFISecureBoot, "boot: efivarfs is not mounted on /sys/firmware/efi/efivars; the kernel's boot_params say UEFISecureBoot"},
		{"efivarfs not mounted, boot_params say disabled", func(t *testing.T) string {
			root := bootTree(t, false, nil)
			withBootParams(t, root, secureBootDisabled)
			return root
		}, metalv1alpha1.BootModeUEFI, "the kernel's boot_params say UEFI"},
		{"efivarfs not mounted, the stub did not know", func(t *testing.T) string {
			root := bootTree(t, false, nil)
			withBootParams(t, root, secureBootUnknown)
			return root
		}, "", "the EFI stub did not learn the Secure Boot state"},
		{"the variable wins over boot_params", func(t *testing.T) string {
			root := bootTree(t, true, secureBoot(0))
			withBootParams(t, root, secureBootEnabled)
			return root
		}, metalv1alpha1.BootModeUEFI, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := tc.root(t)
			rep := collectRoot(t, root)
			assert.Equal(t, tc.want, rep.Inventory.BootMode)
			var bootWarnings []string
			for _, w := range rep.Warnings {
				if strings.HasPrefix(w, "boot:") {
					bootWarnings = append(bootWarnings, w)
				}
				assert.NotContains(t, w, root, "warnings name paths relative to the root")
			}
			if tc.warning == "" {
				assert.Empty(t, bootWarnings)
				return
			}
			require.Len(t, bootWarnings, 1)
			assert.Contains(t, bootWarnings[0], tc.warning)
			// The rest of the report is all there.
			assert.EqualValues(t, 2, rep.Inventory.CPU.Cores)
		})
	}
}
