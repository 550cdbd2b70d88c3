package contract

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseTestConfig(t *testing.T) {
	cfg := TestConfig{Address: "10.1.2.3/24", ReportURL: "http://10.1.2.1:8099/report"}
	data, err := UserData(cfg, map[string]any{"ignition": map[string]any{"version": "3.4.0"}}, []byte("\n\x00\xff trailing bytes"))
	require.NoError(t, err)
	got, err := ParseTestConfig(data)
	require.NoError(t, err)
	assert.Equal(t, cfg, got)

	for name, data := range map[string]string{
		"empty":         "",
		"not JSON":      "#cloud-config\nusers: []\n",
		"not an object": `["ironfleetTenantTest"]`,
		"no key":        `{"ignition": {"version": "3.4.0"}}`,
	} {
		_, err := ParseTestConfig([]byte(data))
		assert.ErrorIs(t, err, ErrNoTestConfig, name)
	}
	for name, data := range map[string]string{
		"not an object": `{"ironfleetTenantTest": "10.1.2.3/24"}`,
		"no prefix":     `{"ironfleetTenantTest": {"address": "10.1.2.3", "reportURL": "http://10.1.2.1/"}}`,
		"IPv6":          `{"ironfleetTenantTest": {"address": "fd00::3/64", "reportURL": "http://10.1.2.1/"}}`,
		"no URL":        `{"ironfleetTenantTest": {"address": "10.1.2.3/24"}}`,
		"bad gateway":   `{"ironfleetTenantTest": {"address": "10.1.2.3/24", "reportURL": "http://10.1.2.1/", "gateway": "router"}}`,
	} {
		_, err := ParseTestConfig([]byte(data))
		require.Error(t, err, name)
		assert.NotErrorIs(t, err, ErrNoTestConfig, name)
	}
}

func TestLines(t *testing.T) {
	assert.Equal(t, "ironfleet-tenant: config-drive=vda2 user_data_sha256=ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad bytes=3",
		ConfigDriveLine("vda2", []byte("abc")))
	assert.Equal(t, "ironfleet-tenant: booted kernel=6.1.0-56-amd64 cmdline=BOOT_IMAGE=/vmlinuz x=1",
		BootedLine("6.1.0-56-amd64", "BOOT_IMAGE=/vmlinuz x=1"))
	assert.Equal(t, "ironfleet-tenant: reported to http://10.1.2.1:8099/report", ReportedLine("http://10.1.2.1:8099/report"))
}

// TestReportJSON pins the report's field names: the user_data travels as base64.
func TestReportJSON(t *testing.T) {
	data, err := json.Marshal(Report{UserData: []byte{0, 1, 0xff}, MetaData: json.RawMessage(`{"uuid":"u"}`),
		ConfigDrive: "vda2", Cmdline: "BOOT_IMAGE=/vmlinuz", Kernel: "6.1.0-56-amd64", Firmware: FirmwareUEFISecureBoot, Interface: "eth0", Address: "10.1.2.3/24"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"userData":"AAH/","metaData":{"uuid":"u"},"configDrive":"vda2","cmdline":"BOOT_IMAGE=/vmlinuz",
		"kernel":"6.1.0-56-amd64","firmware":"UEFISecureBoot","interface":"eth0","address":"10.1.2.3/24"}`, string(data))
}

// TestMarkOffsets: a block in every MiB, at a place that moves, the device's first and last
// blocks, none past the end, none twice.
func TestMarkOffsets(t *testing.T) {
	offs := MarkOffsets(1 << 30)
	require.Len(t, offs, 1024+1, "one a MiB and the last block")
	assert.Equal(t, int64(0), offs[0])
	assert.Equal(t, int64(1<<30-MarkBlock), offs[len(offs)-1])
	within := map[int64]bool{}
	for i, off := range offs {
		assert.Zero(t, off%MarkBlock, "block-aligned")
		assert.LessOrEqual(t, off+MarkBlock, int64(1<<30))
		if i > 0 {
			assert.Greater(t, off, offs[i-1], "in order, none twice")
		}
		if i < 1024 {
			assert.Equal(t, int64(i), off/MarkStride, "block %d in its own MiB", i)
			within[off%MarkStride] = true
		}
	}
	assert.Len(t, within, MarkStride/MarkBlock, "every place within a MiB is used")

	assert.Equal(t, []int64{0, 1<<20 + 37*MarkBlock, 3<<20 - 2*MarkBlock - MarkBlock}, MarkOffsets(3<<20-2*MarkBlock), "a last stride that is not whole gets the end block only")
	assert.Equal(t, []int64{0}, MarkOffsets(MarkBlock), "a single block")
	assert.Empty(t, MarkOffsets(MarkBlock-1), "no whole block")
}

func TestTenantData(t *testing.T) {
	data := TenantData(4096, 64)
	assert.Equal(t, "tenant-data@0000000000000004096\ntenant-data@0000000000000004128\n", string(data))
	assert.Len(t, TenantData(1<<40, MarkBlock), MarkBlock)
}
