// Command metalprobe is the in-band agent Ironfleet boots on a server: it reports the host's
// hardware to the operator's registry and wipes its disks when the server is released.
package main

import (
	"os"

	// The probe's initramfs has no CA roots of its own: images on public https servers are
	// verified against Mozilla's roots, which this embeds (used only where the system has none).
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/ironfleet/ironfleet/metalprobe/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
