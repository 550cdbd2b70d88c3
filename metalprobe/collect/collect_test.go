package collect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

// Every test here reads fixture trees only; none looks at the machine it runs on.

var fixedNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func collectRoot(t *testing.T, root string) *report.Report {
	t.Helper()
	rep, err := Collect(context.Background(), Options{Root: root, ProbeVersion: "test", Now: func() time.Time { return fixedNow }})
	require.NoError(t, err)
	return rep
}

func fixtureRoot(t *testing.T, name string) string {
	t.Helper()
	root, err := fixtures.Root(name)
	require.NoError(t, err)
	return root
}

func TestCollectFixtureHostsMatchExpected(t *testing.T) {
	names, err := fixtures.Names()
	require.NoError(t, err)
	require.NotEmpty(t, names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			exp, err := fixtures.LoadExpected(name)
			require.NoError(t, err)
			rep := collectRoot(t, fixtureRoot(t, name))
			for _, d := range exp.Diff(rep) {
				t.Error(d)
			}
			assert.Equal(t, fixedNow, rep.CollectedAt)
			assert.Equal(t, "test", rep.ProbeVersion)
			assert.Equal(t, metalv1alpha1.InventorySourceProbe, rep.Inventory.Source)
			require.NotNil(t, rep.Inventory.ReportedAt)
			assert.True(t, rep.Inventory.ReportedAt.Time.Equal(fixedNow))
			for _, w := range rep.Warnings {
				assert.NotContains(t, w, "\n", "warnings are one line each")
				assert.NotContains(t, w, fixtureRoot(t, name), "warnings name paths relative to the root")
			}
		})
	}
}

func TestCollectDualSocketDetails(t *testing.T) {
	rep := collectRoot(t, fixtureRoot(t, "dual-socket"))
	inv := rep.Inventory
	assert.Empty(t, rep.Warnings)

	require.Len(t, inv.Processors, 2)
	assert.Equal(t, "0", inv.Processors[0].ID)
	assert.Equal(t, "1", inv.Processors[1].ID)
	assert.Equal(t, "CPU", inv.Processors[0].Type)
	assert.EqualValues(t, 16, inv.Processors[1].Cores)
	assert.EqualValues(t, 32, inv.Processors[1].Threads)
	assert.Contains(t, inv.Processors[0].Capabilities, "avx512f")

	// Sizes are binary-SI byte quantities.
	for _, d := range inv.Storage {
		require.NotNil(t, d.Size)
		assert.Equal(t, "BinarySI", string(d.Size.Format), d.Name)
	}
	assert.Equal(t, "256Gi", inv.Memory.Total.String())

	// LLDP neighbours land on the NIC they were heard on, and only there.
	byName := map[string]metalv1alpha1.NetworkInterface{}
	for _, n := range inv.NetworkInterfaces {
		byName[n.Name] = n
	}
	require.NotNil(t, byName["eno1"].LLDP)
	assert.Equal(t, metalv1alpha1.LLDPNeighbor{
		ChassisID:         "44:38:39:00:00:0a",
		SystemName:        "leaf01.dc1.example.net",
		SystemDescription: "Cumulus Linux version 5.4.0 running on Mellanox Technologies Ltd. MSN2700",
		PortID:            "swp12",
		PortDescription:   "rack4-u07 eno1",
		VLANID:            100,
		ManagementAddress: "10.10.0.11",
	}, *byName["eno1"].LLDP)
	require.NotNil(t, byName["ens2f0np0"].LLDP)
	assert.Equal(t, "Ethernet12/1", byName["ens2f0np0"].LLDP.PortID)
	assert.Nil(t, byName["eno2"].LLDP)
	assert.Nil(t, byName["ens2f1np1"].LLDP)

	// PCI names come from the tree's own pci.ids.
	var nvme metalv1alpha1.PCIDevice
	for _, p := range inv.PCIDevices {
		if p.Address == "0000:5e:00.0" {
			nvme = p
		}
	}
	assert.Equal(t, metalv1alpha1.PCIDevice{
		Address: "0000:5e:00.0", VendorID: "144d", Vendor: "Samsung Electronics Co Ltd",
		ProductID: "a80a", Product: "NVMe SSD Controller PM9A1/PM9A3/980PRO",
		Class: "Mass storage controller", Subclass: "Non-Volatile memory controller", Driver: "nvme",
	}, nvme)

	require.NotNil(t, inv.DMI)
	assert.Equal(t, metalv1alpha1.DMI{
		System: metalv1alpha1.DMISystem{Manufacturer: "Dell Inc.", ProductName: "PowerEdge R640", Family: "PowerEdge",
			SerialNumber: "8XK4Q53", SKU: "SKU=0716;ModelName=PowerEdge R640", UUID: "4c4c4544-0058-4b10-8034-b8c04f513533"},
		Baseboard: metalv1alpha1.DMIBoard{Manufacturer: "Dell Inc.", Product: "0H28RR", Version: "A06", SerialNumber: ".8XK4Q53.CNIVC0098B0123."},
		Chassis:   metalv1alpha1.DMIBoard{Manufacturer: "Dell Inc.", SerialNumber: "8XK4Q53", AssetTag: "RACK4-U07"},
		BIOS:      metalv1alpha1.DMIBIOS{Vendor: "Dell Inc.", Version: "2.19.1", Date: "06/20/2023"},
	}, *inv.DMI)
}

func TestCollectWithoutPCIIDsReportsHexCodes(t *testing.T) {
	rep := collectRoot(t, fixtureRoot(t, "storage-1u"))
	var hba metalv1alpha1.PCIDevice
	for _, p := range rep.Inventory.PCIDevices {
		if p.Address == "0000:18:00.0" {
			hba = p
		}
	}
	assert.Equal(t, metalv1alpha1.PCIDevice{Address: "0000:18:00.0", VendorID: "1000", ProductID: "0097",
		Class: "01", Subclass: "07", Driver: "mpt3sas"}, hba)
}

// TestCollectPCIThroughGHWMatchesSysfs runs the PCI collector once through ghw (which can only
// find a pci.ids through $PCIDB_PATH) and once through the probe's own sysfs reader.
func TestCollectPCIThroughGHWMatchesSysfs(t *testing.T) {
	root := fixtureRoot(t, "dual-socket")
	t.Setenv("PCIDB_PATH", filepath.Join(root, "usr", "share", "misc", "pci.ids"))
	c, err := newCollector(Options{Root: root})
	require.NoError(t, err)
	viaGHW, err := c.ghwPCI()
	require.NoError(t, err)
	viaSysfs, err := c.sysfsPCI()
	require.NoError(t, err)
	assert.Len(t, viaGHW, 11)
	assert.Equal(t, viaSysfs, viaGHW)

	// Were pcidb allowed to download, ghw is not used at all.
	t.Setenv("PCIDB_ENABLE_NETWORK_FETCH", "true")
	_, err = c.ghwPCI()
	assert.Error(t, err)
	rep := collectRoot(t, root)
	assert.Len(t, rep.Inventory.PCIDevices, 11)
	assert.Equal(t, "Intel Corporation", rep.Inventory.PCIDevices[0].Vendor)
}

func TestCollectMissingSubsystemIsAWarning(t *testing.T) {
	cases := []struct {
		remove  []string
		warning string
		check   func(t *testing.T, inv metalv1alpha1.Inventory)
	}{
		{[]string{"proc/cpuinfo", "sys/devices/system/cpu"}, "cpu: no processors", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Empty(t, inv.Processors)
		}},
		{[]string{"proc/meminfo"}, "memory: ", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Nil(t, inv.Memory.Total)
		}},
		{[]string{"sys/block"}, "storage: no block devices", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Empty(t, inv.Storage)
			assert.Nil(t, inv.TotalStorage)
		}},
		{[]string{"sys/bus/pci"}, "pci: reading /sys/bus/pci/devices", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Empty(t, inv.PCIDevices)
		}},
		{[]string{"sys/class/net"}, "network: no physical network interfaces", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Empty(t, inv.NetworkInterfaces)
		}},
		{[]string{"sys/class/dmi"}, "dmi: no /sys/class/dmi/id", func(t *testing.T, inv metalv1alpha1.Inventory) {
			assert.Nil(t, inv.DMI)
		}},
		{[]string{"sys/class/dmi/id/product_uuid"}, "dmi: system UUID unreadable", func(t *testing.T, inv metalv1alpha1.Inventory) {
			require.NotNil(t, inv.DMI)
			assert.Equal(t, "QEMU", inv.DMI.System.Manufacturer)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.remove[0], func(t *testing.T) {
			t.Parallel()
			root := copyTree(t, "small-vm")
			for _, p := range tc.remove {
				require.NoError(t, os.RemoveAll(filepath.Join(root, p)))
			}
			rep := collectRoot(t, root)
			assertWarning(t, rep, tc.warning)
			tc.check(t, rep.Inventory)
			// Everything else is still there.
			if !strings.HasPrefix(tc.warning, "cpu") {
				assert.EqualValues(t, 2, rep.Inventory.CPU.Cores)
			}
			if !strings.HasPrefix(tc.warning, "storage") {
				assert.Len(t, rep.Inventory.Storage, 1)
			}
			if !strings.HasPrefix(tc.warning, "network") {
				assert.Len(t, rep.Inventory.NetworkInterfaces, 1)
			}
			if !strings.HasPrefix(tc.warning, "dmi") {
				assert.Equal(t, "5f3c9b7e-2a41-4d8e-9c1b-7e0f4a6d2b31", rep.SystemUUID)
			}
		})
	}
}

func TestCollectEmptyRootIsAllWarnings(t *testing.T) {
	rep := collectRoot(t, t.TempDir())
	assert.Empty(t, rep.Inventory.BootMode, "a root without sysfs is no legacy host")
	for _, prefix := range []string{"cpu: ", "memory: ", "storage: ", "pci: ", "network: ", "dmi: ", "boot: no /sys"} {
		assertWarning(t, rep, prefix)
	}
	assert.Empty(t, rep.SystemUUID)
}

func TestCollectRefusesARootThatIsNotADirectory(t *testing.T) {
	_, err := Collect(context.Background(), Options{Root: filepath.Join(t.TempDir(), "missing")})
	assert.Error(t, err)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	_, err = Collect(context.Background(), Options{Root: file})
	assert.Error(t, err)
}

func TestCollectStopsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Collect(ctx, Options{Root: fixtureRoot(t, "small-vm")})
	require.ErrorIs(t, err, context.Canceled)
}

func TestCollectLLDPProblemsAreWarnings(t *testing.T) {
	root := copyTree(t, "dual-socket")
	lldpFile := filepath.Join(root, LLDPFixture)

	require.NoError(t, os.WriteFile(lldpFile, []byte("lldpctl: cannot connect"), 0o644))
	rep := collectRoot(t, root)
	assertWarning(t, rep, "lldp: parsing lldpctl JSON")
	assert.Len(t, rep.Inventory.NetworkInterfaces, 4)

	require.NoError(t, os.WriteFile(lldpFile, []byte(`{"lldp":{"interface":[
		{"eno1":{"chassis":{"a":{"id":{"value":"aa:aa:aa:aa:aa:01"}}},"port":{"id":{"value":"1"}}}},
		{"eno1":{"chassis":{"b":{"id":{"value":"aa:aa:aa:aa:aa:02"}}},"port":{"id":{"value":"2"}}}},
		{"bond0":{"port":{"id":{"value":"3"}}}}]}}`), 0o644))
	rep = collectRoot(t, root)
	assertWarning(t, rep, "lldp: eno1 hears 2 neighbours; reporting the first (aa:aa:aa:aa:aa:01)")
	assertWarning(t, rep, "lldp: neighbour heard on bond0, which is not a reported NIC")
	assert.Equal(t, "1", rep.Inventory.NetworkInterfaces[0].LLDP.PortID)

	require.NoError(t, os.Remove(lldpFile))
	rep = collectRoot(t, root)
	for _, w := range rep.Warnings {
		assert.NotContains(t, w, "lldp", "a tree without lldpctl.json is silent about LLDP")
	}
	for _, n := range rep.Inventory.NetworkInterfaces {
		assert.Nil(t, n.LLDP)
	}
}

func TestCollectDamagedPCIIDsKeepsTheIDs(t *testing.T) {
	root := copyTree(t, "dual-socket")
	require.NoError(t, os.WriteFile(filepath.Join(root, "usr", "share", "misc", "pci.ids"), []byte("8086  Intel\nC 0\n"), 0o644))
	rep := collectRoot(t, root)
	assertWarning(t, rep, "pci: pci.ids is damaged")
	require.Len(t, rep.Inventory.PCIDevices, 11)
	assert.Equal(t, "8086", rep.Inventory.PCIDevices[0].VendorID)
	assert.Empty(t, rep.Inventory.PCIDevices[0].Vendor)
}

func TestRunStepTurnsAPanicIntoAnError(t *testing.T) {
	err := runStep(context.Background(), func(context.Context, *report.Report) error { panic("index out of range") }, &report.Report{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "panic: index out of range")
}

func TestSpeedAndLinkState(t *testing.T) {
	for in, want := range map[string]int32{"10000": 10000, "25000Mb/s": 25000, "-1": 0, "": 0, "Unknown!": 0} {
		assert.Equal(t, want, speedMbps(in), in)
	}
	for in, want := range map[string]metalv1alpha1.LinkState{
		"up": metalv1alpha1.LinkUp, "down": metalv1alpha1.LinkDown, "lowerlayerdown": metalv1alpha1.LinkDown,
		"unknown": metalv1alpha1.LinkUnknown, "dormant": metalv1alpha1.LinkUnknown, "": metalv1alpha1.LinkUnknown,
	} {
		assert.Equal(t, want, linkState(in), in)
	}
}

func assertWarning(t *testing.T, rep *report.Report, substring string) {
	t.Helper()
	for _, w := range rep.Warnings {
		if strings.Contains(w, substring) {
			return
		}
	}
	t.Errorf("no warning contains %q; warnings: %q", substring, rep.Warnings)
}

// copyTree copies a fixture host's tree into a fresh temporary directory.
func copyTree(t *testing.T, name string) string {
	t.Helper()
	root, err := fixtures.CopyRoot(name, t.TempDir())
	require.NoError(t, err)
	return root
}
