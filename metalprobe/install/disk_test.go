package install

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func gb(n int64) *resource.Quantity { return resource.NewQuantity(n*1_000_000_000, resource.DecimalSI) }

func yes() *bool { b := true; return &b }
func no() *bool  { b := false; return &b }

// inventory is storage-1u-like: two big HDDs, an SSD, a removable stick, and a disk of unknown
// size.
var inventory = []metalv1alpha1.StorageDevice{
	{Name: "sda", Model: "ST8000NM000A", Vendor: "SEAGATE", SerialNumber: "ZA1", WWN: "0x5000c500a1b2c301", Size: gb(8000), Rotational: true, BusPath: "pci-0000:18:00.0-sas-phy0-lun-0"},
	{Name: "sdb", Model: "ST8000NM000A", Vendor: "SEAGATE", SerialNumber: "ZA2", WWN: "0x5000c500a1b2c302", Size: gb(8000), Rotational: true},
	{Name: "nvme0n1", Model: "SAMSUNG MZQL2960HCJR", SerialNumber: "S64", Size: gb(960)},
	{Name: "sdf", Model: "Cruzer", Vendor: "SanDisk", SerialNumber: "4C53", Size: gb(16), Removable: true},
	{Name: "sdg", Model: "Virtual", SerialNumber: "V1"},
}

func TestSelectDiskWithHints(t *testing.T) {
	cases := []struct {
		name  string
		hints metalv1alpha1.RootDeviceHints
		want  string
	}{
		{"device name", metalv1alpha1.RootDeviceHints{DeviceName: "sdb"}, "sdb"},
		{"device path", metalv1alpha1.RootDeviceHints{DeviceName: "/dev/nvme0n1"}, "nvme0n1"},
		{"by-path link", metalv1alpha1.RootDeviceHints{DeviceName: "/dev/disk/by-path/pci-0000:18:00.0-sas-phy0-lun-0"}, "sda"},
		{"serial", metalv1alpha1.RootDeviceHints{SerialNumber: "ZA2"}, "sdb"},
		{"wwn", metalv1alpha1.RootDeviceHints{WWN: "0x5000c500a1b2c301"}, "sda"},
		{"model substring", metalv1alpha1.RootDeviceHints{Model: "MZQL2"}, "nvme0n1"},
		{"vendor and size", metalv1alpha1.RootDeviceHints{Vendor: "SEAG", SerialNumber: "ZA1", MinSizeGigabytes: 8000}, "sda"},
		{"not rotational, of known size", metalv1alpha1.RootDeviceHints{Rotational: no(), MinSizeGigabytes: 1}, "nvme0n1"},
		{"rotational, serial", metalv1alpha1.RootDeviceHints{Rotational: yes(), SerialNumber: "ZA1"}, "sda"},
		{"min size, exact boundary", metalv1alpha1.RootDeviceHints{MinSizeGigabytes: 960, Rotational: no()}, "nvme0n1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := SelectDisk(inventory, &tc.hints, 0)
			require.NoError(t, err)
			assert.Equal(t, tc.want, d.Name)
		})
	}
}

func TestSelectDiskHintFailures(t *testing.T) {
	cases := []struct {
		name   string
		hints  metalv1alpha1.RootDeviceHints
		reason string
		want   []string
	}{
		{"no such serial", metalv1alpha1.RootDeviceHints{SerialNumber: "nope"}, metalv1alpha1.InstallReasonNoMatchingDisk,
			[]string{`sda: serialNumber is "ZA1", not "nope"`, `nvme0n1: serialNumber is "S64", not "nope"`, "sdf: removable", `sdg: serialNumber is "V1", not "nope"`}},
		{"removable only", metalv1alpha1.RootDeviceHints{DeviceName: "sdf"}, metalv1alpha1.InstallReasonNoMatchingDisk,
			[]string{"sdf: removable", `sda: deviceName "sdf" is not /dev/sda`}},
		{"first failed hint", metalv1alpha1.RootDeviceHints{Model: "ST8000", MinSizeGigabytes: 9000}, metalv1alpha1.InstallReasonNoMatchingDisk,
			[]string{`sda: 8000000000000 bytes (8000.0 GB) is under minSizeGigabytes 9000`, `nvme0n1: model "SAMSUNG MZQL2960HCJR" does not contain "ST8000"`}},
		{"just under", metalv1alpha1.RootDeviceHints{MinSizeGigabytes: 961, Rotational: no()}, metalv1alpha1.InstallReasonNoMatchingDisk,
			[]string{"nvme0n1: 960000000000 bytes (960.0 GB) is under minSizeGigabytes 961", "sdg: size unknown, minSizeGigabytes is 961", "sda: rotational is true, not false"}},
		{"several", metalv1alpha1.RootDeviceHints{Model: "ST8000"}, metalv1alpha1.InstallReasonSeveralDisksMatch,
			[]string{"match 2 disks", `sda (serial "ZA1"`, `sdb (serial "ZA2"`}},
		{"rotational", metalv1alpha1.RootDeviceHints{Rotational: yes()}, metalv1alpha1.InstallReasonSeveralDisksMatch,
			[]string{"match 2 disks"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SelectDisk(inventory, &tc.hints, 0)
			var ie *Error
			require.True(t, errors.As(err, &ie), "%v", err)
			assert.Equal(t, tc.reason, ie.Reason)
			for _, w := range tc.want {
				assert.Contains(t, ie.Message, w)
			}
		})
	}
	_, err := SelectDisk(nil, &metalv1alpha1.RootDeviceHints{DeviceName: "sda"}, 0)
	assert.ErrorContains(t, err, "the inventory lists no disk")
}

func TestSelectDiskWithoutHints(t *testing.T) {
	d, err := SelectDisk(inventory, nil, 0)
	require.NoError(t, err)
	assert.Equal(t, "nvme0n1", d.Name, "the smallest non-removable disk of known size")

	d, err = SelectDisk(inventory, &metalv1alpha1.RootDeviceHints{}, 961_000_000_000)
	require.NoError(t, err, "empty hints are no hints")
	assert.Equal(t, "sda", d.Name, "the first of the smallest that hold the image")

	_, err = SelectDisk(inventory, nil, 8001_000_000_000)
	var ie *Error
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, metalv1alpha1.InstallReasonImageTooLarge, ie.Reason)
	assert.Contains(t, ie.Message, "sdg size unknown")

	_, err = SelectDisk(inventory[3:4], nil, 0)
	require.True(t, errors.As(err, &ie))
	assert.Equal(t, metalv1alpha1.InstallReasonNoMatchingDisk, ie.Reason)
	assert.Contains(t, ie.Message, "sdf: removable")
}

func TestProgressGate(t *testing.T) {
	clock := time.Unix(0, 0)
	var calls [][2]int64
	g := &progressGate{fn: func(w, tot int64) { calls = append(calls, [2]int64{w, tot}) }, now: func() time.Time { return clock }, last: clock, nextStep: 1, lastWritten: -1}

	// Known total: every tenth, and not more often.
	const total = 1000
	for w := int64(10); w <= total; w += 10 {
		g.update(w, total, false)
	}
	g.update(total, total, true)
	require.Len(t, calls, 10)
	for i, c := range calls {
		assert.Equal(t, int64(i+1)*100, c[0])
	}

	// Unknown total: only with time, and at the end.
	calls = nil
	g = &progressGate{fn: g.fn, now: g.now, last: clock, nextStep: 1, lastWritten: -1}
	g.update(1, 0, false)
	assert.Empty(t, calls, "too soon")
	clock = clock.Add(ProgressInterval)
	g.update(2, 0, false)
	g.update(3, 0, false)
	assert.Equal(t, [][2]int64{{2, 0}}, calls)
	g.update(4, 0, true)
	assert.Equal(t, [][2]int64{{2, 0}, {4, 0}}, calls, "the end is always reported")

	var nilGate = newProgressGate(nil)
	nilGate.update(1, 1, true) // no callback: nothing to do
}

func TestFormatDetection(t *testing.T) {
	assert.Equal(t, compressionGzip, compressionOf([]byte{0x1f, 0x8b, 8}))
	assert.Equal(t, compressionZstd, compressionOf([]byte{0x28, 0xb5, 0x2f, 0xfd}))
	assert.Equal(t, compressionZstd, compressionOf([]byte{0x50, 0x2a, 0x4d, 0x18}), "pzstd's skippable frame")
	assert.Equal(t, compressionXZ, compressionOf([]byte{0xfd, '7', 'z', 'X', 'Z', 0}))
	assert.Empty(t, compressionOf([]byte{0xeb, 0x63, 0x90}), "an MBR's boot code")
	assert.Empty(t, unsupportedFormat(testImage()[:sniffBytes]))
	assert.Empty(t, unsupportedFormat(nil))
}
