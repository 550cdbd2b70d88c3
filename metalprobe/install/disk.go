package install

import (
	"fmt"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// byPathPrefix is the directory of the stable device links a deviceName hint may name; such a
// hint matches a disk whose BusPath is the link's name.
const byPathPrefix = "/dev/disk/by-path/"

// SelectDisk chooses the disk to install to among the inventory's disks.
//
// With hints (non-nil, with at least one field set), exactly one non-removable disk must match
// every hint given, with Metal3's semantics: deviceName is the kernel name, with or without
// /dev/ (or /dev/disk/by-path/<BusPath>); serialNumber and wwn are exact; model and vendor
// are substrings; minSizeGigabytes is a least size in 10^9 bytes; rotational is exact. None →
// an *Error with reason NoMatchingDisk naming every disk and the first hint it failed; several
// → SeveralDisksMatch naming them.
//
// Without hints it is the smallest non-removable disk of known size that holds minBytes (the
// raw image's size; 0 when unknown), the first in inventory order among equals. No
// non-removable disk → NoMatchingDisk; none large enough → ImageTooLarge.
func SelectDisk(disks []metalv1alpha1.StorageDevice, hints *metalv1alpha1.RootDeviceHints, minBytes int64) (metalv1alpha1.StorageDevice, error) {
	if hints != nil && *hints != (metalv1alpha1.RootDeviceHints{}) {
		return selectByHints(disks, hints)
	}
	var best *metalv1alpha1.StorageDevice
	var sizes []string
	fixed := 0
	for i := range disks {
		d := &disks[i]
		if d.Removable {
			continue
		}
		fixed++
		size, ok := diskSize(*d)
		sizes = append(sizes, d.Name+" "+diskSizeText(*d))
		if !ok || size < minBytes {
			continue
		}
		if best == nil {
			best = d
		} else if bestSize, _ := diskSize(*best); size < bestSize {
			best = d
		}
	}
	switch {
	case best != nil:
		return *best, nil
	case fixed == 0:
		return metalv1alpha1.StorageDevice{}, newError(metalv1alpha1.InstallReasonNoMatchingDisk, "the inventory has no non-removable disk to install to (%s)", listDisks(disks))
	default:
		return metalv1alpha1.StorageDevice{}, newError(metalv1alpha1.InstallReasonImageTooLarge, "no disk of known size holds the image's %d bytes: %s", minBytes, strings.Join(sizes, ", "))
	}
}

func selectByHints(disks []metalv1alpha1.StorageDevice, hints *metalv1alpha1.RootDeviceHints) (metalv1alpha1.StorageDevice, error) {
	var matched []metalv1alpha1.StorageDevice
	var why []string
	for _, d := range disks {
		if d.Removable {
			why = append(why, d.Name+": removable")
			continue
		}
		if miss := mismatch(d, hints); miss != "" {
			why = append(why, d.Name+": "+miss)
			continue
		}
		matched = append(matched, d)
	}
	switch len(matched) {
	case 1:
		return matched[0], nil
	case 0:
		if len(disks) == 0 {
			return metalv1alpha1.StorageDevice{}, newError(metalv1alpha1.InstallReasonNoMatchingDisk, "no disk matches rootDeviceHints {%s}: the inventory lists no disk", describeHints(hints))
		}
		return metalv1alpha1.StorageDevice{}, newError(metalv1alpha1.InstallReasonNoMatchingDisk, "no disk matches rootDeviceHints {%s}: %s", describeHints(hints), strings.Join(why, "; "))
	}
	names := make([]string, len(matched))
	for i, d := range matched {
		names[i] = fmt.Sprintf("%s (serial %q, wwn %q, %s)", d.Name, d.SerialNumber, d.WWN, diskSizeText(d))
	}
	return metalv1alpha1.StorageDevice{}, newError(metalv1alpha1.InstallReasonSeveralDisksMatch, "rootDeviceHints {%s} match %d disks, want one: %s; add serialNumber or wwn to tell them apart", describeHints(hints), len(matched), strings.Join(names, ", "))
}

// mismatch is the first hint d fails, described; "" when it matches them all.
func mismatch(d metalv1alpha1.StorageDevice, h *metalv1alpha1.RootDeviceHints) string {
	if h.DeviceName != "" && !deviceNameMatches(d, h.DeviceName) {
		return fmt.Sprintf("deviceName %q is not /dev/%s", h.DeviceName, d.Name)
	}
	if h.SerialNumber != "" && d.SerialNumber != h.SerialNumber {
		return fmt.Sprintf("serialNumber is %q, not %q", d.SerialNumber, h.SerialNumber)
	}
	if h.WWN != "" && d.WWN != h.WWN {
		return fmt.Sprintf("wwn is %q, not %q", d.WWN, h.WWN)
	}
	if h.Model != "" && !strings.Contains(d.Model, h.Model) {
		return fmt.Sprintf("model %q does not contain %q", d.Model, h.Model)
	}
	if h.Vendor != "" && !strings.Contains(d.Vendor, h.Vendor) {
		return fmt.Sprintf("vendor %q does not contain %q", d.Vendor, h.Vendor)
	}
	if h.MinSizeGigabytes > 0 {
		size, ok := diskSize(d)
		if !ok {
			return fmt.Sprintf("size unknown, minSizeGigabytes is %d", h.MinSizeGigabytes)
		}
		if size/1_000_000_000 < h.MinSizeGigabytes {
			return fmt.Sprintf("%s is under minSizeGigabytes %d", diskSizeText(d), h.MinSizeGigabytes)
		}
	}
	if h.Rotational != nil && d.Rotational != *h.Rotational {
		return fmt.Sprintf("rotational is %t, not %t", d.Rotational, *h.Rotational)
	}
	return ""
}

func deviceNameMatches(d metalv1alpha1.StorageDevice, hint string) bool {
	if link, ok := strings.CutPrefix(hint, byPathPrefix); ok {
		return d.BusPath != "" && (link == d.BusPath || hint == d.BusPath)
	}
	return strings.TrimPrefix(hint, "/dev/") == d.Name
}

func describeHints(h *metalv1alpha1.RootDeviceHints) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, fmt.Sprintf("%s: %q", k, v))
		}
	}
	add("deviceName", h.DeviceName)
	add("serialNumber", h.SerialNumber)
	add("wwn", h.WWN)
	add("model", h.Model)
	add("vendor", h.Vendor)
	if h.MinSizeGigabytes > 0 {
		parts = append(parts, fmt.Sprintf("minSizeGigabytes: %d", h.MinSizeGigabytes))
	}
	if h.Rotational != nil {
		parts = append(parts, fmt.Sprintf("rotational: %t", *h.Rotational))
	}
	return strings.Join(parts, ", ")
}

// diskSize is the inventory's size of d in bytes, if known.
func diskSize(d metalv1alpha1.StorageDevice) (int64, bool) {
	if d.Size == nil {
		return 0, false
	}
	n, ok := d.Size.AsInt64()
	return n, ok && n > 0
}

func diskSizeText(d metalv1alpha1.StorageDevice) string {
	n, ok := diskSize(d)
	if !ok {
		return "size unknown"
	}
	return fmt.Sprintf("%d bytes (%.1f GB)", n, float64(n)/1e9)
}

func listDisks(disks []metalv1alpha1.StorageDevice) string {
	if len(disks) == 0 {
		return "it lists no disk"
	}
	parts := make([]string, len(disks))
	for i, d := range disks {
		parts[i] = d.Name
		if d.Removable {
			parts[i] += ": removable"
		}
	}
	return strings.Join(parts, ", ")
}
