package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// bootSource is where this boot's configuration comes from: the kernel command line of a
// network (PXE) boot, or the files the boot media's second initrd put in the root filesystem
// (ignition.MediaIgnitionFile and MediaBootURLFile) on a virtual-media boot.
type bootSource struct {
	bootArgs
	// media is a boot from the boot media: the ignition is in the root filesystem, the boot
	// URL too, and the network comes from the ignition (DHCP without a network in it).
	media bool
	// data and cfg are the media's ignition, as read and parsed (startBoot fills them).
	data []byte
	cfg  ignition.Config
}

// readBootSource decides where the boot's configuration comes from. When root holds
// ignition.MediaIgnitionFile the boot is from the media: the boot URL is MediaBootURLFile's,
// the command line's ironfleet.boot is not needed (nor read), and BOOTIF, optional, still
// names the NIC should a boot loader put one there. Otherwise the command line must carry
// ironfleet.boot, as for every network boot. The media flag is set even when an error is
// returned.
func readBootSource(root, cmdline string) (bootSource, error) {
	_, err := os.Stat(filepath.Join(root, ignition.MediaIgnitionFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		args, err := parseCmdline(cmdline)
		return bootSource{bootArgs: args}, err
	case err != nil:
		return bootSource{media: true}, fmt.Errorf("the boot media's ignition: %w", err)
	}
	src := bootSource{media: true}
	args, err := scanCmdline(cmdline)
	if err != nil {
		return src, err
	}
	src.bootIf = args.bootIf
	raw, err := readSmallFile(filepath.Join(root, ignition.MediaBootURLFile), 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return src, fmt.Errorf("the boot media has %s but no %s: no boot URL to report to", ignition.MediaIgnitionFile, ignition.MediaBootURLFile)
	}
	if err != nil {
		return src, fmt.Errorf("reading the boot media's boot URL: %w", err)
	}
	base := strings.TrimSuffix(strings.TrimSpace(string(raw)), "/")
	if base == "" {
		return src, fmt.Errorf("the boot media's %s is empty", ignition.MediaBootURLFile)
	}
	// The same check as the command line's ironfleet.boot, and as careful with the token.
	if err := ignition.CheckURL(base); err != nil || strings.ContainsAny(base, " \t\r\n") {
		return src, fmt.Errorf("the boot media's %s: %s is not an http(s) URL with a host", ignition.MediaBootURLFile, redactedURL(base))
	}
	src.base = base
	return src, nil
}

// readMediaIgnition reads and parses the media's ignition. The errors name the file, never
// the token.
func readMediaIgnition(root string) ([]byte, ignition.Config, error) {
	data, err := readSmallFile(filepath.Join(root, ignition.MediaIgnitionFile), ignition.MaxIgnitionBytes)
	if err != nil {
		return nil, ignition.Config{}, fmt.Errorf("the boot media's ignition %s: %w", ignition.MediaIgnitionFile, err)
	}
	cfg, err := ignition.Parse(data)
	if err != nil {
		return nil, ignition.Config{}, fmt.Errorf("the boot media's ignition %s: %w", ignition.MediaIgnitionFile, err)
	}
	return data, cfg, nil
}

// readSmallFile reads a file of at most max bytes.
func readSmallFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("larger than %d bytes", max)
	}
	return data, nil
}

// startBoot reads the boot source (root is the root filesystem, cmdline /proc/cmdline's
// contents), prints ignition.MediaConsoleLine for a boot from the media, and reports
// InitStarted; for a boot from the media it then parses the ignition, reporting Failed when
// it is malformed. Before the boot URL is known failures go to the console only.
func startBoot(root, cmdline string, console io.Writer) (bootSource, *reporter, error) {
	ctx := context.Background()
	src, err := readBootSource(root, cmdline)
	if src.media {
		_, _ = fmt.Fprintln(console, ignition.MediaConsoleLine)
	}
	if err != nil {
		// Without a boot URL there is no one to report to but the console.
		_, _ = fmt.Fprintln(console, ignition.Progress{Stage: ignition.StageFailed, Message: err.Error()}.ConsoleLine())
		return src, nil, err
	}
	rep := newReporter(src.base, console)
	from := ""
	if src.media {
		from = ", ignition from the boot media"
	}
	service := src.ignitionURL
	if src.media {
		service = redactedURL(src.base)
	}
	rep.stage(ctx, ignition.StageInitStarted, "kernel %s, boot service %s%s", kernelRelease(), service, from)
	if src.media {
		if src.data, src.cfg, err = readMediaIgnition(root); err != nil {
			// Held until a network is up, which without an ignition it never is: the console
			// (the BMC's, the lab's) is where this is read.
			rep.stage(ctx, ignition.StageFailed, "%v", err)
			return src, rep, err
		}
	}
	return src, rep, nil
}

// connect brings the network up as the boot source says and returns the NIC's name and what
// it got, for NetworkUp: "static <address> on <link> via <gateway>" or the DHCP lease's
// address.
func connect(ctx context.Context, src bootSource, log func(string, ...any)) (nic, addr string, err error) {
	if !src.media {
		// A network boot: the NIC named by BOOTIF (or the first Ethernet NIC), DHCP, as the
		// boot service's iPXE did. The ignition is not fetched yet; a static network in it is
		// ignored, the lease being what the host is reachable at already.
		nicCtx, cancel := context.WithTimeout(ctx, nicTimeout)
		nic, err = waitForNIC(nicCtx, src.bootIf)
		cancel()
		if err != nil {
			return "", "", err
		}
		netCtx, cancel := context.WithTimeout(ctx, networkTimeout)
		defer cancel()
		addr, err = bringUpNetwork(netCtx, nic, log)
		return nic, addr, err
	}
	// A boot from the media: network.interfaceMAC (else BOOTIF) names the NIC; without either,
	// the first NIC that gets a link is taken.
	network := src.cfg.Network
	mac, err := parseNetworkMAC(network)
	if err != nil {
		return "", "", err
	}
	if mac == nil {
		mac = src.bootIf
	}
	nicCtx, cancel := context.WithTimeout(ctx, nicTimeout)
	_, err = waitForNIC(nicCtx, mac)
	cancel()
	if err != nil {
		return "", "", err
	}
	netCtx, cancel := context.WithTimeout(ctx, networkTimeout)
	defer cancel()
	link, err := waitForLink(netCtx, mac)
	if err != nil {
		return "", "", err
	}
	nic = link.Attrs().Name
	if network == nil {
		addr, err = bringUpNetwork(netCtx, nic, log)
		return nic, addr, err
	}
	// No DHCP here, not even a first packet: the site has none, or one that must not answer.
	_, addr, err = configureStatic(link, network)
	return nic, addr, err
}
