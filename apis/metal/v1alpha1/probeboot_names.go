package v1alpha1

// Names of probe boots (internal/probeboot) that the reconcilers, the boot service and the
// harness share.
const (
	// LabelServer on a boot configuration names its Server.
	LabelServer = "metal.ironfleet.dev/server"

	// AnnotationInstallTarget on a provisioning boot configuration is the image and checksum it
	// installs: a claim whose image changed gets a new boot, not this one.
	AnnotationInstallTarget = "metal.ironfleet.dev/install-target"

	// AnnotationProbeNetwork, on a probe boot configuration, is a digest of the probe network its
	// ignition carries (none: no network), so that a changed one is rendered into the same boot
	// without reading its Secret at every look.
	AnnotationProbeNetwork = "metal.ironfleet.dev/probe-network"

	// BootMediaURLKey is the key of the boot ISO's URL in the Secret a VirtualMedia boot
	// configuration's status.bootMediaSecretRef names (written by the boot service).
	BootMediaURLKey = "url"
)
