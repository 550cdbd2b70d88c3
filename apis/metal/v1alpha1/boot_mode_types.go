package v1alpha1

// BootMode is how a server's firmware boots: UEFI, UEFI with Secure Boot enforced, or legacy
// BIOS. It decides the loader the boot service hands the server (the signed chain — Debian's
// shim, GRUB and kernel — under Secure Boot), the EFI bit of IPMI's boot flags and Redfish's
// BootSourceOverrideMode.
// +kubebuilder:validation:Enum=UEFI;UEFISecureBoot;Legacy
type BootMode string

const (
	// BootModeUEFI boots UEFI with Secure Boot off.
	BootModeUEFI BootMode = "UEFI"
	// BootModeUEFISecureBoot boots UEFI with Secure Boot enforced: only signed loaders run.
	BootModeUEFISecureBoot BootMode = "UEFISecureBoot"
	// BootModeLegacy boots the legacy BIOS (CSM) way.
	BootModeLegacy BootMode = "Legacy"
)

// Where a server's status.bootMode was learned (ServerStatus.BootModeSource).
const (
	// BootModeSourceBMC: read from the BMC before the probe reported (Redfish's
	// BootSourceOverrideMode and SecureBoot resource, IPMI's boot flags).
	BootModeSourceBMC = "BMC"
	// BootModeSourceProbe: the probe's report, read from the firmware's own variables (efivars)
	// inside the booted host. It wins over the BMC's word.
	BootModeSourceProbe = "Probe"
)

// UEFI says whether the mode boots UEFI (with Secure Boot or without).
func (m BootMode) UEFI() bool { return m == BootModeUEFI || m == BootModeUEFISecureBoot }

// EffectiveBootMode is the mode the server is booted for: spec.bootMode when set, else the mode
// it was found in (status.bootMode); empty when neither is known.
func (s *Server) EffectiveBootMode() BootMode {
	if s.Spec.BootMode != "" {
		return s.Spec.BootMode
	}
	return s.Status.BootMode
}
