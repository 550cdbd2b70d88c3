// Command init is PID 1 of the tenant test image (test/tenantimage builds it in as /init): a
// stand-in for a user's operating system, booted from the server's disk by syslinux. It
// mounts /proc, /sys and devtmpfs, loads its kernel modules, prints what it booted, finds the
// OpenStack config drive (the block device whose ISO9660 volume label is config-2), mounts it
// with the kernel's isofs, and prints the user_data's SHA-256. When the user_data asks for it
// (contract.TestConfigKey) it sets a static address on the first NIC with a link (never DHCP)
// and POSTs a contract.Report to the test; when the test's answer asks (contract.Reply), it
// writes the tenant's data across every disk and reports again. Then it idles until the
// machine is powered off.
//
// The console lines and the report are in test/tenantimage/contract.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// How long /init waits for each thing before it says it is not there.
const (
	// configDriveWait bounds the wait for the config drive's block device.
	configDriveWait = 30 * time.Second
	// linkWait bounds the wait for a NIC with a link.
	linkWait = time.Minute
	// reportFor is how long /init retries the report.
	reportFor = 2 * time.Minute
)

func main() {
	c := &console{w: os.Stdout} // the kernel opened /dev/console for PID 1
	if err := run(context.Background(), c); err != nil {
		c.say("%s%v", contract.LineError, err)
	}
	c.say("%s", contract.LineIdle)
	for { // PID 1 must never exit: the kernel would panic
		time.Sleep(time.Hour)
	}
}

// console writes whole lines, each with one write, so the kernel's own console output does not
// land inside one.
type console struct{ w io.Writer }

func (c *console) say(format string, args ...any) {
	_, _ = fmt.Fprintf(c.w, format+"\n", args...)
}

// logf prints a line with the console prefix.
func (c *console) logf(format string, args ...any) {
	c.say(contract.ConsolePrefix+format, args...)
}

// filesystems are /proc (the command line), /sys (the block devices) and devtmpfs on /dev
// (their nodes).
var filesystems = []earlyboot.Mount{
	{Source: "proc", Target: "/proc", FSType: "proc"},
	{Source: "sysfs", Target: "/sys", FSType: "sysfs"},
	{Source: "devtmpfs", Target: "/dev", FSType: "devtmpfs", Data: "mode=0755"},
}

func run(ctx context.Context, c *console) error {
	mountErr := earlyboot.MountAll(filesystems)
	// The kernel logs every driver's probe on the console at the default level; from here on
	// only its errors, so that /init's lines stay whole and easy to find.
	_ = os.WriteFile("/proc/sys/kernel/printk", []byte("4"), 0)
	// Only the modules this VM's devices need (and those for any machine), as the probe does.
	modules, moduleErr := earlyboot.LoadModules("/"+contract.LoadOrderFile, "/sys")

	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return fmt.Errorf("reading the kernel command line: %w", errors.Join(err, mountErr))
	}
	kernel := kernelRelease()
	c.say("%s", contract.BootedLine(kernel, strings.TrimSpace(string(cmdline))))
	if mountErr != nil {
		c.logf("mounts: %v", mountErr)
	}
	if moduleErr != nil {
		c.logf("%v", moduleErr)
	}
	if modules.PCIErr != nil {
		c.logf("%v; loading every module", modules.PCIErr)
	}
	for _, err := range modules.Failed {
		c.logf("%v", err)
	}
	c.logf("loaded %d of %d kernel modules (%d for hardware this machine does not have)", len(modules.Loaded), modules.Total, len(modules.Skipped))

	driveCtx, cancel := context.WithTimeout(ctx, configDriveWait)
	dev, err := findConfigDrive(driveCtx, "/sys/class/block", "/dev")
	cancel()
	if errors.Is(err, errNoConfigDrive) {
		c.say("%s", contract.LineNoConfigDrive)
		return nil
	}
	if err != nil {
		return err
	}
	drive, err := readConfigDrive("/dev/"+dev, "/mnt/config-2")
	if err != nil {
		return fmt.Errorf("reading the config drive %s: %w", dev, err)
	}
	if drive.metaDataErr != nil {
		c.logf("meta_data.json on %s: %v", dev, drive.metaDataErr)
	}
	if drive.userData == nil {
		c.say("%s on %s", contract.LineNoUserData, dev)
		return nil
	}
	c.say("%s", contract.ConfigDriveLine(dev, drive.userData))

	cfg, err := contract.ParseTestConfig(drive.userData)
	if errors.Is(err, contract.ErrNoTestConfig) {
		c.say("%s", contract.LineNoTestConfig)
		return nil
	}
	if err != nil {
		return err
	}
	linkCtx, cancel := context.WithTimeout(ctx, linkWait)
	ifname, err := configureNetwork(linkCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	c.say("%s%s %s", contract.LineNetwork, ifname, cfg.Address)

	report := contract.Report{
		UserData:    drive.userData,
		MetaData:    drive.metaData,
		ConfigDrive: dev,
		Cmdline:     strings.TrimSpace(string(cmdline)),
		Kernel:      kernel,
		Firmware:    firmware("/sys"),
		Interface:   ifname,
		Address:     cfg.Address,
	}
	reportCtx, cancel := context.WithTimeout(ctx, reportFor)
	reply, err := postReport(reportCtx, cfg.ReportURL, report, c.logf)
	cancel()
	if err != nil {
		return err
	}
	c.say("%s", contract.ReportedLine(cfg.ReportURL))
	if !reply.MarkDisks {
		return nil
	}

	// The test asks the tenant to leave its data on the disks, for a wipe to remove.
	if report.Marked, err = markDisks("/sys/class/block", "/dev"); err != nil {
		return err
	}
	for _, d := range report.Marked {
		c.say("%s%s bytes=%d blocks=%d", contract.LineMarked, d.Device, d.Bytes, d.Blocks)
	}
	reportCtx, cancel = context.WithTimeout(ctx, reportFor)
	_, err = postReport(reportCtx, cfg.ReportURL, report, c.logf)
	cancel()
	if err != nil {
		return err
	}
	c.say("%s", contract.ReportedLine(cfg.ReportURL))
	return nil
}

// firmware says how the firmware booted the kernel, from sysfs (mounted at sys): BIOS without
// firmware/efi; else what the x86 EFI stub recorded of Secure Boot in boot_params' secure_boot
// byte (offset 0x1ec; 3 is enabled), which needs no efivarfs.
func firmware(sys string) string {
	if _, err := os.Stat(filepath.Join(sys, "firmware", "efi")); err != nil {
		return contract.FirmwareBIOS
	}
	const secureBootOffset, secureBootEnabled = 0x1ec, 3
	params, err := os.ReadFile(filepath.Join(sys, "kernel", "boot_params", "data"))
	if err == nil && len(params) > secureBootOffset && params[secureBootOffset] == secureBootEnabled {
		return contract.FirmwareUEFISecureBoot
	}
	return contract.FirmwareUEFI
}

// kernelRelease is uname -r.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
