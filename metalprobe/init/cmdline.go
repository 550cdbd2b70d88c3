package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// bootArgs are what the boot service put on the kernel command line, and the boot URL.
type bootArgs struct {
	// ignitionURL is where a network boot fetches its ignition, once
	// (ignition.KernelArgIgnition): no secret.
	ignitionURL string
	// base is the boot URL, http://<host>:<port>/boot/<token>, where progress is reported: from
	// the fetched ignition (Config.BootURL), or from the boot media. It holds a secret (the boot
	// token), so it is only ever printed through redactedURL.
	base string
	// bootIf is the MAC of the NIC the server booted from; nil when the line has no BOOTIF.
	bootIf net.HardwareAddr
}

// parseCmdline reads ironfleet.ignition and BOOTIF from /proc/cmdline's contents. The kernel
// passes its command line through unquoted words; the boot service's values have no spaces.
func parseCmdline(cmdline string) (bootArgs, error) {
	args, err := scanCmdline(cmdline)
	if err != nil {
		return bootArgs{}, err
	}
	if args.ignitionURL == "" {
		return bootArgs{}, fmt.Errorf("no %s= on the kernel command line", ignition.KernelArgIgnition)
	}
	if err := ignition.CheckURL(args.ignitionURL); err != nil {
		return bootArgs{}, fmt.Errorf("%s: %s", ignition.KernelArgIgnition, redactedURL(args.ignitionURL))
	}
	return args, nil
}

// scanCmdline reads ironfleet.ignition and BOOTIF, neither required; a malformed BOOTIF is an
// error.
func scanCmdline(cmdline string) (bootArgs, error) {
	var args bootArgs
	for _, word := range strings.Fields(cmdline) {
		key, value, _ := strings.Cut(word, "=")
		switch key {
		case ignition.KernelArgIgnition:
			args.ignitionURL = value
		case ignition.KernelArgBootIf:
			mac, err := parseBootIf(value)
			if err != nil {
				return bootArgs{}, err
			}
			args.bootIf = mac
		}
	}
	return args, nil
}

// parseBootIf reads pxelinux's BOOTIF: the ARP hardware type (01 = Ethernet), then the MAC,
// all hyphen-separated: 01-aa-bb-cc-dd-ee-ff.
func parseBootIf(value string) (net.HardwareAddr, error) {
	hwType, mac, ok := strings.Cut(value, "-")
	if !ok || hwType != "01" {
		return nil, fmt.Errorf("%s=%q: want 01-aa-bb-cc-dd-ee-ff (Ethernet)", ignition.KernelArgBootIf, value)
	}
	addr, err := net.ParseMAC(strings.ReplaceAll(mac, "-", ":"))
	if err != nil || len(addr) != 6 {
		return nil, fmt.Errorf("%s=%q: not a MAC address", ignition.KernelArgBootIf, value)
	}
	return addr, nil
}

// redactedURL is a boot URL fit for the console: the path's last element (the boot token)
// replaced with "…".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(unparseable URL)"
	}
	path := u.Path
	if i := strings.LastIndex(path, "/"); i >= 0 && i < len(path)-1 {
		path = path[:i+1] + "…"
	}
	return u.Scheme + "://" + u.Host + path
}
