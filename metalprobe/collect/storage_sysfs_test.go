package collect

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/report"
)

// writeTree creates files (path: contents) and symlinks (path: "->target") under root.
func writeTree(t *testing.T, root string, entries map[string]string) {
	t.Helper()
	for rel, content := range entries {
		path := filepath.Join(root, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		if target, ok := strings.CutPrefix(content, "->"); ok {
			require.NoError(t, os.Symlink(target, path))
			continue
		}
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}

// vpdPage80 is a Unit Serial Number VPD page as libata builds it: 20 space-padded bytes.
func vpdPage80(serial string) string {
	body := []byte(serial + "                    ")[:20]
	return string(append([]byte{0, 0x80, 0, byte(len(body))}, body...))
}

// A live probe boot has no udev: serials, models and the SATA controller come from sysfs, laid
// out here as Linux 6.1 lays it out for QEMU's virtio-blk, NVMe and AHCI disks.
func TestStorageWithoutUdevReadsSysfs(t *testing.T) {
	root := t.TempDir()
	const pci = "sys/devices/pci0000:00/"
	ata := pci + "0000:00:04.0/ata1/host0/target0:0:0/0:0:0:0/"
	nvme := pci + "0000:00:06.0/nvme/nvme0/"
	virtio := pci + "0000:00:05.0/virtio2/"
	writeTree(t, root, map[string]string{
		ata + "block/sda/dev":                 "8:0\n",
		ata + "block/sda/size":                "262144\n",
		ata + "block/sda/queue/rotational":    "1\n",
		ata + "block/sda/device":              "->../../../0:0:0:0",
		ata + "vendor":                        "ATA     \n",
		ata + "model":                         "QEMU HARDDISK   \n",
		ata + "vpd_pg80":                      vpdPage80("SATA-SN-03"),
		nvme + "nvme0n1/dev":                  "259:0\n",
		nvme + "nvme0n1/size":                 "196608\n",
		nvme + "nvme0n1/queue/rotational":     "0\n",
		nvme + "nvme0n1/device":               "->../../nvme0",
		nvme + "serial":                       "NVME-SN-02          \n",
		nvme + "model":                        "QEMU NVMe Ctrl                          \n",
		virtio + "block/vda/dev":              "254:0\n",
		virtio + "block/vda/size":             "131072\n",
		virtio + "block/vda/serial":           "VIRTIO-SN-01\n",
		virtio + "block/vda/queue/rotational": "1\n",
		virtio + "block/vda/device":           "->../../../virtio2",
		virtio + "vendor":                     "0x1af4\n",
		"sys/block/sda":                       "->../devices/pci0000:00/0000:00:04.0/ata1/host0/target0:0:0/0:0:0:0/block/sda",
		"sys/block/nvme0n1":                   "->../devices/pci0000:00/0000:00:06.0/nvme/nvme0/nvme0n1",
		"sys/block/vda":                       "->../devices/pci0000:00/0000:00:05.0/virtio2/block/vda",
	})
	c, err := newCollector(Options{Root: root})
	require.NoError(t, err)
	rep := &report.Report{}
	require.NoError(t, c.storage(context.Background(), rep))

	type disk struct{ serial, model, controller string }
	got := map[string]disk{}
	for _, d := range rep.Inventory.Storage {
		got[d.Name] = disk{d.SerialNumber, d.Model, d.Controller}
	}
	assert.Equal(t, map[string]disk{
		"sda":     {"SATA-SN-03", "QEMU HARDDISK", "SATA"},
		"nvme0n1": {"NVME-SN-02", "QEMU NVMe Ctrl", "NVMe"},
		"vda":     {"VIRTIO-SN-01", "", "virtio"},
	}, got)
}

// Where udev has an entry, it stays the source: sysfs is only the fallback.
func TestStorageWithUdevDataKeepsUdev(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{
		"sys/block/vda/dev":    "254:0\n",
		"sys/block/vda/size":   "2048\n",
		"sys/block/vda/serial": "FROM-SYSFS\n",
		"run/udev/data/b254:0": "E:ID_SERIAL=FROM-UDEV\n",
	})
	c, err := newCollector(Options{Root: root})
	require.NoError(t, err)
	rep := &report.Report{}
	require.NoError(t, c.storage(context.Background(), rep))
	require.Len(t, rep.Inventory.Storage, 1)
	assert.Equal(t, "FROM-UDEV", rep.Inventory.Storage[0].SerialNumber)
}

func TestParseVPDSerial(t *testing.T) {
	assert.Equal(t, "SATA-SN-03", parseVPDSerial([]byte(vpdPage80("SATA-SN-03"))))
	assert.Equal(t, "AB", parseVPDSerial([]byte{0, 0x80, 0, 2, 'A', 'B', 'C'}), "the length bounds the serial")
	assert.Equal(t, "", parseVPDSerial([]byte{0, 0x83, 0, 2, 'A', 'B'}), "another page")
	assert.Equal(t, "", parseVPDSerial([]byte{0, 0x80}))
}
