package v1alpha1

// Annotations people set.
const (
	// AnnotationApproveMaintenance on a ServerClaim, set to "true" by its owner, lets a
	// ServerMaintenance with policy OwnerApproval take the claimed server.
	AnnotationApproveMaintenance = "metal.ironfleet.dev/approve-maintenance"
	// AnnotationDeleteWithoutWipe on a Server, set to "true" by an admin, lets a deleted Server
	// go without the wipe it would otherwise wait for (docs/deletion.md); an event
	// records it.
	AnnotationDeleteWithoutWipe = "metal.ironfleet.dev/delete-without-wipe"
	// AnnotationRetry, set by a person on a Server in Error, sends it back to Initial.
	AnnotationRetry = "metal.ironfleet.dev/retry"
	// AnnotationReadFirmware, set by a person on a ServerFirmware, has its BMC read again now;
	// the firmware controller removes it once the read is done.
	AnnotationReadFirmware = "metal.ironfleet.dev/read-firmware"
	// AnnotationRetryUpdate, set by a person on a ServerFirmware whose update Failed, starts it
	// again (in the maintenance that still holds the server); the firmware controller removes
	// it. Its failure no longer counts against the baseline's maxFailures.
	AnnotationRetryUpdate = "metal.ironfleet.dev/retry-update"
)

// Annotations Ironfleet sets.
const (
	// AnnotationProbeBoot on a probe boot's ServerBootConfiguration names that boot; the
	// Server names its current one in status.probeBoot. (Servers of earlier versions carried
	// this annotation themselves; the operator moves it to status.)
	AnnotationProbeBoot = "metal.ironfleet.dev/probe-boot"
	// AnnotationProbeNetwork, on a probe boot configuration, is a digest of the probe network
	// its ignition carries (none: no network), so that a changed one is rendered into the same
	// boot without reading its Secret at every look.
	AnnotationProbeNetwork = "metal.ironfleet.dev/probe-network"
	// AnnotationInstallTarget on a provisioning boot configuration is the image and checksum it
	// installs (InstallTarget): a claim whose image changed gets a new boot, not this one.
	AnnotationInstallTarget = "metal.ironfleet.dev/install-target"
	// AnnotationCredentialIndex on a BMCSecret records which of the MAC-prefix entry's default
	// credentials authenticated.
	AnnotationCredentialIndex = "metal.ironfleet.dev/default-credential-index"
)

// InstallTarget is AnnotationInstallTarget's value for an image and its checksum.
func InstallTarget(image, checksum string) string {
	if checksum == "" {
		return image
	}
	return image + " " + checksum
}
