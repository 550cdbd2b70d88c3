package v1alpha1

// Condition types used across kinds. Reasons are machine-readable CamelCase; messages are for people.
const (
	// ConditionReady says whether an object is doing its job (a BMC answers, a boot config is served).
	ConditionReady = "Ready"
	// ConditionMatched says whether an Endpoint's MAC address matched the MAC-prefix database.
	ConditionMatched = "Matched"
	// ConditionBound says whether a ServerClaim holds a Server.
	ConditionBound = "Bound"
	// ConditionDiscovered says whether a Server's inventory came from an in-band probe report.
	ConditionDiscovered = "Discovered"
	// ConditionCleaned says whether a released Server's disks were verified wiped.
	ConditionCleaned = "Cleaned"
	// ConditionInMaintenance says whether a Server is held by a ServerMaintenance.
	ConditionInMaintenance = "InMaintenance"
	// ConditionPowered says whether a Server's power matches what was asked for.
	ConditionPowered = "Powered"
	// ConditionHardwareRecord says whether the last probe report compared with a Server's
	// record of its hardware (the disks and NICs of its discovery's report) lists the same:
	// True (HardwareRecorded, HardwareMatches), False (HardwareChanged: the message names each
	// difference; the record stands, and the server is not pooled until a person retries), or
	// Unknown (HardwareChangeAccepted: the retry lets the next discovery record what it finds).
	ConditionHardwareRecord = "HardwareRecord"
	// Reasons of the HardwareRecord condition.
	ReasonHardwareRecorded       = "HardwareRecorded"
	ReasonHardwareMatches        = "HardwareMatches"
	ReasonHardwareChanged        = "HardwareChanged"
	ReasonHardwareChangeAccepted = "HardwareChangeAccepted"
	// ConditionProvisioned says whether a claimed Server was booted into its claim's image.
	ConditionProvisioned = "Provisioned"
	// ConditionProbe, on a Server, is the probe's own progress as the probe reports it to the
	// registry, which alone writes it: the reason is the probe's state (Failed is False).
	ConditionProbe = "Probe"
	// ConditionBootProgress, on a ServerBootConfiguration, is how far the boot it serves has
	// got, as the booted host reports it to the boot service: the reason is the stage
	// (InitStarted, NetworkUp, IgnitionFetched, ProbeRunning, Reported, or RegistryUnreachable
	// and Failed, which are False), the message what the host said.
	ConditionBootProgress = "BootProgress"
	// ConditionIgnitionServed, on a ServerBootConfiguration, says whether the boot's ignition
	// (its secrets) was served, once, to the host the boot is bound to (True), or a request
	// was refused and the boot ended (False, with who asked).
	ConditionIgnitionServed = "IgnitionServed"
	// ConditionOutOfBandInventory, on a BMC, is False when its protocol cannot read the
	// servers' hardware (IPMI: FRU only), reason InventoryUnsupported: each Server's hardware
	// then comes from the probe's in-band report alone. Absent for Redfish BMCs.
	ConditionOutOfBandInventory = "OutOfBandInventory"
	// ReasonInventoryUnsupported: the BMC's protocol reads no hardware inventory.
	ReasonInventoryUnsupported = "InventoryUnsupported"
	// ConditionLoaderOffered, on a ServerBootConfiguration, is what the boot service's DHCP last
	// offered the server's NIC to load (True; reason LoaderIPXE or LoaderSignedChain, the file
	// and when in the message): when a boot times out and nothing of it was asked for after
	// that, the firmware did not run the loader, and the Server says so.
	ConditionLoaderOffered = "LoaderOffered"
	// Reasons of the LoaderOffered condition.
	ReasonLoaderIPXE        = "LoaderIPXE"        // iPXE (undionly.kpxe, snponly.efi, ipxe.efi): unsigned
	ReasonLoaderSignedChain = "LoaderSignedChain" // shimx64.efi: Secure Boot's signed chain
	// ConditionHTTPBoot, on a BMC whose bootMethod is UefiHttp, says whether it can boot its
	// servers from a URI: True, reason HTTPBootURI, when every system offers the UefiHttp
	// override target and HttpBootUri; False, reason HTTPBootURIUnsupported, saying what is
	// missing, when one does not: its servers then boot by PXE (the boot service's DHCP and
	// TFTP, or their firmware's DHCP-led HTTP boot). Absent for other boot methods.
	ConditionHTTPBoot = "HTTPBoot"
	// Reasons of the HTTPBoot condition.
	ReasonHTTPBootURI            = "HTTPBootURI"
	ReasonHTTPBootURIUnsupported = "HTTPBootURIUnsupported"
	// ConditionBootMode, on a Server, says whether the mode its firmware was found booting in
	// (status.bootMode) is the one spec.bootMode asks for: False, reason BootModeMismatch, with
	// what to change where, when it is not.
	ConditionBootMode = "BootMode"
	// Reasons of the BootMode condition.
	ReasonBootModeMatches  = "BootModeMatches"  // found as spec.bootMode asks
	ReasonBootModeAsFound  = "BootModeAsFound"  // no spec.bootMode: the mode found is taken
	ReasonBootModeMismatch = "BootModeMismatch" // found in another mode than spec.bootMode
	ReasonBootModeUnknown  = "BootModeUnknown"  // not found yet (no BMC answer, no report)
)

// Conditions and reasons of a ServerFirmware.
const (
	// ConditionFirmwareRead, on a ServerFirmware, says whether its BMC's firmware inventory and
	// BIOS settings were read: True (FirmwareRead), or False (FirmwareManagementUnsupported: the
	// BMC has no firmware management, IPMI's among them; FirmwareReadFailed: the message says
	// what failed, and the read is tried again with backoff).
	ConditionFirmwareRead = "Read"
	// Reasons of the Read condition.
	ReasonFirmwareRead                  = "FirmwareRead"
	ReasonFirmwareManagementUnsupported = "FirmwareManagementUnsupported"
	ReasonFirmwareReadFailed            = "FirmwareReadFailed"
	// ConditionFirmwareCompliant, on a ServerFirmware, says whether the server runs what the
	// FirmwareBaselines that select it want, as its BMC last said: True (Compliant), False
	// (Drifted: status.differences lists each; InvalidSetting: a baseline asks for an attribute
	// the BMC's registry does not define, or a value it does not allow, named;
	// ConflictingBaselines: two baselines want different things of it, named: neither touches
	// it), or Unknown (NoBaseline; FirmwareManagementUnsupported).
	ConditionFirmwareCompliant = "Compliant"
	// Reasons of the Compliant condition (FirmwareManagementUnsupported is shared with Read).
	ReasonFirmwareCompliant    = "Compliant"
	ReasonFirmwareDrifted      = "Drifted"
	ReasonNoBaseline           = "NoBaseline"
	ReasonInvalidSetting       = "InvalidSetting"
	ReasonConflictingBaselines = "ConflictingBaselines"
	// Reasons of a firmware update (status.update.reason; the update's state says where it
	// stands): UpdateAdmitted, WaitingForTurn (maxUnavailable), RolloutStopped (maxFailures),
	// RolloutPaused (rollout.paused),
	// WaitingForMaintenance (the message says for what: an owner's approval), Staged,
	// Installing, Rebooting, WaitingForHost (its probe's report), UpdateSucceeded; failures:
	// UpdateRefused (the BMC refused the settings or the update, its message quoted),
	// UpdateTaskFailed (the BMC's task ended otherwise than Completed), UpdateTimedOut,
	// BMCDisagrees (after the reset the BMC still reports the old version), HostDisagrees (the
	// host's SMBIOS says another version than the BMC: both named), ImageUnavailable (the
	// image's credentials Secret is missing, or the image cannot be fetched or does not match its
	// checksum), MaintenanceLost (the server left the update's maintenance mid-update); Withdrawn.
	ReasonUpdateAdmitted        = "UpdateAdmitted"
	ReasonWaitingForTurn        = "WaitingForTurn"
	ReasonRolloutStopped        = "RolloutStopped"
	ReasonRolloutPaused         = "RolloutPaused"
	ReasonWaitingForMaintenance = "WaitingForMaintenance"
	ReasonUpdateStaged          = "Staged"
	ReasonUpdateInstalling      = "Installing"
	ReasonUpdateRebooting       = "Rebooting"
	ReasonWaitingForHost        = "WaitingForHost"
	ReasonUpdateSucceeded       = "UpdateSucceeded"
	ReasonUpdateRefused         = "UpdateRefused"
	ReasonUpdateTaskFailed      = "UpdateTaskFailed"
	ReasonUpdateTimedOut        = "UpdateTimedOut"
	ReasonBMCDisagrees          = "BMCDisagrees"
	ReasonHostDisagrees         = "HostDisagrees"
	ReasonImageUnavailable      = "ImageUnavailable"
	ReasonUpdateWithdrawn       = "Withdrawn"
	ReasonMaintenanceLost       = "MaintenanceLost"
	// ReasonLeftInMaintenance: a retried update no baseline wants anything of any more, still in
	// the maintenance its failure left it in.
	ReasonLeftInMaintenance = "LeftInMaintenance"
	// ConditionServerFirmwareCompliant, on a Server, summarises its ServerFirmware's Compliant
	// condition (same status, reason and message), so that fleet views need not read every
	// ServerFirmware.
	ConditionServerFirmwareCompliant = "FirmwareCompliant"
)

// The Healthy condition of a Server: its hardware health as its BMC reports it.
const (
	// ConditionHealthy: True (HealthOK) when the BMC reports every part OK; False
	// (HealthWarning, HealthCritical) naming the parts that are not; Unknown
	// (HealthUnsupported: the BMC's protocol reads no health, IPMI today; HealthReadFailed:
	// the last read failed, saying why).
	ConditionHealthy        = "Healthy"
	ReasonHealthOK          = "HealthOK"
	ReasonHealthWarning     = "HealthWarning"
	ReasonHealthCritical    = "HealthCritical"
	ReasonHealthUnsupported = "HealthUnsupported"
	ReasonHealthReadFailed  = "HealthReadFailed"
	// ReasonUnhealthyTainted and ReasonUnhealthyUntainted are the events of the Server when
	// Ironfleet sets or removes its TaintUnhealthy.
	ReasonUnhealthyTainted   = "UnhealthyTainted"
	ReasonUnhealthyUntainted = "UnhealthyUntainted"
)

// Conditions and reasons of a FirmwareBaseline.
const (
	// ConditionBaselineValid says whether every setting the baseline asks for is one the
	// registries of the servers it selects define, with a value they allow: False
	// (InvalidSetting) names the attribute, the value and a server whose BMC refuses it.
	ConditionBaselineValid = "Valid"
	ReasonSettingsValid    = "SettingsValid"
	// ConditionBaselineConflict says whether another baseline wants something else of a server
	// this one selects: True (ConflictingBaselines) names them; such servers are not touched.
	ConditionBaselineConflict = "Conflict"
	ReasonNoConflict          = "NoConflict"
)
