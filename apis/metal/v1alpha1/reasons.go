package v1alpha1

// Reasons the operator sets on conditions and records on events, by the kind they are about.
// Each is documented in docs/conditions.md. (The reasons of a BMC's Ready condition, a claim's
// Bound condition and an install's result are in bmc_types.go, serverclaim_types.go and
// server_types.go; those of the HardwareRecord condition in conditions.go.)

// Reasons of a Server's conditions and events.
const (
	// ReasonEnrolled: a new Server, found on its BMC, enters Initial.
	ReasonEnrolled = "Enrolled"
	// ReasonRetryRequested: a person set AnnotationRetry on a Server in Error.
	ReasonRetryRequested = "RetryRequested"

	// Discovery.
	ReasonWaitingForBootService = "WaitingForBootService"
	// ReasonWaitingForBMC: the Server's BMC boots by UefiHttp and has not yet said whether it
	// can boot a URI (its HTTPBoot condition): the probe's boot method waits for that answer.
	ReasonWaitingForBMC     = "WaitingForBMC"
	ReasonDiscoveryBackoff  = "DiscoveryBackoff"
	ReasonProbeBooting      = "ProbeBooting"
	ReasonReportReceived    = "ReportReceived"
	ReasonDiscoveryTimedOut = "DiscoveryTimedOut"
	ReasonAttemptsExhausted = "DiscoveryAttemptsExhausted"
	ReasonAwaitingReport    = "AwaitingReport"
	// ReasonMachineHeldElsewhere: another Server of the machine may hold a tenant's data.
	ReasonMachineHeldElsewhere = "MachineHeldElsewhere"
	// ReasonVirtualMediaUnsupported: the Server's BMC's bootMethod is VirtualMedia, but the BMC
	// offers no virtual CD/DVD: the probe is not booted until the BMC's spec or firmware
	// changes. The same word as the BMC's own reason.
	ReasonVirtualMediaUnsupported = BMCReasonVirtualMediaUnsupported
	// ReasonProbeBootEnded: the boot service ended the server's probe boot because its secrets
	// were asked for twice, or by another host than the one the boot is bound to (the boot
	// configuration's IgnitionServed condition says who asked). The boot's registry token may be
	// in an attacker's hands: the boot is dropped at once (the registry then refuses its token)
	// and a new one, with new secrets, is made.
	ReasonProbeBootEnded = "ProbeBootEnded"

	// Claim and release.
	ReasonClaimed         = "Claimed"
	ReasonReleased        = "Released"
	ReasonImageBooted     = "ImageBooted"
	ReasonImageBooting    = "ImageBooting"
	ReasonClaimGone       = "ClaimGone"
	ReasonWaitingForClaim = "WaitingForClaim"

	// The Provisioned condition while a claim's image is installed to disk.
	ReasonInstalling         = "Installing"
	ReasonInstalled          = "Installed"
	ReasonInstallFailed      = "InstallFailed"
	ReasonInstallTimedOut    = "InstallTimedOut"
	ReasonReprovisioning     = "Reprovisioning"
	ReasonIgnitionUnreadable = "IgnitionUnreadable" // also a boot configuration's Ready reason
	ReasonInstallInterrupted = "InstallInterrupted"

	// Cleanup.
	ReasonWipeBooting        = "WipeBooting"
	ReasonWipeVerified       = "WipeVerified"
	ReasonWipeFailed         = "WipeFailed"
	ReasonWipeAttemptsUsedUp = "WipeAttemptsExhausted"
	// ReasonMetadataWipeOnly (a Warning event) marks each server pooled after a wipe with the
	// metadata policy: the previous tenant's data is still readable on its disks.
	ReasonMetadataWipeOnly = "MetadataWipeOnly"

	// Maintenance.
	ReasonMaintenanceStarted = "MaintenanceStarted"
	ReasonMaintenanceEnded   = "MaintenanceEnded"
	// ReasonTakenFromTenant marks a server taken into maintenance from its claim dirty.
	ReasonTakenFromTenant = "TakenFromTenant"

	// Deletion events.
	ReasonWipeBeforeDeletion = "WipeBeforeDeletion"
	ReasonDeletedWithoutWipe = "DeletedWithoutWipe"
)

// Reasons of power delivery.
const (
	// Events.
	ReasonPowerUnconfirmed        = "PowerUnconfirmed"
	ReasonGracefulShutdownIgnored = "GracefulShutdownIgnored"
	ReasonPowerResent             = "PowerResent"

	// ReasonPowerOnRequested and its kin are the Powered condition's reasons: "Power", the
	// power asked for, and the delivery state (PowerOffShuttingDown, PowerOnConfirmed, ...).
	ReasonPowerOnRequested  = "PowerOnRequested"
	ReasonPowerOffRequested = "PowerOffRequested"
	ReasonPowerOnSent       = "PowerOnSent"
	ReasonPowerOffSent      = "PowerOffSent"
)

// Reasons of a ServerClaim's conditions.
const (
	ReasonBindConflict     = "BindConflict"
	ReasonServerLost       = "ServerLost"
	ReasonProvisioning     = "Provisioning"
	ReasonServerReady      = "ServerReady"
	ReasonWaitingForServer = "WaitingForServer"
	// ReasonStaleBootConfiguration: the claim's boot configuration was for a server it does not
	// hold, and was deleted.
	ReasonStaleBootConfiguration = "StaleBootConfiguration"
)

// Reasons of a ServerMaintenance's Ready condition.
const (
	ReasonWaitingForApproval = "WaitingForOwnerApproval"
	// ReasonMaintenanceRequested: the event that tells a claim's owner a maintenance waits for
	// their approval.
	ReasonMaintenanceRequested = "MaintenanceRequested"
	ReasonServerHeld           = "ServerHeldByOtherMaintenance"
	ReasonServerNotFound       = "ServerNotFound" // also a boot configuration's Ready reason
	ReasonTakingServer         = "TakingServer"
	ReasonInMaintenance        = "InMaintenance"
)

// Reasons of an Endpoint's conditions and events.
const (
	EndpointReasonMatched          = "Matched"
	EndpointReasonNoMatchingPrefix = "NoMatchingPrefix"
	EndpointReasonBMCCreated       = "BMCCreated"
	EndpointReasonNoIP             = "NoIPAddress"
	EndpointReasonNoCredential     = "NoDefaultCredentialAuthenticated"

	// ReasonDeletingBMC: a deleted Endpoint deletes the BMC it made, and waits for it to go.
	ReasonDeletingBMC = "DeletingBMC"
	// ReasonBMCSecretRestored: the BMCSecret of the Endpoint's BMC was gone, and was made again.
	ReasonBMCSecretRestored = "BMCSecretRestored"
)

// Event reasons of BMCs and BMCSecrets.
const (
	// ReasonServerCreated: a BMC made a Server for one of its systems.
	ReasonServerCreated = "ServerCreated"
	// ReasonDuplicateSystemUUID: a system's UUID is another Server's already; its Server is
	// named by BMC and system instead.
	ReasonDuplicateSystemUUID = "DuplicateSystemUUID"
	// ReasonServerTakenOver: a Server whose BMC is gone is reached through another BMC now.
	ReasonServerTakenOver = "ServerTakenOver"
	// ReasonClaimedServerKept: a deleted BMC kept its claimed Server for its tenant.
	ReasonClaimedServerKept = "ClaimedServerKept"
	// ReasonWaitingForServers: the event of a deleted BMC that waits for its Servers' wipes.
	ReasonWaitingForServers = "WaitingForServers"
	// ReasonInUse: a deleted BMCSecret is kept while BMCs use it.
	ReasonInUse = "InUse"
)

// Reasons of a ServerBootConfiguration's conditions, set by Ironfleet's boot service.
const (
	// The Ready condition (and ReasonServerNotFound, ReasonIgnitionUnreadable).
	ReasonBootReady         = "BootReady"
	ReasonMACsUnknown       = "MACsUnknown"
	ReasonArtifactMissing   = "ArtifactMissing"
	ReasonImageNotSupported = "ImageNotSupported"
	// Virtual-media boots only.
	ReasonIgnitionTooLarge        = "IgnitionTooLarge"
	ReasonBootMediaSecretConflict = "BootMediaSecretConflict"

	// The IgnitionServed condition (and the Warning events of an ended boot), and
	// ReasonBootEnded, the Ready reason of an ended boot.
	ReasonIgnitionServedOnce = "ServedOnce"
	ReasonSecondFetchRefused = "SecondFetchRefused"
	ReasonWrongHost          = "WrongHost"
	ReasonBootEnded          = "BootEnded"
)

// Event reasons of Ironfleet's boot service, on ServerBootConfigurations.
const (
	ReasonScriptServed       = "ScriptServed"
	ReasonIgnitionServed     = "IgnitionServed"
	ReasonBootMediaPublished = "BootMediaPublished"
	ReasonBootMediaServed    = "BootMediaServed"
	// ReasonBootRequestRefused: a request from another address than the server's lease,
	// refused; the boot goes on (the lease says which host is the server).
	ReasonBootRequestRefused = "BootRequestRefused"
)
