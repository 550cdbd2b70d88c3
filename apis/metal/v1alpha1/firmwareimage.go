package v1alpha1

// A firmware image Ironfleet serves itself (FirmwareImage.ServedBy BootService) is asked of the
// boot service by a Secret in the boot namespace, made by the firmware controller for one step
// of one server's update and deleted when that update no longer needs it: the URL it is served
// at dies with it.
const (
	// LabelFirmwareImage marks such a Secret ("true").
	LabelFirmwareImage = "metal.ironfleet.dev/firmware-image"
	// FirmwareImageURLKey is the image's origin URL; FirmwareImageChecksumKey its checksum
	// (sha256:<hex>, optional); FirmwareImageUsernameKey and FirmwareImagePasswordKey the
	// origin's credentials (optional).
	FirmwareImageURLKey      = "url"
	FirmwareImageChecksumKey = "checksum"
	FirmwareImageUsernameKey = "username"
	FirmwareImagePasswordKey = "password"
	// FirmwareImageServedURLKey is written into the Secret by the boot service: the URL it
	// serves the image at, <media URL>/firmware/<token>, the token unguessable and bound to the
	// Secret (its namespace, name and UID). It is a bearer secret: never logged.
	FirmwareImageServedURLKey = "served-url"
)
