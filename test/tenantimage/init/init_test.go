package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// configDrivePartition writes a config drive with configdrive.Write onto a disk image with one
// partition and returns the new partition's bytes: what /dev/vda2 reads.
func configDrivePartition(t *testing.T, f configdrive.Files) []byte {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "disk.raw")
	mbr := make([]byte, 512)
	copy(mbr[446:], []byte{0x80, 0, 0, 0, 0x0c, 0, 0, 0, 0x00, 0x08, 0, 0, 0x00, 0x08, 0, 0}) // LBA 2048, 2048 sectors
	mbr[510], mbr[511] = 0x55, 0xaa
	require.NoError(t, os.WriteFile(disk, mbr, 0o644))
	require.NoError(t, os.Truncate(disk, 16<<20))
	res, err := configdrive.Write(disk, f)
	require.NoError(t, err)
	require.Equal(t, 2, res.Partition)
	data, err := os.ReadFile(disk)
	require.NoError(t, err)
	return data[res.Start : res.Start+res.Size]
}

func TestISOVolumeID(t *testing.T) {
	part := configDrivePartition(t, configdrive.Files{InstanceID: "i-1", Hostname: "h", UserData: []byte("x")})
	label, ok := isoVolumeID(bytes.NewReader(part))
	require.True(t, ok)
	assert.Equal(t, contract.ConfigDriveLabel, label)

	_, ok = isoVolumeID(bytes.NewReader(make([]byte, 64<<10)))
	assert.False(t, ok, "zeros")
	_, ok = isoVolumeID(bytes.NewReader(make([]byte, 100)))
	assert.False(t, ok, "too short")
}

// TestFindConfigDrive looks through a fake /sys/class/block and /dev: partitions first, the
// one labelled config-2 wins; a device node that is missing or unreadable is passed over.
func TestFindConfigDrive(t *testing.T) {
	root := t.TempDir()
	sys, dev := filepath.Join(root, "sys"), filepath.Join(root, "dev")
	iso := configDrivePartition(t, configdrive.Files{InstanceID: "i-1", Hostname: "h"})
	other := bytes.Clone(iso)
	copy(other[16*2048+40:16*2048+72], []byte("OTHER-ISO                       "))
	devices := map[string]struct {
		partition bool
		data      []byte
	}{
		"vda":   {false, make([]byte, 1<<20)},
		"vda1":  {true, make([]byte, 1<<20)},
		"vda2":  {true, iso},
		"sr0":   {false, other},
		"vdb1":  {true, nil}, // no node
		"loop0": {false, iso},
	}
	for name, d := range devices {
		require.NoError(t, os.MkdirAll(filepath.Join(sys, name), 0o755))
		if d.partition {
			require.NoError(t, os.WriteFile(filepath.Join(sys, name, "partition"), []byte("1\n"), 0o644))
		}
		if d.data != nil {
			require.NoError(t, os.MkdirAll(dev, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dev, name), d.data, 0o644))
		}
	}
	assert.Equal(t, []string{"vda1", "vda2", "vdb1", "sr0", "vda"}, blockDevices(sys))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	name, err := findConfigDrive(ctx, sys, dev)
	require.NoError(t, err)
	assert.Equal(t, "vda2", name)

	require.NoError(t, os.Remove(filepath.Join(dev, "vda2")))
	ctx, cancel = context.WithTimeout(context.Background(), 600*time.Millisecond)
	defer cancel()
	_, err = findConfigDrive(ctx, sys, dev)
	assert.ErrorIs(t, err, errNoConfigDrive, "loop devices are not looked at")
}

func TestReadConfigFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "openstack", "latest")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta_data.json"), []byte(`{"uuid":"i-1"}`), 0o644))
	d, err := readConfigFiles(root)
	require.NoError(t, err)
	assert.Nil(t, d.userData, "no user_data")
	assert.JSONEq(t, `{"uuid":"i-1"}`, string(d.metaData))

	require.NoError(t, os.WriteFile(filepath.Join(dir, "user_data"), nil, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta_data.json"), []byte(`{`), 0o644))
	d, err = readConfigFiles(root)
	require.NoError(t, err)
	assert.NotNil(t, d.userData, "an empty user_data is there")
	assert.Empty(t, d.userData)
	assert.Nil(t, d.metaData)
	assert.Error(t, d.metaDataErr)
}

func TestConsoleWritesWholeLines(t *testing.T) {
	var w writes
	c := &console{w: &w}
	c.logf("loaded %d of %d kernel modules", 3, 4)
	assert.Equal(t, []string{"ironfleet-tenant: loaded 3 of 4 kernel modules\n"}, w.calls)
}

type writes struct{ calls []string }

func (w *writes) Write(p []byte) (int, error) {
	w.calls = append(w.calls, string(p))
	return len(p), nil
}

var _ io.Writer = (*writes)(nil)

// TestMarkDisks marks the whole disks of a fake /sys/class/block and /dev, each across its
// whole size, and leaves partitions, optical drives, loop devices and empty drives alone.
func TestMarkDisks(t *testing.T) {
	root := t.TempDir()
	sys, dev := filepath.Join(root, "sys"), filepath.Join(root, "dev")
	require.NoError(t, os.MkdirAll(dev, 0o755))
	sizes := map[string]int64{"vda": 3 << 20, "vda1": 1 << 20, "nvme0n1": 2<<20 + 8192, "sr0": 1 << 20, "loop0": 1 << 20, "sdb": 0}
	for name, size := range sizes {
		require.NoError(t, os.MkdirAll(filepath.Join(sys, name), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(sys, name, "size"), []byte(fmt.Sprintf("%d\n", size/512)), 0o644))
		if name == "vda1" {
			require.NoError(t, os.WriteFile(filepath.Join(sys, name, "partition"), []byte("1\n"), 0o644))
		}
		f, err := os.Create(filepath.Join(dev, name))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(size))
		require.NoError(t, f.Close())
	}
	marked, err := markDisks(sys, dev)
	require.NoError(t, err)
	assert.Equal(t, []contract.MarkedDisk{
		{Device: "nvme0n1", Bytes: 2<<20 + 8192, Blocks: 3},
		{Device: "vda", Bytes: 3 << 20, Blocks: 4},
	}, marked)
	for _, d := range marked {
		data, err := os.ReadFile(filepath.Join(dev, d.Device))
		require.NoError(t, err)
		offs := contract.MarkOffsets(d.Bytes)
		for _, off := range offs {
			assert.Equal(t, contract.TenantData(off, contract.MarkBlock), data[off:off+contract.MarkBlock], "%s at %d", d.Device, off)
		}
		assert.Equal(t, bytes.Count(data, []byte(contract.TenantDataPrefix)), len(offs)*contract.MarkBlock/contract.TenantDataRecord, "%s: nothing else written", d.Device)
	}
	for _, name := range []string{"vda1", "sr0", "loop0"} {
		data, err := os.ReadFile(filepath.Join(dev, name))
		require.NoError(t, err)
		assert.False(t, bytes.Contains(data, []byte(contract.TenantDataPrefix)), "%s is not marked", name)
	}

	require.NoError(t, os.Remove(filepath.Join(dev, "vda")))
	_, err = markDisks(sys, dev)
	assert.ErrorContains(t, err, "marking vda", "a disk that cannot be written is an error")
}

// TestPostReportReadsTheReply: an answer without a body asks nothing; one with a Reply asks
// for it; a failed answer is retried.
func TestPostReportReadsTheReply(t *testing.T) {
	var answers []func(http.ResponseWriter)
	var got []contract.Report
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var rep contract.Report
		require.NoError(t, json.NewDecoder(r.Body).Decode(&rep))
		got = append(got, rep)
		answers[0](w)
		answers = answers[1:]
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	noLog := func(string, ...any) {}

	answers = []func(http.ResponseWriter){func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }}
	reply, err := postReport(ctx, srv.URL, contract.Report{Kernel: "k"}, noLog)
	require.NoError(t, err)
	assert.Equal(t, contract.Reply{}, reply)

	answers = []func(http.ResponseWriter){
		func(w http.ResponseWriter) { http.Error(w, "not yet", http.StatusServiceUnavailable) },
		func(w http.ResponseWriter) { _, _ = w.Write([]byte(`{"markDisks":true}`)) },
	}
	reply, err = postReport(ctx, srv.URL, contract.Report{Kernel: "k"}, noLog)
	require.NoError(t, err)
	assert.Equal(t, contract.Reply{MarkDisks: true}, reply)
	assert.Len(t, got, 3)
}

func TestFirmwareIsReadFromSysfs(t *testing.T) {
	sys := t.TempDir()
	assert.Equal(t, contract.FirmwareBIOS, firmware(sys), "no firmware/efi")
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "firmware", "efi"), 0o755))
	assert.Equal(t, contract.FirmwareUEFI, firmware(sys), "UEFI, boot_params unreadable")
	params := make([]byte, 4096)
	require.NoError(t, os.MkdirAll(filepath.Join(sys, "kernel", "boot_params"), 0o755))
	write := func() {
		require.NoError(t, os.WriteFile(filepath.Join(sys, "kernel", "boot_params", "data"), params, 0o644))
	}
	params[0x1ec] = 2 // efi_secureboot_mode_disabled
	write()
	assert.Equal(t, contract.FirmwareUEFI, firmware(sys))
	params[0x1ec] = 3 // efi_secureboot_mode_enabled
	write()
	assert.Equal(t, contract.FirmwareUEFISecureBoot, firmware(sys))
}
