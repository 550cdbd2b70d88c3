// Command build-tenant-image builds the tenant test image (disk.raw, its .gz, .zst and .xz
// copies, SHA256SUMS, manifest.json) into a directory. `make tenant-image` runs it into
// bin/tenant.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ironfleet/ironfleet/test/tenantimage"
)

func main() {
	out := flag.String("out", "", "write the image into this `dir`ectory (required)")
	deb := flag.String("kernel-deb", "", "use this kernel package `file` instead of downloading the probe's pinned one with apt-get download (cached in ~/.cache/ironfleet/kernel)")
	verbose := flag.Bool("v", false, "show each step and the output of go build, apt-get, dpkg-deb, mkfs.vfat, mcopy and syslinux")
	force := flag.Bool("force", false, "rebuild even when -out already holds a build of the same sources")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: build-tenant-image -out DIR [-kernel-deb FILE] [-force] [-v]")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := tenantimage.Options{OutDir: *out, KernelDeb: *deb, Force: *force}
	if *verbose {
		opts.Log = os.Stderr
	}
	start := time.Now()
	m, built, err := tenantimage.Build(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-tenant-image: %v\n", err)
		os.Exit(1)
	}
	for _, f := range m.Files {
		fmt.Printf("%s/%s  %.1f MiB  sha256:%s\n", *out, f.Name, float64(f.Size)/(1<<20), f.SHA256)
	}
	what := "built in " + time.Since(start).Round(100*time.Millisecond).String()
	if !built {
		what = "up to date"
	}
	fmt.Printf("%s, %s, %d modules: %s\n", m.Kernel, m.Disk.Bootloader, len(m.Modules), what)
}
