// This directory is a module of its own only so that it is left out of ironfleet's module zip:
// the fixture trees hold file names with ':' (PCI addresses, udev's b<major>:<minor>), which
// module zips refuse, and that would make github.com/ironfleet/ironfleet impossible to fetch
// through the module proxy. It has no Go code. See README.md.
module github.com/ironfleet/ironfleet/metalprobe/testdata/hosts

go 1.26.0
