// Command build-probe-image builds metalprobe's boot image (vmlinuz, initramfs.cpio.gz, the
// virtual-media template probe.iso with its probe-iso.json, manifest.json) into a directory.
// `make probe-image` runs it into bin/probe.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ironfleet/ironfleet/metalprobe/image"
)

func main() {
	out := flag.String("out", "", "write vmlinuz, initramfs.cpio.gz, probe.iso, probe-iso.json and manifest.json into this `dir`ectory (required)")
	deb := flag.String("kernel-deb", "", "use this kernel package `file` instead of downloading it with apt-get download (cached in ~/.cache/ironfleet/kernel, with the boot loaders' packages)")
	version := flag.String("version", "dev", "the metalprobe `version` to compile in")
	printPin := flag.Bool("print-kernel-pin", false, "print the pinned kernel package as <package>=<version> and exit")
	verbose := flag.Bool("v", false, "show the output of go build, apt-get and dpkg-deb")
	force := flag.Bool("force", false, "rebuild even when -out already holds a build of the same sources")
	flag.Parse()
	if *printPin {
		fmt.Println(image.DefaultKernelPin())
		return
	}
	if *out == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: build-probe-image -out DIR [-kernel-deb FILE] [-version V] [-force] [-v] | -print-kernel-pin")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts := image.Options{OutDir: *out, KernelDeb: *deb, ProbeVersion: *version, Force: *force}
	if *verbose {
		opts.Log = os.Stderr
	}
	start := time.Now()
	m, built, err := image.Build(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "build-probe-image: %v\n", err)
		os.Exit(1)
	}
	for _, f := range append(m.Files, m.ISO...) {
		fmt.Printf("%s/%s  %.1f MiB  sha256:%s\n", *out, f.Name, float64(f.Size)/(1<<20), f.SHA256)
	}
	what := "built in " + time.Since(start).Round(100*time.Millisecond).String()
	if !built {
		what = "up to date"
	}
	fmt.Printf("%s, metalprobe %s: %d modules, %.1f MiB in all (limit %d MiB), %s\n",
		m.Kernel, m.ProbeVersion, len(m.Modules), float64(m.TotalBytes)/(1<<20), image.MaxImageBytes>>20, what)
}
