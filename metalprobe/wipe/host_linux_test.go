//go:build linux && (amd64 || arm64)

package wipe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
)

func TestBlockIoctlNumbers(t *testing.T) {
	// ioc is the encoding x/sys uses for these platforms' block ioctls too.
	assert.EqualValues(t, unix.BLKGETSIZE64, ioc(2, 0x12, 114, 8))
	assert.EqualValues(t, unix.BLKSECDISCARD, ioc(0, 0x12, 125, 0))
	assert.EqualValues(t, unix.BLKFLSBUF, ioc(0, 0x12, 97, 0))
}

// loopDevice attaches a new file of size bytes holding fixtures.DiskPattern to a free loop
// device and returns the device's name (loopN, under /dev) and the backing file. It skips the
// test when loop devices cannot be used here (not root, no /dev/loop-control).
func loopDevice(t *testing.T, size int64) (name, backing string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("attaching a loop device needs root")
	}
	dir := t.TempDir()
	require.NoError(t, fixtures.MakeDiskFiles(dir, []string{"backing"}, size))
	backing = DevicePath(dir, "backing")
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no loop devices here: %v", err)
	}
	defer func() { _ = ctl.Close() }()
	back, err := os.OpenFile(backing, os.O_RDWR, 0)
	require.NoError(t, err)
	defer func() { _ = back.Close() }()
	for range 5 { // another process may take the free device first
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			t.Skipf("LOOP_CTL_GET_FREE: %v", err)
		}
		name = fmt.Sprintf("loop%d", n)
		dev, err := os.OpenFile("/dev/"+name, os.O_RDWR, 0)
		if err != nil {
			t.Skipf("opening /dev/%s: %v", name, err)
		}
		err = unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_SET_FD, int(back.Fd()))
		if errors.Is(err, unix.EBUSY) {
			_ = dev.Close()
			continue
		}
		if err != nil {
			_ = dev.Close()
			t.Skipf("LOOP_SET_FD on /dev/%s: %v", name, err)
		}
		t.Cleanup(func() {
			assert.NoError(t, unix.IoctlSetInt(int(dev.Fd()), unix.LOOP_CLR_FD, 0), "detaching /dev/%s", name)
			_ = dev.Close()
		})
		return name, backing
	}
	t.Skip("no free loop device after 5 tries")
	return "", ""
}

func TestHostEraserOnALoopDeviceFailsWithoutWriting(t *testing.T) {
	const size = 4 * mib
	name, backing := loopDevice(t, size)
	rep := Wipe(context.Background(), []metalv1alpha1.StorageDevice{{Name: name, SerialNumber: "LOOP"}},
		Options{Policy: metalv1alpha1.WipeSecure, Eraser: HostEraser{}})
	require.Len(t, rep.Disks, 1)
	d := rep.Disks[0]
	assert.Equal(t, MethodNone, d.Method)
	assert.False(t, d.Succeeded)
	assert.Equal(t, "not wiped: "+name+": no device-level secure erase: not NVMe; BLKSECDISCARD: operation not supported", d.Message)
	checkBytes(t, backing, size, nil)
}

// blockZeroer "erases" a block device by writing zeros through the page cache and syncing, then
// reads it back so that the page cache holds the zeros.
type blockZeroer struct{ after func() }

func (z blockZeroer) SecureErase(_ context.Context, dev string, _ metalv1alpha1.StorageDevice) (string, error) {
	f, err := os.OpenFile(dev, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
		return "", err
	}
	if err := f.Sync(); err != nil {
		return "", err
	}
	if _, err := f.ReadAt(make([]byte, size), 0); err != nil {
		return "", err
	}
	z.after()
	return "zeros through the page cache", nil
}

func TestReadBackReachesTheDeviceNotThePageCache(t *testing.T) {
	const size = 4 * mib
	const poked = 3*mib + 12345
	name, backing := loopDevice(t, size)
	dev := filepath.Join("/dev", name)
	var stale bool
	eraser := blockZeroer{after: func() {
		// Change the medium behind the device's page cache, which still holds zeros there.
		f, err := os.OpenFile(backing, os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt([]byte{0xee}, poked)
		require.NoError(t, err)
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		cached, err := os.Open(dev)
		require.NoError(t, err)
		b := make([]byte, 1)
		_, err = cached.ReadAt(b, poked)
		require.NoError(t, err)
		require.NoError(t, cached.Close())
		stale = b[0] == 0
	}}
	rep := Wipe(context.Background(), []metalv1alpha1.StorageDevice{{Name: name}}, Options{Policy: metalv1alpha1.WipeSecure, Eraser: eraser})
	require.Len(t, rep.Disks, 1)
	d := rep.Disks[0]
	assert.Equal(t, MethodSecure, d.Method)
	assert.False(t, d.Succeeded)
	assert.Equal(t, fmt.Sprintf("%s: zeros through the page cache; failed verification: read back non-zero data at offset %d", name, poked), d.Message)
	if stale {
		t.Logf("a plain read of %s still saw the cached zero at %d; the read-back saw the medium", dev, poked)
	} else {
		t.Logf("the page cache had already let go of offset %d: this run did not prove the cache drop", poked)
	}

	// Once the medium is zero too, the same erase passes.
	eraser.after = func() {}
	rep = Wipe(context.Background(), []metalv1alpha1.StorageDevice{{Name: name}}, Options{Policy: metalv1alpha1.WipeSecure, Eraser: eraser})
	assert.True(t, rep.Disks[0].Succeeded, rep.Disks[0].Message)
	assert.Equal(t, fmt.Sprintf("zeros through the page cache; read back all %d bytes: zeros", size), rep.Disks[0].Message)
}
