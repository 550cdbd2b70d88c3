package hwrecord

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func disk(name, serial string, size int64) m.StorageDevice {
	return m.StorageDevice{Name: name, SerialNumber: serial, Size: resource.NewQuantity(size, resource.BinarySI)}
}

func inventory(disks []m.StorageDevice, macs ...string) *m.Inventory {
	inv := &m.Inventory{Storage: disks}
	for _, mac := range macs {
		inv.NetworkInterfaces = append(inv.NetworkInterfaces, m.NetworkInterface{MACAddress: mac})
	}
	return inv
}

func TestDiffNamesEachDifference(t *testing.T) {
	record := inventory([]m.StorageDevice{disk("sda", "A", 1<<40), disk("sdb", "B", 1<<40), disk("sdc", "C", 16<<30)},
		"ac:1f:6b:2d:4e:80", "ac:1f:6b:2d:4e:81")

	// Kernel names may change between boots; serials say which disk is which. The probe's own
	// virtual CD comes and goes. MACs are compared however they are written.
	same := inventory([]m.StorageDevice{disk("sdb", "A", 1<<40), disk("sda", "B", 1<<40), disk("sdc", "C", 16<<30), disk("sr0", "", 600<<20)},
		"AC:1F:6B:2D:4E:81", "ac:1f:6b:2d:4e:80")
	assert.Empty(t, Diff(record, same))

	assert.Equal(t, []string{"disk sda (serial A, 1.0 TiB) missing", "disk sdb (serial B, 1.0 TiB) missing", "disk sdc (serial C, 16.0 GiB) missing"},
		Diff(record, inventory(nil, "ac:1f:6b:2d:4e:80", "ac:1f:6b:2d:4e:81")))

	changed := inventory([]m.StorageDevice{disk("sda", "A", 1<<40), disk("sdb", "B", 1<<30), disk("sdd", "D", 16<<30)},
		"ac:1f:6b:2d:4e:80", "52:54:00:66:66:66")
	assert.Equal(t, []string{
		"disk sdb (serial B, 1.0 TiB) is now 1.0 GiB (reported as sdb)",
		"disk sdc (serial C, 16.0 GiB) missing",
		"disk sdd (serial D, 16.0 GiB) added",
		"NIC ac:1f:6b:2d:4e:81 missing",
		"NIC 52:54:00:66:66:66 added",
	}, Diff(record, changed))

	// A card put into an empty reader changes the reader's size: the record did not have it.
	reader := inventory([]m.StorageDevice{{Name: "sdg", BusPath: "pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0"}})
	withCard := inventory([]m.StorageDevice{{Name: "sdg", BusPath: "pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0", Size: resource.NewQuantity(32<<30, resource.BinarySI)}})
	assert.Equal(t, []string{"disk sdg (path pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0, no medium) is now 32.0 GiB (reported as sdg)"}, Diff(reader, withCard))
}

func TestSummaryCountsWhatItDoesNotName(t *testing.T) {
	var diffs []string
	for range MaxDifferences + 3 {
		diffs = append(diffs, "x")
	}
	assert.Contains(t, Summary(diffs), "; and 3 more")
	assert.Equal(t, "a; b", Summary([]string{"a", "b"}))
}

func TestNoDataOn(t *testing.T) {
	assert.Equal(t, "optical drive", m.NoDataOn(disk("sr0", "", 600<<20)))
	assert.Equal(t, "no medium", m.NoDataOn(m.StorageDevice{Name: "sdg", Removable: true}))
	usb := disk("sdf", "4C53", 14<<30)
	usb.Removable = true
	assert.Empty(t, m.NoDataOn(usb), "a removable device with a medium is a disk like the others")
}
