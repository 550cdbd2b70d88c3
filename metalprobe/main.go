// Command metalprobe is the in-band agent Ironfleet boots on a server: it reports the host's
// hardware to the operator's registry and wipes its disks when the server is released.
package main

import (
	"os"

	"github.com/ironfleet/ironfleet/metalprobe/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
