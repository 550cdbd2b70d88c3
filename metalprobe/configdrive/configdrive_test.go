package configdrive

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// userData is 200 KiB of binary data with runs of NUL bytes, a trailing NUL and no newline.
func userData() []byte {
	b := pattern(42, 200<<10)
	copy(b[100:], make([]byte, 300))
	copy(b[4096:], "\x00\x00{\"ignition\":{\"version\":\"3.4.0\"}}\x00")
	b[len(b)-1] = 0
	return b
}

var allNames = []string{
	"/openstack/latest/meta_data.json", "/openstack/latest/user_data",
	"/openstack/2012-08-10/meta_data.json", "/openstack/2012-08-10/user_data",
}

func TestWriteMBR(t *testing.T) {
	path := makeMBR(t, 8*mib, [2]uint32{2048, 8000})
	before := readFile(t, path)
	files := Files{InstanceID: "4f7c9e2a-1b3d-4e5f-8a6b-7c8d9e0f1a2b", Hostname: "node-1", UserData: userData()}

	r, err := Write(path, files)
	require.NoError(t, err)
	// Partition 1 ends at sector 10048; the next 1 MiB boundary is 5 MiB.
	assert.Equal(t, Result{Partition: 2, Start: 5 * mib, Size: mib}, r)
	assert.Zero(t, r.Start%mib)

	after := readFile(t, path)
	assertOnlyChanged(t, before, after, [2]int64{446 + 16, 446 + 32}, [2]int64{r.Start, r.Start + r.Size})
	assert.Equal(t, before[:446+16], after[:446+16], "boot code, disk signature and entry 1 are kept")
	assert.Equal(t, before[446+32:512], after[446+32:512], "entries 3 and 4 and the 55AA signature are kept")

	e := after[446+16 : 446+32]
	assert.Equal(t, byte(0), e[0], "not bootable")
	assert.Equal(t, byte(0x83), e[4], "type Linux")
	assert.Equal(t, uint32(r.Start/512), binary.LittleEndian.Uint32(e[8:12]))
	assert.Equal(t, uint32(r.Size/512), binary.LittleEndian.Uint32(e[12:16]))

	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	table, err := mbr.Read(file.New(f, true), 512, 512)
	require.NoError(t, err)
	p1, p2 := table.Partitions[0], table.Partitions[1]
	assert.Equal(t, []any{true, mbr.Linux, uint32(2048), uint32(8000)}, []any{p1.Bootable, p1.Type, p1.Start, p1.Size})
	assert.Equal(t, r.Start, p2.GetStart())
	assert.Equal(t, r.Size, p2.GetSize())
	assert.Equal(t, mbr.Empty, table.Partitions[2].Type)

	assert.Equal(t, "config-2"+string(bytes.Repeat([]byte{' '}, 24)), string(after[r.Start+0x8028:r.Start+0x8028+32]),
		"volume identifier of the primary volume descriptor")
	checkSfdisk(t, path)
	checkISOTools(t, path, r, allNames)

	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, files.InstanceID, got.InstanceID)
	assert.Equal(t, files.Hostname, got.Hostname)
	assert.True(t, bytes.Equal(files.UserData, got.UserData), "user_data byte for byte")
}

func TestWriteGPTOnLargerDevice(t *testing.T) {
	const dev = 32 << 20
	path := makeGPT(t, 8*mib, dev, 512)
	before := readFile(t, path)

	// The image's GPT is made for 8 MiB: not valid for the 32 MiB device yet.
	{
		f, err := os.Open(path)
		require.NoError(t, err)
		table, err := gpt.Read(file.New(f, true), 512, 512)
		require.NoError(t, err)
		require.Error(t, table.Verify(file.New(f, true), dev), "the test image must start with a misplaced backup GPT")
		f.Close()
	}
	oldPrimary := readGPTHeaderAt(t, before, 512, 1)
	require.Equal(t, uint64(8*mib/512-1), oldPrimary.alt)

	files := Files{InstanceID: "i-1", Hostname: "gpt-node", UserData: userData()}
	r, err := Write(path, files)
	require.NoError(t, err)
	// The root partition ends at LBA 16350 (the 8 MiB image's last usable LBA): next MiB is 8 MiB.
	assert.Equal(t, Result{Partition: 3, Start: 8 * mib, Size: mib}, r)

	after := readFile(t, path)
	sectors := uint64(dev / 512)
	primary := readGPTHeaderAt(t, after, 512, 1)
	backup := readGPTHeaderAt(t, after, 512, sectors-1)
	assert.Equal(t, sectors-1, primary.alt)
	assert.Equal(t, uint64(1), backup.alt)
	assert.Equal(t, sectors-34, primary.lastUsable)
	assert.Equal(t, primary.lastUsable, backup.lastUsable)
	assert.Equal(t, oldPrimary.firstUsable, primary.firstUsable)
	assert.Equal(t, uint64(2), primary.entriesLBA)
	assert.Equal(t, sectors-33, backup.entriesLBA)
	assert.Equal(t, primary.entries, backup.entries)
	assert.Equal(t, oldPrimary.guid, primary.guid, "disk GUID kept")
	assert.Equal(t, diskGUID, guidText(primary.guid))
	assert.Equal(t, oldPrimary.entries[:256], primary.entries[:256], "entries 1 and 2 byte for byte")
	assert.True(t, isZero(primary.entries[384:]), "entries 4-128 still free")

	e := primary.entries[256:384]
	assert.Equal(t, gpt.LinuxFilesystem, gpt.Type(guidText(e[0:16])))
	assert.False(t, isZero(e[16:32]), "unique GUID")
	assert.Equal(t, byte(0x40), e[23]&0xf0, "version 4 GUID")
	assert.Equal(t, uint64(r.Start/512), binary.LittleEndian.Uint64(e[32:40]))
	assert.Equal(t, uint64((r.Start+r.Size)/512-1), binary.LittleEndian.Uint64(e[40:48]))
	assert.Equal(t, Label, gptName(e[56:]))

	// Protective MBR: boot code kept, 0xEE entry now covers the device.
	assert.Equal(t, before[:446], after[:446])
	pm := after[446:462]
	assert.Equal(t, byte(0xee), pm[4])
	assert.Equal(t, uint32(1), binary.LittleEndian.Uint32(pm[8:12]))
	assert.Equal(t, uint32(sectors-1), binary.LittleEndian.Uint32(pm[12:16]))
	assert.Equal(t, before[462:512], after[462:512])

	// The image's stale backup header is gone.
	assert.True(t, isZero(after[8*mib-512:8*mib]), "old backup header zeroed")

	assertOnlyChanged(t, before, after,
		[2]int64{446, 462},                                  // protective entry
		[2]int64{512, 1024}, [2]int64{1024, 1024 + 128*128}, // primary header and entries
		[2]int64{8*mib - 512, 8 * mib}, // stale backup header
		[2]int64{r.Start, r.Start + r.Size},
		[2]int64{int64(sectors-33) * 512, dev}, // backup entries and header
	)

	// go-diskfs reads it back, and finds the backup GPT at the end of the device.
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	table, err := gpt.Read(file.New(f, true), 512, 512)
	require.NoError(t, err)
	assert.False(t, table.RecoveredFromBackup)
	require.NoError(t, table.Verify(file.New(f, true), dev))
	require.Len(t, table.Partitions, 3)
	byIndex := map[int]*gpt.Partition{}
	for _, p := range table.Partitions {
		byIndex[p.Index] = p
	}
	assert.Equal(t, []any{gpt.EFISystemPartition, "EFI-SYSTEM", p1GUID, uint64(1), uint64(2048), uint64(4095)},
		[]any{byIndex[1].Type, byIndex[1].Name, byIndex[1].GUID, byIndex[1].Attributes, byIndex[1].Start, byIndex[1].End})
	assert.Equal(t, []any{gpt.LinuxFilesystem, "root", p2GUID, uint64(1 << 60), uint64(4096), uint64(16350)},
		[]any{byIndex[2].Type, byIndex[2].Name, byIndex[2].GUID, byIndex[2].Attributes, byIndex[2].Start, byIndex[2].End})
	assert.Equal(t, []any{gpt.LinuxFilesystem, Label, r.Start, r.Size},
		[]any{byIndex[3].Type, byIndex[3].Name, byIndex[3].GetStart(), byIndex[3].GetSize()})

	assert.Equal(t, "config-2", string(bytes.TrimRight(after[r.Start+0x8028:r.Start+0x8028+32], " ")))
	checkSgdisk(t, path)
	checkSfdisk(t, path)
	checkISOTools(t, path, r, allNames)

	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, files.InstanceID, got.InstanceID)
	assert.Equal(t, files.Hostname, got.Hostname)
	assert.True(t, bytes.Equal(files.UserData, got.UserData), "user_data byte for byte")
}

func TestISOContent(t *testing.T) {
	path := makeGPT(t, 8*mib, 16*mib, 512)
	files := Files{InstanceID: "5d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d", Hostname: "worker-7.example.com", UserData: userData()}
	r, err := Write(path, files)
	require.NoError(t, err)
	fsys := openISO(t, path, r)

	entries, err := fsys.ReadDir("openstack")
	require.NoError(t, err)
	var dirs []string
	for _, e := range entries {
		dirs = append(dirs, e.Name())
		assert.True(t, e.IsDir())
	}
	sort.Strings(dirs)
	assert.Equal(t, []string{"2012-08-10", "latest"}, dirs, "Rock Ridge names")

	for _, v := range []string{"latest", "2012-08-10"} {
		ud, err := fsys.ReadFile("openstack/" + v + "/user_data")
		require.NoError(t, err)
		assert.True(t, bytes.Equal(files.UserData, ud), "%s/user_data byte for byte", v)

		raw, err := fsys.ReadFile("openstack/" + v + "/meta_data.json")
		require.NoError(t, err)
		var md map[string]any
		require.NoError(t, json.Unmarshal(raw, &md), string(raw))
		assert.Equal(t, map[string]any{
			"uuid": files.InstanceID, "hostname": files.Hostname, "name": files.Hostname,
			"launch_index": float64(0), "availability_zone": "", "files": []any{},
			"public_keys": map[string]any{}, "meta": map[string]any{},
		}, md)
	}
	// The volume is no larger than its PVD says, and the partition past it is zero.
	iso := isoOf(t, path, r)
	n, err := isoVolumeSize(iso)
	require.NoError(t, err)
	assert.Less(t, n, r.Size)
	assert.True(t, isZero(iso[n:]), "partition zeroed past the ISO")
	assert.Equal(t, int64(0), n%2048)
}

// TestMetaServer: meta_data.json's meta.server is the Server's name (cloud-init's
// ds.meta_data.meta.server, a Cluster API node's providerID ironfleet://<server>), and Read
// returns it; without a server, meta stays {}.
func TestMetaServer(t *testing.T) {
	for _, server := range []string{"smc-1.system.2", ""} {
		path := makeMBR(t, 8*mib, [2]uint32{2048, 4096})
		files := Files{InstanceID: "i-4", Hostname: "web-1", Server: server, UserData: []byte("#cloud-config\n")}
		r, err := Write(path, files)
		require.NoError(t, err)
		want := map[string]any{}
		if server != "" {
			want["server"] = server
		}
		fsys := openISO(t, path, r)
		for _, v := range []string{"latest", "2012-08-10"} {
			raw, err := fsys.ReadFile("openstack/" + v + "/meta_data.json")
			require.NoError(t, err)
			var md struct{ Meta map[string]any }
			require.NoError(t, json.Unmarshal(raw, &md), string(raw))
			assert.Equal(t, want, md.Meta, "%s/meta_data.json: %s", v, raw)
		}
		got, err := Read(path)
		require.NoError(t, err)
		assert.Equal(t, files, got, "meta.server round-trips")
	}
}

func TestNoUserData(t *testing.T) {
	path := makeMBR(t, 8*mib, [2]uint32{2048, 4096})
	files := Files{InstanceID: "i-2", Hostname: "bare"}
	r, err := Write(path, files)
	require.NoError(t, err)

	fsys := openISO(t, path, r)
	for _, v := range []string{"latest", "2012-08-10"} {
		entries, err := fsys.ReadDir("openstack/" + v)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		assert.Equal(t, []string{"meta_data.json"}, names)
	}
	checkISOTools(t, path, r, []string{"/openstack/latest/meta_data.json"})

	got, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, files, got)
	assert.Nil(t, got.UserData)
}

func TestEmptyUserData(t *testing.T) {
	path := makeMBR(t, 8*mib, [2]uint32{2048, 4096})
	_, err := Write(path, Files{InstanceID: "i-3", Hostname: "empty", UserData: []byte{}})
	require.NoError(t, err)
	got, err := Read(path)
	require.NoError(t, err)
	require.NotNil(t, got.UserData, "an empty user_data file is not the absence of one")
	assert.Empty(t, got.UserData)
}

// Writing twice reuses the config-2 partition: the table keeps one.
func TestWriteTwiceReplacesInPlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
	}{
		{"mbr", func(t *testing.T) string { return makeMBR(t, 8*mib, [2]uint32{2048, 8000}) }},
		{"gpt", func(t *testing.T) string { return makeGPT(t, 8*mib, 12*mib, 512) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			r1, err := Write(path, Files{InstanceID: "one", Hostname: "h1", UserData: userData()})
			require.NoError(t, err)
			mid := readFile(t, path)
			_, l1 := layoutOf(t, path)

			second := Files{InstanceID: "two", Hostname: "h2", UserData: []byte("#cloud-config\nhostname: h2\n")}
			r2, err := Write(path, second)
			require.NoError(t, err)
			assert.Equal(t, r1, r2)
			after := readFile(t, path)
			// Nothing but the partition's content changed: the table was already right.
			assertOnlyChanged(t, mid, after, [2]int64{r1.Start, r1.Start + r1.Size})

			got, err := Read(path)
			require.NoError(t, err)
			assert.Equal(t, second, got)

			d, l := layoutOf(t, path)
			assert.Equal(t, l1.parts, l.parts, "the same partitions")
			cd, found, err := findConfigDrive(d, l)
			require.NoError(t, err, "one config-2 partition")
			assert.True(t, found)
			assert.Equal(t, r1.Partition, cd.number)
		})
	}
}

func layoutOf(t *testing.T, path string) (*disk, *layout) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	d, err := openDisk(f, path)
	require.NoError(t, err)
	l, err := readLayout(d)
	require.NoError(t, err)
	return d, l
}

func TestErrors(t *testing.T) {
	files := Files{InstanceID: "i", Hostname: "h", UserData: []byte("x")}
	for _, tc := range []struct {
		name string
		path func(t *testing.T) string
		want string
	}{
		{"no partition table", func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "blank.img")
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			require.NoError(t, os.Truncate(p, 8*mib))
			return p
		}, "no partition table on %s: the image is not a partitioned disk image"},
		{"full MBR", func(t *testing.T) string {
			return makeMBR(t, 8*mib, [2]uint32{2048, 2048}, [2]uint32{4096, 2048}, [2]uint32{6144, 2048}, [2]uint32{8192, 2048})
		}, "all 4 primary MBR entries of %s are used"},
		{"MBR without room", func(t *testing.T) string {
			return makeMBR(t, 8*mib, [2]uint32{2048, 16384 - 2048 - 100})
		}, "no room for the config-2 partition on %s: it needs 1048576 bytes from byte 8388608"},
		{"GPT without room before the backup GPT", func(t *testing.T) string {
			// 8.5 MiB: the partition would end at 9 MiB, past the backup entries.
			return makeGPT(t, 8*mib, 8*mib+mib/2, 512)
		}, "no room for the config-2 partition on %s: it needs 1048576 bytes from byte 8388608"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := tc.path(t)
			before := readFile(t, path)
			_, err := Write(path, files)
			require.Error(t, err)
			assert.Contains(t, err.Error(), fmtPath(tc.want, path))
			assert.Equal(t, before, readFile(t, path), "a failed Write leaves the disk alone")
		})
	}

	t.Run("room error names the sizes", func(t *testing.T) {
		path := makeGPT(t, 8*mib, 8*mib+mib/2, 512)
		_, err := Write(path, files)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "leaves only up to byte 8896000") // 8.5 MiB - 33 sectors
		assert.Contains(t, err.Error(), "the device is 8912896 bytes")
	})

	t.Run("Read without a partition table", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "blank.img")
		require.NoError(t, os.WriteFile(p, make([]byte, mib), 0o644))
		_, err := Read(p)
		require.ErrorIs(t, err, ErrNoPartitionTable)
		assert.EqualError(t, err, "no partition table on "+p+": the image is not a partitioned disk image")
	})

	t.Run("Read without a config drive", func(t *testing.T) {
		path := makeMBR(t, 8*mib, [2]uint32{2048, 8000})
		_, err := Read(path)
		assert.EqualError(t, err, "no config-2 partition on "+path)
	})

	t.Run("missing file", func(t *testing.T) {
		_, err := Write(filepath.Join(t.TempDir(), "none"), files)
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})
}

func fmtPath(s, path string) string {
	return string(bytes.Replace([]byte(s), []byte("%s"), []byte(path), 1))
}

func TestPartitionDevice(t *testing.T) {
	for _, tc := range []struct {
		disk string
		n    int
		want string
	}{
		{"vda", 2, "vda2"},
		{"sda", 12, "sda12"},
		{"nvme0n1", 2, "nvme0n1p2"},
		{"mmcblk0", 3, "mmcblk0p3"},
		{"loop7", 1, "loop7p1"},
		{"/dev/sdb", 4, "/dev/sdb4"},
		{"/dev/nvme1n1", 3, "/dev/nvme1n1p3"},
	} {
		assert.Equal(t, tc.want, PartitionDevice(tc.disk, tc.n), "%s %d", tc.disk, tc.n)
	}
}

func TestCHS(t *testing.T) {
	// fdisk's values for LBA 2048 and for the last sector of a 32 MiB disk.
	assert.Equal(t, []byte{32, 33, 0}, chs(2048))
	assert.Equal(t, []byte{20, 16, 4}, chs(65535))
	assert.Equal(t, []byte{254, 255, 255}, chs(1<<40))
}

// The table code works in logical sectors: a GPT made with 4096-byte sectors (which Write
// itself refuses, see TestBlockDevice4KSectors) is extended the same way.
func TestGPT4KSectorsLayout(t *testing.T) {
	const dev = 16 << 20
	path := makeGPT(t, 8*mib, dev, 4096)
	before := readFile(t, path)
	iso, err := buildISO(Files{InstanceID: "4k", Hostname: "4k", UserData: userData()})
	require.NoError(t, err)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	d, err := openDisk(f, path)
	require.NoError(t, err)
	d.ss, d.sectors = 4096, uint64(d.size/4096)

	r, err := writeDisk(d, iso)
	require.NoError(t, err)
	assert.Equal(t, Result{Partition: 3, Start: 8 * mib, Size: mib}, r)

	after := readFile(t, path)
	sectors := uint64(dev / 4096)
	old := readGPTHeaderAt(t, before, 4096, 1)
	primary := readGPTHeaderAt(t, after, 4096, 1)
	backup := readGPTHeaderAt(t, after, 4096, sectors-1)
	assert.Equal(t, sectors-1, primary.alt)
	assert.Equal(t, sectors-6, primary.lastUsable) // 4 sectors of entries, the header, and the last usable one
	assert.Equal(t, sectors-5, backup.entriesLBA)
	assert.Equal(t, primary.entries, backup.entries)
	assert.Equal(t, old.entries[:256], primary.entries[:256])
	e := primary.entries[256:384]
	assert.Equal(t, uint64(r.Start/4096), binary.LittleEndian.Uint64(e[32:40]))
	assert.Equal(t, uint64((r.Start+r.Size)/4096-1), binary.LittleEndian.Uint64(e[40:48]))
	assert.True(t, isZero(after[8*mib-4096:8*mib]), "old backup header zeroed")
	assert.Equal(t, uint32(sectors-1), binary.LittleEndian.Uint32(after[446+12:446+16]), "protective MBR in 4096-byte sectors")

	fsys := openISO(t, path, r)
	ud, err := fsys.ReadFile("openstack/latest/user_data")
	require.NoError(t, err)
	assert.True(t, bytes.Equal(userData(), ud))
}

// A config-2 filesystem the image already has is reused, not duplicated; one too small for
// the new content is an error that leaves the disk alone.
func TestExistingConfigDrive(t *testing.T) {
	old, err := buildISO(Files{InstanceID: "old", Hostname: "old"})
	require.NoError(t, err)

	t.Run("reused", func(t *testing.T) {
		path := makeMBR(t, 8*mib, [2]uint32{2048, 4096}, [2]uint32{8192, 2048})
		writeAtFile(t, path, old, 8192*512)
		before := readFile(t, path)
		files := Files{InstanceID: "new", Hostname: "new", UserData: userData()}
		r, err := Write(path, files)
		require.NoError(t, err)
		assert.Equal(t, Result{Partition: 2, Start: 8192 * 512, Size: mib}, r)
		assertOnlyChanged(t, before, readFile(t, path), [2]int64{r.Start, r.Start + r.Size})
		got, err := Read(path)
		require.NoError(t, err)
		assert.Equal(t, files, got)
	})

	t.Run("too small", func(t *testing.T) {
		path := makeMBR(t, 8*mib, [2]uint32{2048, 4096}, [2]uint32{8192, 100})
		writeAtFile(t, path, old[:100*512], 8192*512)
		before := readFile(t, path)
		_, err := Write(path, Files{InstanceID: "new", Hostname: "new", UserData: userData()})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "config-2 partition 2 of "+path+" is 51200 bytes, too small for the new config drive of")
		assert.Equal(t, before, readFile(t, path))
	})

	t.Run("two", func(t *testing.T) {
		path := makeMBR(t, 8*mib, [2]uint32{2048, 2048}, [2]uint32{4096, 2048})
		writeAtFile(t, path, old, 2048*512)
		writeAtFile(t, path, old, 4096*512)
		_, err := Write(path, Files{InstanceID: "new", Hostname: "new"})
		assert.ErrorContains(t, err, "has 2 config-2 partitions (1, 2)")
		_, err = Read(path)
		assert.ErrorContains(t, err, "has 2 config-2 partitions (1, 2)")
	})
}

// A GPT without a protective MBR (LBA 0 blank) gets one; the boot code area stays blank.
func TestGPTWithoutProtectiveMBR(t *testing.T) {
	path := makeGPT(t, 8*mib, 16*mib, 512)
	writeAtFile(t, path, make([]byte, 512), 0)
	r, err := Write(path, Files{InstanceID: "i", Hostname: "h"})
	require.NoError(t, err)
	assert.Equal(t, 3, r.Partition)
	after := readFile(t, path)
	assert.True(t, isZero(after[:446]))
	assert.Equal(t, []byte{0x55, 0xaa}, after[510:512])
	e := after[446:462]
	assert.Equal(t, byte(0xee), e[4])
	assert.Equal(t, uint32(1), binary.LittleEndian.Uint32(e[8:12]))
	assert.Equal(t, uint32(16*mib/512-1), binary.LittleEndian.Uint32(e[12:16]))
	assert.True(t, isZero(after[462:510]))
	checkSgdisk(t, path)
}
