// Package metalprobe is the in-band agent Ironfleet boots on a server to report its hardware
// to the operator's registry and to wipe its disks on release. Not built yet: see the
// server-lifecycle and claims issues.
package metalprobe
