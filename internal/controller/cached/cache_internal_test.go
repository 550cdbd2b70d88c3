package cached

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// The cache's Server keeps what the reconcilers read of the inventory, and nothing else of it.
func TestCachedServersKeepTheInventoryTheReconcilersRead(t *testing.T) {
	now := metav1.Now()
	total := resource.MustParse("64Gi")
	inv := &metalv1alpha1.Inventory{
		Source: "Probe", ReportedAt: &now, CollectorVersion: "0.1.0", Warnings: []string{"pci: unreadable"},
		CPU: metalv1alpha1.CPUSummary{Cores: 16}, Processors: []metalv1alpha1.Processor{{ID: "CPU0"}},
		Memory: metalv1alpha1.MemorySummary{Total: &total}, MemoryModules: []metalv1alpha1.MemoryModule{{Locator: "DIMM0"}},
		TotalStorage: &total, Storage: []metalv1alpha1.StorageDevice{{Name: "nvme0n1", Size: &total, Type: "NVMe", Removable: true,
			Model: "SAMSUNG MZQL23T8HCLS", Vendor: "Samsung", SerialNumber: "S64H", WWN: "eui.3634", Controller: "NVMe", BusPath: "pci-0000:5e:00.0-nvme-1"}},
		NetworkInterfaces: []metalv1alpha1.NetworkInterface{{Name: "eno1", MACAddress: "02:00:00:00:00:01", SpeedMbps: 10000, Link: "Up", PCIAddress: "0000:18:00.0",
			IPAddresses: []string{"10.0.0.5/24"}, Driver: "i40e", LLDP: &metalv1alpha1.LLDPNeighbor{SystemName: "leaf01", PortID: "swp12"}}},
		PCIDevices: []metalv1alpha1.PCIDevice{{Address: "0000:00:01.0"}}, DMI: &metalv1alpha1.DMI{System: metalv1alpha1.DMISystem{Manufacturer: "QEMU"}, BIOS: metalv1alpha1.DMIBIOS{Vendor: "SeaBIOS", Version: "2.0.0", Date: "04/01/2014"}},
	}
	s := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
		Status: metalv1alpha1.ServerStatus{Inventory: inv.DeepCopy()}}

	var transform func(any) (any, error)
	for obj, by := range Options().ByObject {
		if _, ok := obj.(*metalv1alpha1.Server); ok {
			transform = by.Transform
		}
	}
	require.NotNil(t, transform, "Servers have a transform of their own")
	out, err := transform(s)
	require.NoError(t, err)
	got := out.(*metalv1alpha1.Server)
	assert.Nil(t, got.ManagedFields, "no managedFields, as every other kind")

	want := inv.DeepCopy()
	want.CollectorVersion, want.Warnings, want.Processors, want.MemoryModules, want.PCIDevices = "", nil, nil, nil, nil
	want.DMI = &metalv1alpha1.DMI{BIOS: inv.DMI.BIOS} // the host's own BIOS version verifies firmware updates
	want.NetworkInterfaces[0].LLDP, want.NetworkInterfaces[0].Driver, want.NetworkInterfaces[0].PCIAddress = nil, "", ""
	want.Storage[0] = metalv1alpha1.StorageDevice{Name: "nvme0n1", Size: &total, Type: "NVMe", Removable: true,
		SerialNumber: "S64H", WWN: "eui.3634", BusPath: "pci-0000:5e:00.0-nvme-1"}
	assert.Equal(t, want, got.Status.Inventory)

	empty := &metalv1alpha1.Server{}
	compactInventory(empty)
	assert.Nil(t, empty.Status.Inventory, "no inventory stays none")
}
