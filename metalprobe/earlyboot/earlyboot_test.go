package earlyboot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLoadOrder(t *testing.T) {
	modules, err := ParseLoadOrder(strings.NewReader("# written by metalprobe/image\nvirtio_ring.ko\n\n  virtio.ko depends=virtio_ring dependency \nvirtio-rng.ko depends=virtio,virtio_ring\n" +
		"ahci.ko pci=pci:v*d*sv*sd*bc01sc06i01*,pci:v00001B4Bd00009230sv*sd*bc*sc*i*\n"))
	require.NoError(t, err)
	assert.Equal(t, []Module{
		{File: "virtio_ring.ko", Name: "virtio_ring"},
		{File: "virtio.ko", Name: "virtio", Depends: []string{"virtio_ring"}, Dependency: true},
		{File: "virtio-rng.ko", Name: "virtio_rng", Depends: []string{"virtio", "virtio_ring"}},
		{File: "ahci.ko", Name: "ahci", PCI: []string{"pci:v*d*sv*sd*bc01sc06i01*", "pci:v00001B4Bd00009230sv*sd*bc*sc*i*"}},
	}, modules)

	modules, err = ParseLoadOrder(strings.NewReader("# comment\n\nvirtio.ko\n virtio_pci.ko \n"))
	require.NoError(t, err)
	assert.Equal(t, []Module{{File: "virtio.ko", Name: "virtio"}, {File: "virtio_pci.ko", Name: "virtio_pci"}}, modules)
}

func TestParseLoadOrderRefusesPaths(t *testing.T) {
	for _, bad := range []string{"../../etc/passwd.ko", "kernel/drivers/virtio.ko", "virtio.ko.xz", "notes.txt", "../x.ko", "x.o", "a/b.ko", "..", ".ko", "depends=ok.ko"} {
		_, err := ParseLoadOrder(strings.NewReader("ok.ko\n" + bad + "\n"))
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "line 2", bad)
	}
}

// TestParseLoadOrderRefusesMalformedLines: each bad second line is refused by its number, and
// says what is wrong with it.
func TestParseLoadOrderRefusesMalformedLines(t *testing.T) {
	for bad, why := range map[string]string{
		"b.ko depends=c":                   `depends on "c", which no line before it lists`,
		"b.ko depends=b":                   `depends on "b"`,
		"b.ko depends=":                    `depends on ""`,
		"b.ko depends=ok,":                 `depends on ""`,
		"b.ko depends":                     `"depends" is not a field`,
		"ok.ko":                            "ok is listed twice",
		"ok.ko depends=ok":                 "ok is listed twice",
		"o-k.ko depends=o_k":               `depends on "o_k"`,
		"b.ko pci=":                        "an empty pci= pattern",
		"b.ko pci=pci:v1*,,pci:v2*":        "an empty pci= pattern",
		"b.ko pci=pci:v1* pci=pci:v2*":     "pci appears twice",
		"b.ko dependency dependency":       "dependency appears twice",
		"b.ko dependency=yes":              `"dependency=yes" is not a field`,
		"b.ko builtin":                     `"builtin" is not a field`,
		"b.ko softdep=ok":                  `"softdep=ok" is not a field`,
		"b.ko depends=ok pci=pci:* extra=": `"extra=" is not a field`,
	} {
		_, err := ParseLoadOrder(strings.NewReader("# c\nok.ko\n" + bad + "\n"))
		require.Error(t, err, bad)
		assert.ErrorContains(t, err, "line 3: ", bad)
		assert.ErrorContains(t, err, why, bad)
	}
	// Two files of the same module name (hyphens are underscores in module names).
	_, err := ParseLoadOrder(strings.NewReader("virtio_rng.ko\nvirtio-rng.ko\n"))
	assert.ErrorContains(t, err, "line 2: module virtio_rng is listed twice")
}

func TestMatchesAlias(t *testing.T) {
	const (
		// QEMU's q35 ICH9 AHCI controller, e1000 and virtio-net NICs, and an LSI SAS3008 HBA
		ich9AHCI  = "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01"
		e1000     = "pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00"
		virtioNet = "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"
		sas3008   = "pci:v00001000d00000097sv00001000sd00003090bc01sc07i00"
		piixIDE   = "pci:v00008086d00007010sv00001AF4sd00001100bc01sc01i80"
	)
	for _, c := range []struct {
		pattern, modalias string
		match             bool
	}{
		// ahci binds any SATA controller in AHCI mode by its class (01 storage, 06 SATA, 01 AHCI)
		{"pci:v*d*sv*sd*bc01sc06i01*", ich9AHCI, true},
		{"pci:v*d*sv*sd*bc01sc06i01*", piixIDE, false},
		{"pci:v*d*sv*sd*bc01sc06i01*", sas3008, false},
		// a driver's vendor and device ID
		{"pci:v00008086d0000100Esv*sd*bc*sc*i*", e1000, true},
		{"pci:v00008086d0000100Esv*sd*bc*sc*i*", ich9AHCI, false},
		{"pci:v00008086d000010D3sv*sd*bc*sc*i*", e1000, false},
		{"pci:v00001000d00000097sv*sd*bc*sc*i*", sas3008, true},
		{"pci:v00001AF4d*sv*sd*bc*sc*i*", virtioNet, true},
		{"pci:v00001AF4d*sv*sd*bc*sc*i*", e1000, false},
		// and a subsystem; ? and [...] as fnmatch has them
		{"pci:v00001000d00000097sv00001000sd00003090bc*sc*i*", sas3008, true},
		{"pci:v00001000d00000097sv00001000sd00003091bc*sc*i*", sas3008, false},
		{"pci:v0000100?d*sv*sd*bc*sc*i*", sas3008, true},
		{"pci:v0000[89]086d*sv*sd*bc*sc*i*", e1000, true},
		{"pci:v0000[!8]086d*sv*sd*bc*sc*i*", e1000, false},
		// case matters, as in kmod: sysfs and modinfo both write hex in capitals
		{"pci:v00008086d0000100esv*sd*bc*sc*i*", e1000, false},
		// a pattern that does not compile matches anything rather than miss a device
		{"pci:v0000[8086d*", e1000, true},
		{"pci:v\\", sas3008, true},
	} {
		assert.Equal(t, c.match, MatchesAlias(c.pattern, c.modalias), "%s against %s", c.pattern, c.modalias)
	}
}

// selectOrder is a load order shaped like the probe image's (dependencies first): SATA, a
// SAS HBA, SCSI disks, two NICs, virtio, efivarfs.
var selectOrder = []Module{
	{File: "scsi_common.ko", Name: "scsi_common", Dependency: true},
	{File: "scsi_mod.ko", Name: "scsi_mod", Depends: []string{"scsi_common"}, Dependency: true},
	{File: "libata.ko", Name: "libata", Depends: []string{"scsi_mod"}, Dependency: true},
	{File: "libahci.ko", Name: "libahci", Depends: []string{"libata"}, Dependency: true},
	{File: "ahci.ko", Name: "ahci", Depends: []string{"libahci", "libata"}, PCI: []string{"pci:v*d*sv*sd*bc01sc06i01*", "pci:v00001B4Bd00009230sv*sd*bc*sc*i*"}},
	{File: "raid_class.ko", Name: "raid_class", Dependency: true},
	{File: "scsi_transport_sas.ko", Name: "scsi_transport_sas", Depends: []string{"scsi_mod"}, Dependency: true},
	{File: "mpt3sas.ko", Name: "mpt3sas", Depends: []string{"raid_class", "scsi_mod", "scsi_transport_sas"}, PCI: []string{"pci:v00001000d00000097sv*sd*bc*sc*i*"}},
	{File: "sd_mod.ko", Name: "sd_mod", Depends: []string{"scsi_common", "scsi_mod"}},
	{File: "e1000.ko", Name: "e1000", PCI: []string{"pci:v00008086d0000100Esv*sd*bc*sc*i*"}},
	{File: "dca.ko", Name: "dca", Dependency: true},
	{File: "igb.ko", Name: "igb", Depends: []string{"dca"}, PCI: []string{"pci:v00008086d00001533sv*sd*bc*sc*i*"}},
	{File: "virtio_ring.ko", Name: "virtio_ring", Dependency: true},
	{File: "virtio.ko", Name: "virtio", Depends: []string{"virtio_ring"}, Dependency: true},
	{File: "virtio_pci.ko", Name: "virtio_pci", Depends: []string{"virtio", "virtio_ring"}, PCI: []string{"pci:v00001AF4d*sv*sd*bc*sc*i*"}},
	{File: "virtio_net.ko", Name: "virtio_net", Depends: []string{"virtio", "virtio_ring"}},
	{File: "efivarfs.ko", Name: "efivarfs"},
}

func names(modules []Module) []string {
	var out []string
	for _, m := range modules {
		out = append(out, m.Name)
	}
	return out
}

// TestSelect decides, as udev would, what three machines load.
func TestSelect(t *testing.T) {
	// A VM with an AHCI controller and an e1000 (no virtio): ahci and e1000 by their devices;
	// sd_mod, virtio_net and efivarfs, which have no PCI alias, on every machine, and what
	// they need (virtio_net's virtio core, not virtio_pci); scsi_mod, which the skipped
	// mpt3sas needs too, because ahci and sd_mod do; mpt3sas's own raid_class and SAS
	// transport, and igb's dca, skipped with them.
	load, skip := Select(selectOrder, []string{
		"pci:v00008086d000029C0sv00001AF4sd00001100bc06sc00i00", // the host bridge, which no module drives
		"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01",
		"pci:v00008086d0000100Esv00001AF4sd00001100bc02sc00i00",
	})
	assert.Equal(t, []string{"scsi_common", "scsi_mod", "libata", "libahci", "ahci", "sd_mod", "e1000", "virtio_ring", "virtio", "virtio_net", "efivarfs"}, names(load))
	assert.Equal(t, []string{"raid_class", "scsi_transport_sas", "mpt3sas", "dca", "igb", "virtio_pci"}, names(skip))

	// A server with an LSI HBA and an igb, no AHCI: the SAS stack and dca; libata and libahci
	// only ever there for ahci, skipped.
	load, _ = Select(selectOrder, []string{
		"pci:v00001000d00000097sv00001000sd00003090bc01sc07i00",
		"pci:v00008086d00001533sv000015D9sd00001533bc02sc00i00",
	})
	assert.Equal(t, []string{"scsi_common", "scsi_mod", "raid_class", "scsi_transport_sas", "mpt3sas", "sd_mod", "dca", "igb", "virtio_ring", "virtio", "virtio_net", "efivarfs"}, names(load))

	// No PCI device at all: what every machine loads.
	load, skip = Select(selectOrder, nil)
	assert.Equal(t, []string{"scsi_common", "scsi_mod", "sd_mod", "virtio_ring", "virtio", "virtio_net", "efivarfs"}, names(load))
	assert.Len(t, skip, len(selectOrder)-len(load))

	// A PCI driver that a module loading anyway needs is loaded, device or not; a module that
	// is there only as a dependency is not loaded for its own aliases.
	order := []Module{
		{File: "a.ko", Name: "a", PCI: []string{"pci:v0000AAAA*"}},
		{File: "b.ko", Name: "b", PCI: []string{"pci:v0000BBBB*"}, Dependency: true},
		{File: "c.ko", Name: "c", Depends: []string{"a"}},
	}
	load, skip = Select(order, []string{"pci:v0000BBBBd00000001sv00000000sd00000000bc02sc00i00"})
	assert.Equal(t, []string{"a", "c"}, names(load))
	assert.Equal(t, []string{"b"}, names(skip))
}

// writeSysfs makes a sysfs tree under a temporary directory with PCI devices of these
// modaliases, and returns its root.
func writeSysfs(t *testing.T, modaliases ...string) string {
	t.Helper()
	root := t.TempDir()
	devices := filepath.Join(root, "bus", "pci", "devices")
	require.NoError(t, os.MkdirAll(devices, 0o755))
	for i, alias := range modaliases {
		dev := filepath.Join(devices, fmt.Sprintf("0000:00:%02x.0", i))
		require.NoError(t, os.Mkdir(dev, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dev, "modalias"), []byte(alias+"\n"), 0o444))
	}
	return root
}

func TestPCIModaliases(t *testing.T) {
	root := writeSysfs(t, "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00")
	aliases, err := PCIModaliases(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01", "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"}, aliases)

	aliases, err = PCIModaliases(writeSysfs(t))
	require.NoError(t, err)
	assert.Empty(t, aliases, "a machine without PCI devices")

	_, err = PCIModaliases(t.TempDir()) // no bus/pci: sysfs not mounted
	assert.ErrorContains(t, err, "reading the PCI devices")
	assert.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, os.Mkdir(filepath.Join(root, "bus", "pci", "devices", "0000:00:1f.0"), 0o755))
	_, err = PCIModaliases(root)
	assert.ErrorContains(t, err, "0000:00:1f.0", "a device whose modalias cannot be read")
}

// TestLoadModulesReportsWhatItCouldNotLoad: a list that cannot be read loads nothing; a module
// that fails is reported by name and does not stop the rest.
func TestLoadModulesReportsWhatItCouldNotLoad(t *testing.T) {
	dir := t.TempDir()
	sysfs := writeSysfs(t)
	_, err := LoadModules(filepath.Join(dir, "load-order"), sysfs)
	assert.ErrorContains(t, err, "reading the module load order")

	order := filepath.Join(dir, "load-order")
	require.NoError(t, os.WriteFile(order, []byte("a.ko\nsub/b.ko\n"), 0o644))
	_, err = LoadModules(order, sysfs)
	assert.ErrorContains(t, err, "reading "+order+": line 2")

	// Neither file is there, so neither reaches finit_module (the test needs no privileges).
	require.NoError(t, os.WriteFile(order, []byte("# two\nmissing-one.ko\nmissing-two.ko\n"), 0o644))
	res, err := LoadModules(order, sysfs)
	require.NoError(t, err)
	assert.Empty(t, res.Loaded)
	assert.Equal(t, 2, res.Total)
	require.Len(t, res.Failed, 2)
	assert.ErrorIs(t, res.Failed[0], os.ErrNotExist)
	assert.ErrorContains(t, res.Failed[0], "module missing-one.ko: ")
	assert.ErrorContains(t, res.Failed[1], "module missing-two.ko: ")
}

// TestLoadModulesTriesWhatTheDevicesNeed: the modules tried (none is there, so each tried one
// fails) are Select's for the PCI devices in sysfs; every one when sysfs has none to read.
func TestLoadModulesTriesWhatTheDevicesNeed(t *testing.T) {
	dir := t.TempDir()
	order := filepath.Join(dir, "load-order")
	var text strings.Builder
	for _, m := range selectOrder {
		text.WriteString(m.File)
		if len(m.Depends) > 0 {
			text.WriteString(" depends=" + strings.Join(m.Depends, ","))
		}
		if len(m.PCI) > 0 {
			text.WriteString(" pci=" + strings.Join(m.PCI, ","))
		}
		if m.Dependency {
			text.WriteString(" dependency")
		}
		text.WriteString("\n")
	}
	require.NoError(t, os.WriteFile(order, []byte(text.String()), 0o644))
	tried := func(res Loaded) []string {
		var files []string
		for _, err := range res.Failed {
			assert.ErrorIs(t, err, os.ErrNotExist)
			files = append(files, strings.TrimSuffix(strings.Fields(err.Error())[1], ".ko:"))
		}
		return files
	}

	res, err := LoadModules(order, writeSysfs(t, "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"))
	require.NoError(t, err)
	assert.NoError(t, res.PCIErr)
	assert.Equal(t, len(selectOrder), res.Total)
	assert.Equal(t, []string{"scsi_common", "scsi_mod", "sd_mod", "virtio_ring", "virtio", "virtio_pci", "virtio_net", "efivarfs"}, tried(res))
	assert.Equal(t, []string{"libata", "libahci", "ahci", "raid_class", "scsi_transport_sas", "mpt3sas", "e1000", "dca", "igb"}, res.Skipped)

	res, err = LoadModules(order, t.TempDir())
	require.NoError(t, err)
	assert.ErrorContains(t, res.PCIErr, "reading the PCI devices")
	assert.Len(t, tried(res), len(selectOrder), "every module, when the devices are unknown")
	assert.Empty(t, res.Skipped)
}

// TestMountAllGoesOnPastAFailure: every mount is tried and every failure returned. The targets
// cannot be created (their parent is a file), so nothing is mounted, even as root.
func TestMountAllGoesOnPastAFailure(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	err := MountAll([]Mount{
		{"proc", filepath.Join(file, "proc"), "proc", ""},
		{"tmpfs", filepath.Join(file, "run"), "tmpfs", "mode=0755"},
	})
	require.Error(t, err)
	assert.ErrorContains(t, err, "creating "+filepath.Join(file, "proc"))
	assert.ErrorContains(t, err, "creating "+filepath.Join(file, "run"))
	assert.NoError(t, MountAll(nil))
}
