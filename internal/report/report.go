// Package report is the one type metalprobe and the operator share: what the probe sends the
// registry about a host. It is plain data with a strict decoder, so a hostile body is refused
// with a clear error before anything touches the API.
package report

import (
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Report is a host's hardware as metalprobe collected it in-band.
type Report struct {
	// SystemUUID is the SMBIOS system UUID the probe read, lower case; empty when it could not
	// read one, and possibly a placeholder many machines share. It is information, not what
	// finds the Server (the bearer token names it): the registry refuses the report only when
	// the Server's identity is a UUID (docs/identity.md) and this is another one.
	SystemUUID string `json:"systemUUID"`
	// CollectedAt is when the probe collected the inventory.
	CollectedAt time.Time `json:"collectedAt"`
	// ProbeVersion identifies the metalprobe build.
	ProbeVersion string `json:"probeVersion,omitempty"`
	// Inventory is the hardware, in the API's own types so nothing is lost in translation.
	Inventory metalv1alpha1.Inventory `json:"inventory"`
	// Wipe is present when the probe ran in wipe mode: one result per disk.
	Wipe *metalv1alpha1.WipeReport `json:"wipe,omitempty"`
	// Install is present when the probe ran in provision mode: what it wrote, or why not.
	Install *metalv1alpha1.InstallReport `json:"install,omitempty"`
	// Warnings name collectors that failed (e.g. "lldp: lldpctl not found"); the rest of the
	// report is still valid.
	Warnings []string `json:"warnings,omitempty"`
}
