package install

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/metalprobe/configdrive"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// beforeVerify, when set (by tests), runs between the write and the read-back.
var beforeVerify func(dev string)

// run does the install; finish turns its error into the report.
func (in *installer) run(ctx context.Context) error {
	spec := in.opts.Install
	if err := ctx.Err(); err != nil {
		return newError(metalv1alpha1.InstallReasonInstallInterrupted, "not started: %v", err)
	}
	if n := len(in.opts.UserData); n > metalv1alpha1.MaxUserDataBytes {
		return newError(metalv1alpha1.InstallReasonConfigDriveFailed, "the user data is %d bytes, more than %d", n, metalv1alpha1.MaxUserDataBytes)
	}
	src, err := openSource(ctx, in.opts.HTTPClient, spec.Image, spec.ImageChecksum)
	if err != nil {
		return err
	}
	defer src.Close()
	in.logf("reading %s", src.desc)
	img, err := openImage(ctx, src)
	if err != nil {
		return err
	}
	defer img.Close()
	if img.compression != "" {
		in.logf("the image is %s-compressed (%s served)", img.compression, sizeText(src.size))
	} else {
		in.logf("the image is uncompressed (%s)", sizeText(img.rawSize))
	}

	disk, err := SelectDisk(in.opts.Disks, spec.RootDeviceHints, max(img.rawSize, 0))
	if err != nil {
		return err
	}
	in.disk = disk
	in.rep.Disk, in.rep.DiskSerial = disk.Name, disk.SerialNumber
	if !plainName(disk.Name) {
		return newError(metalv1alpha1.InstallReasonWriteFailed, "%q is not a kernel device name", disk.Name)
	}
	dev := wipe.DevicePath(in.opts.Root, disk.Name)

	w := &writer{in: in, dev: dev, progress: newProgressGate(in.opts.Progress)}
	sum, err := w.write(ctx, img, src)
	in.rep.Bytes = w.written
	in.rep.ServedDigest = src.digest()
	if err != nil {
		return err
	}
	in.logf("wrote %d bytes; image digest %s", w.written, in.rep.ServedDigest)
	if err := src.check(); err != nil {
		return err
	}

	if beforeVerify != nil {
		beforeVerify(dev)
	}
	readBack, err := w.verify(ctx)
	in.rep.WrittenDigest = readBack
	if err != nil {
		return err
	}
	if readBack != sum {
		return newError(metalv1alpha1.InstallReasonVerifyFailed, "%s read back as %s, but %s was written", disk.Name, readBack, sum)
	}
	in.logf("read back %d bytes: %s", w.written, readBack)

	return in.writeConfigDrive(ctx, dev, w)
}

// writeConfigDrive adds the config drive after the image's partitions and reads it back.
func (in *installer) writeConfigDrive(ctx context.Context, dev string, w *writer) error {
	if err := ctx.Err(); err != nil {
		return newError(metalv1alpha1.InstallReasonInstallInterrupted, "interrupted before the config drive: %v", err)
	}
	spec := in.opts.Install
	files := configdrive.Files{InstanceID: spec.InstanceID, Hostname: spec.Hostname, Server: spec.Server, UserData: in.opts.UserData}
	res, err := configdrive.Write(dev, files)
	if err != nil {
		return newError(metalv1alpha1.InstallReasonConfigDriveFailed, "writing the config drive to %s: %v", in.disk.Name, err)
	}
	in.rep.ConfigDrive = configdrive.PartitionDevice(in.disk.Name, res.Partition)
	in.logf("config drive on %s (%d bytes at byte %d)", in.rep.ConfigDrive, res.Size, res.Start)
	// configdrive.Write fsyncs; read back through the device with its cache dropped, as for the
	// image, so that what is checked is what the disk holds.
	if err := w.syncAndDrop(); err != nil {
		return newError(metalv1alpha1.InstallReasonConfigDriveFailed, "syncing %s after the config drive: %v", in.disk.Name, err)
	}
	got, err := configdrive.Read(dev)
	if err != nil {
		return newError(metalv1alpha1.InstallReasonConfigDriveFailed, "reading the config drive back from %s: %v", in.rep.ConfigDrive, err)
	}
	if !bytes.Equal(got.UserData, files.UserData) {
		return newError(metalv1alpha1.InstallReasonConfigDriveFailed, "the config drive on %s does not read back as written (user data %d bytes, want %d)", in.rep.ConfigDrive, len(got.UserData), len(files.UserData))
	}
	return nil
}

// plainName accepts a kernel device name: not empty, not "." or "..", no path separator.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && !strings.ContainsRune(name, 0)
}

func sizeText(n int64) string {
	if n < 0 {
		return "size unknown"
	}
	return fmt.Sprintf("%d bytes", n)
}
