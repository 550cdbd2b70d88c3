// Package hwrecord compares a probe's report with a Server's record of its hardware: the disks
// and NICs its discovery's report listed (status.inventory). Outside a discovery a report does
// not replace that record, and one that lists other hardware says what a person must look at
// (docs/deletion.md). Plain data, no client: the registry and the server reconciler share it.
package hwrecord

import (
	"fmt"
	"net"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// MaxDifferences is how many differences Diff names; more are counted.
const MaxDifferences = 12

// DiskKey identifies a disk across boots, whose kernel names may change: its serial number,
// else its WWN, else its bus path, else (a disk that has none of them) its kernel name.
func DiskKey(d metalv1alpha1.StorageDevice) string {
	switch {
	case d.SerialNumber != "":
		return "serial:" + d.SerialNumber
	case d.WWN != "":
		return "wwn:" + d.WWN
	case d.BusPath != "":
		return "path:" + d.BusPath
	}
	return "name:" + d.Name
}

// Describe names a disk for people: "sdc (serial ZA1B2C03, 7.3 TiB)".
func Describe(d metalv1alpha1.StorageDevice) string {
	var what []string
	switch {
	case d.SerialNumber != "":
		what = append(what, "serial "+d.SerialNumber)
	case d.WWN != "":
		what = append(what, "WWN "+d.WWN)
	case d.BusPath != "":
		what = append(what, "path "+d.BusPath)
	}
	what = append(what, size(d))
	return fmt.Sprintf("%s (%s)", d.Name, strings.Join(what, ", "))
}

func size(d metalv1alpha1.StorageDevice) string {
	if d.Size == nil || d.Size.Sign() <= 0 {
		return "no medium"
	}
	return metalv1alpha1.HumanBytes(d.Size.Value())
}

// MACs are the NICs' usable MACs as net.HardwareAddr prints them (lower case, colons): an
// all-zero or broadcast address names no NIC.
func MACs(nics []metalv1alpha1.NetworkInterface) []string {
	var macs []string
	for _, nic := range nics {
		hw, err := net.ParseMAC(strings.TrimSpace(nic.MACAddress))
		if err != nil || len(hw) != 6 {
			continue
		}
		if s := hw.String(); s != "00:00:00:00:00:00" && s != "ff:ff:ff:ff:ff:ff" {
			macs = append(macs, s)
		}
	}
	return macs
}

// Diff names each way the reported disks and NICs differ from the recorded ones: a disk or NIC
// missing, one added, a disk of another size. Optical drives are left out: the probe's own
// virtual CD is there on some boots and not on others. Nil when they are the same.
func Diff(record, reported *metalv1alpha1.Inventory) []string {
	var diffs []string
	recDisks, repDisks := disks(record), disks(reported)
	seen := map[string]bool{}
	for _, d := range recDisks {
		key := DiskKey(d)
		seen[key] = true
		got, ok := find(repDisks, key)
		switch {
		case !ok:
			diffs = append(diffs, "disk "+Describe(d)+" missing")
		case !sameSize(got, d):
			diffs = append(diffs, fmt.Sprintf("disk %s is now %s (reported as %s)", Describe(d), size(got), got.Name))
		}
	}
	for _, d := range repDisks {
		if key := DiskKey(d); !seen[key] {
			seen[key] = true
			diffs = append(diffs, "disk "+Describe(d)+" added")
		}
	}
	recMACs, repMACs := macSet(record), macSet(reported)
	for _, mac := range MACs(nics(record)) {
		if !repMACs[mac] {
			diffs = append(diffs, "NIC "+mac+" missing")
		}
	}
	for _, mac := range MACs(nics(reported)) {
		if !recMACs[mac] {
			recMACs[mac] = true // listed twice: named once
			diffs = append(diffs, "NIC "+mac+" added")
		}
	}
	return diffs
}

// Summary joins differences for a message, naming at most MaxDifferences.
func Summary(diffs []string) string {
	if len(diffs) > MaxDifferences {
		return strings.Join(diffs[:MaxDifferences], "; ") + fmt.Sprintf("; and %d more", len(diffs)-MaxDifferences)
	}
	return strings.Join(diffs, "; ")
}

func sameSize(a, b metalv1alpha1.StorageDevice) bool {
	if a.Size == nil || b.Size == nil {
		return (a.Size == nil || a.Size.Sign() <= 0) == (b.Size == nil || b.Size.Sign() <= 0)
	}
	return a.Size.Cmp(*b.Size) == 0
}

func disks(inv *metalv1alpha1.Inventory) []metalv1alpha1.StorageDevice {
	if inv == nil {
		return nil
	}
	var out []metalv1alpha1.StorageDevice
	for _, d := range inv.Storage {
		if !metalv1alpha1.OpticalDrive(d) {
			out = append(out, d)
		}
	}
	return out
}

func nics(inv *metalv1alpha1.Inventory) []metalv1alpha1.NetworkInterface {
	if inv == nil {
		return nil
	}
	return inv.NetworkInterfaces
}

func macSet(inv *metalv1alpha1.Inventory) map[string]bool {
	set := map[string]bool{}
	for _, mac := range MACs(nics(inv)) {
		set[mac] = true
	}
	return set
}

func find(disks []metalv1alpha1.StorageDevice, key string) (metalv1alpha1.StorageDevice, bool) {
	for _, d := range disks {
		if DiskKey(d) == key {
			return d, true
		}
	}
	return metalv1alpha1.StorageDevice{}, false
}
