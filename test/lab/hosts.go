// Package lab runs Ironfleet's world on one machine: the control plane, a simulated fleet of
// BMCs and hosts, and a boot service that plays the external PXE operator. cmd/metal-lab,
// the controller tests and the benchmarks all build on it.
package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

// Host is one simulated machine's in-band side: the hardware tree metalprobe reads.
type Host struct {
	// UUID is the host's own UUID, its system's in the simulator (SystemSpec.UUID): unique, the
	// key the boot service and tests know it by. The firmware may hold another (SMBIOSUUID).
	UUID string
	// SMBIOSUUID, when set, is the UUID the host's firmware holds instead of UUID, as a vendor
	// placeholder or all zeros (SetSMBIOSUUID).
	SMBIOSUUID string
	// SerialNumber, when set, is the serial number the host's firmware holds (SetSerialNumber):
	// its system's, as the BMC reports it.
	SerialNumber string
	// BMC and SystemID, when set, are the BMC (its object's name) and system Id the host sits
	// behind: the boot service finds its Server by them, as a real one does by the NIC's MAC.
	// Without them it finds the Server by UUID, which a placeholder or shared UUID cannot do.
	BMC, SystemID string
	Fixture       string
	Root          string
	// Disks are the host's disks, regular files <Root>/dev/<name> of DiskBytes each, filled
	// with a pattern so that a wipe can be checked byte by byte.
	Disks []string
	// PublishesBIOSVersion makes the host's firmware publish (its SMBIOS type 0, the probe's
	// dmi bios version) the BIOS version its BMC boots it with, as a lab VM's does: a firmware
	// update through the BMC then changes what the host itself reports. Off, the fixture's
	// own version stays (the fixtures' expected inventories name it).
	PublishesBIOSVersion bool
}

// DiskBytes is the size of a simulated host's disk files: large enough that the metadata wipe
// (the first and last MiB) leaves a middle untouched, and that SimImage and its config drive
// fit.
const DiskBytes = 4 << 20

// PrepareHost copies the named fixture tree (metalprobe/testdata/hosts) to dir and makes uuid
// its DMI product UUID, so several simulated hosts can share one hardware shape and still be
// told apart by the registry.
func PrepareHost(fixture, dir, uuid string) (Host, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Host{}, err
	}
	root, err := fixtures.CopyRoot(fixture, dir)
	if err != nil {
		return Host{}, err
	}
	uuidFile := filepath.Join(root, "sys", "class", "dmi", "id", "product_uuid")
	if err := os.WriteFile(uuidFile, []byte(strings.ToUpper(uuid)+"\n"), 0o644); err != nil {
		return Host{}, fmt.Errorf("setting the host's UUID: %w", err)
	}
	expected, err := fixtures.LoadExpected(fixture)
	if err != nil {
		return Host{}, err
	}
	var disks []string
	for _, d := range expected.Disks {
		disks = append(disks, d.Name)
	}
	if err := fixtures.MakeDiskFiles(root, disks, DiskBytes); err != nil {
		return Host{}, fmt.Errorf("making the host's disks: %w", err)
	}
	return Host{UUID: strings.ToLower(uuid), Fixture: fixture, Root: root, Disks: disks}, nil
}

// SetSMBIOSUUID makes uuid the UUID the host's firmware holds (and the probe reads) instead of
// its own: a placeholder, which its BMC reports too.
func (h *Host) SetSMBIOSUUID(uuid string) error {
	if uuid == "" {
		return errors.New("setting the host's SMBIOS UUID: empty")
	}
	if h.Root != "" {
		uuidFile := filepath.Join(h.Root, "sys", "class", "dmi", "id", "product_uuid")
		if err := os.WriteFile(uuidFile, []byte(strings.ToUpper(uuid)+"\n"), 0o644); err != nil {
			return fmt.Errorf("setting the host's SMBIOS UUID: %w", err)
		}
	}
	h.SMBIOSUUID = strings.ToLower(uuid)
	return nil
}

// SetSerialNumber makes serial the serial number the host's firmware holds (and the probe
// reads).
func (h *Host) SetSerialNumber(serial string) error {
	if h.Root != "" {
		if err := os.WriteFile(filepath.Join(h.Root, "sys", "class", "dmi", "id", "product_serial"), []byte(serial+"\n"), 0o644); err != nil {
			return fmt.Errorf("setting the host's serial number: %w", err)
		}
	}
	h.SerialNumber = serial
	return nil
}

// ReadsUUID is the UUID the host's firmware holds: SMBIOSUUID when set, else its own.
func (h Host) ReadsUUID() string {
	if h.SMBIOSUUID != "" {
		return h.SMBIOSUUID
	}
	return h.UUID
}

// publishBIOSVersion writes version as the BIOS version the host's firmware publishes.
func (h Host) publishBIOSVersion(version string) error {
	if !h.PublishesBIOSVersion || version == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(h.Root, "sys", "class", "dmi", "id", "bios_version"), []byte(version+"\n"), 0o644)
}
