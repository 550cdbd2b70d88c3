// Command init is PID 1 of metalprobe's boot image (metalprobe/image builds it in as /init).
// It prepares the bare minimum of a Linux system, brings up the NIC the server booted from,
// fetches the ignition from Ironfleet's boot service and runs /bin/metalprobe on it, reporting
// each stage to the boot service (ignition.Progress) and on the console; once the report is
// delivered it powers the machine off.
//
// The contract with the boot service is in internal/ignition/boot.go: the kernel command line
// carries ironfleet.ignition=<ignition URL> (fetched once; the ignition names the boot URL,
// where progress goes) and BOOTIF=01-<mac>. A boot from the per-boot ISO a BMC
// mounts (virtual media) has neither: the ISO's second initrd puts the ignition and the boot
// URL in the root filesystem (ignition.MediaIgnitionFile, MediaBootURLFile), and the network
// comes from the ignition's static network (or DHCP without one) on the NIC it names.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/metalprobe/earlyboot"
)

// How long each step may take before /init gives up on the boot (and waits to be
// power-cycled). Drivers and DHCP on real servers are slow: link negotiation alone can take
// seconds.
const (
	nicTimeout      = time.Minute
	networkTimeout  = 3 * time.Minute
	ignitionTimeout = 5 * time.Minute
)

// filesystems are what the probe reads (/proc, /sys: ghw, the kernel command line) and writes
// (/run: the ignition, /tmp), and devtmpfs on /dev so the disks have nodes. efivarfs comes
// after the kernel modules (mountEFIVars).
var filesystems = []earlyboot.Mount{
	{Source: "proc", Target: "/proc", FSType: "proc"},
	{Source: "sysfs", Target: "/sys", FSType: "sysfs"},
	{Source: "devtmpfs", Target: "/dev", FSType: "devtmpfs", Data: "mode=0755"},
	{Source: "tmpfs", Target: "/run", FSType: "tmpfs", Data: "mode=0755"},
	{Source: "tmpfs", Target: "/tmp", FSType: "tmpfs", Data: "mode=1777"},
}

// loadOrderFile is where the image builder puts the kernel modules' load order
// (metalprobe/image.LoadOrderFile), next to the modules.
const loadOrderFile = "/lib/modules/load-order"

// sysfsRoot is where sysfs is mounted (filesystems): the PCI devices decide which modules load.
const sysfsRoot = "/sys"

// probeBackoff are the waits between metalprobe attempts: a registry that is briefly down
// (an operator upgrade) gets a minute and a half.
var probeBackoff = []time.Duration{10 * time.Second, 30 * time.Second, time.Minute}

func main() {
	console := io.Writer(os.Stdout) // the kernel opened /dev/console for us
	if err := boot(console); err != nil {
		_, _ = fmt.Fprintf(console, "ironfleet-init: %v\n", err)
	}
	_, _ = fmt.Fprintln(console, "ironfleet-init: waiting for the operator to power-cycle this machine")
	waitForever()
}

// loadModules loads the image's kernel modules that this machine's devices need and logs what
// it could not load, how many it skipped and which it loaded: the image's list is wider than
// any one machine, and built-in drivers may still do.
func loadModules(logf func(format string, args ...any)) {
	res, err := earlyboot.LoadModules(loadOrderFile, sysfsRoot)
	if err != nil {
		logf("%v", err)
		return
	}
	if res.PCIErr != nil {
		logf("%v; loading every module", res.PCIErr)
	}
	for _, err := range res.Failed {
		logf("%v", err)
	}
	logf("%s", modulesSummary(res))
}

// modulesSummary is the console's line on the modules:
// "loaded 14 of 53 kernel modules (39 for hardware this machine does not have): a b ...".
func modulesSummary(res earlyboot.Loaded) string {
	line := fmt.Sprintf("loaded %d of %d kernel modules", len(res.Loaded), res.Total)
	if len(res.Skipped) > 0 {
		line += fmt.Sprintf(" (%d for hardware this machine does not have)", len(res.Skipped))
	}
	if len(res.Loaded) > 0 {
		line += ": " + strings.Join(res.Loaded, " ")
	}
	return line
}

// boot runs the probe boot; it returns only when the probe could not report (after a
// successful report the machine powers off).
func boot(console io.Writer) error {
	start := time.Now()
	ctx := context.Background()
	if err := earlyboot.MountAll(filesystems); err != nil {
		// Carry on: whatever did mount may be enough, and metalprobe says what is missing.
		_, _ = fmt.Fprintf(console, "ironfleet-init: %v\n", err)
	}
	cmdline, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return fmt.Errorf("reading the kernel command line: %w", err)
	}
	src, rep, err := startBoot("/", string(cmdline), console)
	if err != nil {
		return err
	}

	loadModules(rep.logf)
	if err := mountEFIVars("/"); err != nil {
		// Carry on: the probe says the boot mode is unknown, or learns it another way.
		rep.logf("%v", err)
	}
	nic, addr, err := connect(ctx, src, rep.logf)
	if err != nil {
		rep.stage(ctx, ignition.StageFailed, "%v", err)
		return err
	}
	rep.goOnline(ctx)
	rep.stage(ctx, ignition.StageNetworkUp, "%s %s after %s", nic, addr, since(start))

	data, cfg, from := src.data, src.cfg, ", from the boot media"
	if !src.media {
		ignCtx, cancel := context.WithTimeout(ctx, ignitionTimeout)
		data, cfg, err = fetchIgnition(ignCtx, &http.Client{Timeout: 30 * time.Second}, src.ignitionURL, rep.logf)
		cancel()
		from = ""
		if err == nil {
			// The stages held so far go to the boot URL the ignition names.
			rep.setBase(cfg.BootURL)
			rep.goOnline(ctx)
		}
	}
	if err == nil {
		err = writeIgnition(data)
	}
	if err != nil {
		rep.stage(ctx, ignition.StageFailed, "%v", err)
		return err
	}
	rep.stage(ctx, ignition.StageIgnitionFetched, "mode %s, registry %s%s", cfg.Mode, cfg.RegistryURL, from)

	rep.stage(ctx, ignition.StageProbeRunning, "metalprobe %s", strings.Join(probeArgs, " "))
	// After ProbeRunning, so that it stands (False) on the boot configuration until the report
	// is delivered or the probe fails: metalprobe retries delivery by itself, and the operator
	// shows on the Server what keeps it waiting.
	if err := checkRegistry(ctx, cfg.RegistryURL, cfg.RegistryCA); err != nil {
		rep.stage(ctx, ignition.StageRegistryUnreachable, "registry %s is unreachable: %v", cfg.RegistryURL, err)
	}
	attempts := len(probeBackoff) + 1
	err = retryProbe(ctx, func(ctx context.Context) error {
		return runProbe(ctx, metalprobePath, probeArgs, console)
	}, probeBackoff, func(attempt int, err error) {
		// The message carries metalprobe's last stderr lines to the boot service (and on to
		// conditions and events): never the registry token, should a line ever hold it.
		what := fmt.Sprintf("attempt %d of %d", attempt, attempts)
		var reported *reportedFailure
		if errors.As(err, &reported) {
			what = "failed, and reported so"
		}
		rep.stage(ctx, ignition.StageFailed, "%s: %s", what, redactToken(err.Error(), cfg.Token))
	})
	var reported *reportedFailure
	switch {
	case errors.As(err, &reported):
		// The operator has the report: it boots the probe again, or gives up, as it decides.
		rep.stage(ctx, ignition.StageReported, "report of a failed wipe or install delivered %s after /init started", since(start))
	case err != nil:
		return fmt.Errorf("metalprobe failed %d times; giving up", attempts)
	default:
		rep.stage(ctx, ignition.StageReported, "report delivered %s after /init started", since(start))
	}
	rep.logf("powering off")
	if err := powerOff(); err != nil {
		return fmt.Errorf("powering off: %w", err)
	}
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(10 * time.Millisecond) }

// kernelRelease is uname -r, for the console.
func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}
