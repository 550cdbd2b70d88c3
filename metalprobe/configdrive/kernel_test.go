//go:build linux

package configdrive

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireRoot skips a test that needs loop devices.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the block device and Linux kernel checks (losetup -P, blkid, mount) need root; CI runs them as root")
	}
	for _, c := range []string{"losetup", "blkid"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is not installed: the block device checks need it", c)
		}
	}
}

// attach attaches an image to a loop device with partition scanning.
func attach(t *testing.T, img string, sectorSize int) string {
	t.Helper()
	args := []string{"-f", "--show", "-P"}
	if sectorSize != 512 {
		args = append(args, "-b", strconv.Itoa(sectorSize))
	}
	out, err := exec.Command("losetup", append(args, img)...).CombinedOutput()
	if err != nil {
		t.Skipf("losetup cannot attach a loop device here: %v: %s", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	return dev
}

// waitPartition waits up to timeout for the kernel's partition n of a loop device.
func waitPartition(dev string, n int, timeout time.Duration) bool {
	base := filepath.Base(dev)
	dir := filepath.Join("/sys/block", base, PartitionDevice(base, n))
	for deadline := time.Now().Add(timeout); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(dir); err == nil {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// kernelParses says whether the kernel found partition 1 of the image attached at dev: some
// kernels (a Firecracker guest's, for one) are built without partition table parsers.
func kernelParses(t *testing.T, dev string) bool {
	t.Helper()
	if waitPartition(dev, 1, time.Second) {
		return true
	}
	uname, _ := exec.Command("uname", "-r").Output()
	t.Logf("the kernel (%s) did not find partition 1 of %s: it has no MSDOS/EFI partition support (CONFIG_MSDOS_PARTITION, CONFIG_EFI_PARTITION)",
		strings.TrimSpace(string(uname)), dev)
	return false
}

// sysPartition returns the start and size of the kernel's partition n, in 512-byte units.
func sysPartition(t *testing.T, dev string, n int) (start, size int64) {
	t.Helper()
	require.True(t, waitPartition(dev, n, 5*time.Second), "the kernel does not see partition %d of %s", n, dev)
	dir := filepath.Join("/sys/block", filepath.Base(dev), PartitionDevice(filepath.Base(dev), n))
	read := func(name string) int64 {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		require.NoError(t, err)
		return v
	}
	return read("start"), read("size")
}

// partitionNode waits for /dev/<loopNpM> (devtmpfs makes it).
func partitionNode(t *testing.T, dev string, n int) string {
	t.Helper()
	node := PartitionDevice(dev, n)
	require.Eventually(t, func() bool { _, err := os.Stat(node); return err == nil }, 5*time.Second, 50*time.Millisecond, "%s did not appear", node)
	return node
}

// checkKernelSees checks what Linux makes of the config drive on partition r.Partition: its
// place, blkid's label and type, and the files through the kernel's iso9660 driver (Rock
// Ridge names) when the kernel has one.
func checkKernelSees(t *testing.T, dev string, r Result, files Files) {
	t.Helper()
	start, size := sysPartition(t, dev, r.Partition)
	assert.Equal(t, r.Start/512, start, "kernel's start of partition %d", r.Partition)
	assert.Equal(t, r.Size/512, size, "kernel's size of partition %d", r.Partition)

	node := partitionNode(t, dev, r.Partition)
	out, err := exec.Command("blkid", "-p", "-o", "export", node).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "\nLABEL=config-2\n", "%s", out)
	assert.Contains(t, string(out), "\nTYPE=iso9660\n", "%s", out)
	out, err = exec.Command("blkid", "-c", "/dev/null", node).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), `LABEL="config-2"`, "%s", out)
	assert.Contains(t, string(out), `TYPE="iso9660"`, "%s", out)

	_ = exec.Command("modprobe", "-q", "isofs").Run()
	fss, _ := os.ReadFile("/proc/filesystems")
	if !bytes.Contains(fss, []byte("\tiso9660\n")) {
		t.Logf("the kernel has no iso9660 filesystem: the mount check is left out")
		return
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "iso9660", "-o", "ro", node, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount %s: %v: %s", node, err, out)
	}
	defer func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	}()
	for _, v := range []string{"latest", "2012-08-10"} {
		ud, err := os.ReadFile(filepath.Join(mnt, "openstack", v, "user_data"))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(files.UserData, ud), "%s/user_data through the kernel, byte for byte", v)
		md, err := os.ReadFile(filepath.Join(mnt, "openstack", v, "meta_data.json"))
		require.NoError(t, err)
		assert.Contains(t, string(md), fmt.Sprintf(`"uuid":%q`, files.InstanceID))
	}
}

// Write and Read on a loop device: the block device path (size by seeking, BLKSSZGET,
// BLKRRPART), then the kernel's own view of the new partition.
func TestBlockDevice(t *testing.T) {
	requireRoot(t)
	const dev = 32 << 20
	img := makeGPT(t, 8*mib, dev, 512)
	loop := attach(t, img, 512)
	parses := kernelParses(t, loop)
	files := Files{InstanceID: "block-1", Hostname: "loop", UserData: userData()}

	r, err := Write(loop, files)
	require.NoError(t, err)
	assert.Equal(t, Result{Partition: 3, Start: 8 * mib, Size: mib}, r)

	after := readFile(t, img)
	sectors := uint64(dev / 512)
	primary := readGPTHeaderAt(t, after, 512, 1)
	backup := readGPTHeaderAt(t, after, 512, sectors-1)
	assert.Equal(t, sectors-1, primary.alt)
	assert.Equal(t, primary.entries, backup.entries)
	assert.Equal(t, "config-2", string(bytes.TrimRight(after[r.Start+0x8028:r.Start+0x8028+32], " ")))
	checkSgdisk(t, loop)

	got, err := Read(loop)
	require.NoError(t, err)
	assert.Equal(t, files, got)

	t.Run("kernel", func(t *testing.T) {
		if !parses {
			t.Skip("the kernel does not parse partition tables: losetup -P shows no partitions to check (see the log above)")
		}
		checkKernelSees(t, loop, r, files)
	})
}

// A 4Kn disk is refused, untouched: Linux's isofs does not mount on 4096-byte sectors.
func TestBlockDevice4KSectors(t *testing.T) {
	requireRoot(t)
	img := makeGPT(t, 8*mib, 16*mib, 4096)
	before := readFile(t, img)
	loop := attach(t, img, 4096)
	_, err := Write(loop, Files{InstanceID: "4kn", Hostname: "4kn", UserData: []byte("x")})
	require.ErrorIs(t, err, ErrSectorSize)
	assert.Contains(t, err.Error(), loop+" has 4096-byte logical sectors")
	assert.Equal(t, before, readFile(t, img))
}

// With a partition of the disk open, BLKRRPART fails with EBUSY; Write then adds its
// partition with BLKPG. (On a kernel without partition parsers, partition 1 is added with
// BLKPG by the test itself.)
func TestBlockDeviceBusy(t *testing.T) {
	requireRoot(t)
	img := makeMBR(t, 8*mib, [2]uint32{2048, 8000})
	loop := attach(t, img, 512)
	if !kernelParses(t, loop) {
		f, err := os.Open(loop)
		require.NoError(t, err)
		require.NoError(t, addPartition(f, 1, 2048*512, 8000*512), "BLKPG_ADD_PARTITION of partition 1")
		f.Close()
	}
	busy, err := os.Open(partitionNode(t, loop, 1))
	require.NoError(t, err)
	defer busy.Close()

	files := Files{InstanceID: "block-busy", Hostname: "busy", UserData: []byte("#cloud-config\n\x00binary")}
	r, err := Write(loop, files)
	require.NoError(t, err)
	assert.Equal(t, Result{Partition: 2, Start: 5 * mib, Size: mib}, r)
	checkKernelSees(t, loop, r, files)
	checkSfdisk(t, loop)
}
