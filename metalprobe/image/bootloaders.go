package image

import (
	"context"
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// bootloaderPinFile pins the packages the ISO's boot loaders come from.
//
//go:embed bootloaders.version
var bootloaderPinFile string

// DebPin is a Debian package at an exact version.
type DebPin struct {
	Package string `json:"package"`
	Version string `json:"version"`
}

// String is the pin as apt-get spells it.
func (p DebPin) String() string { return p.Package + "=" + p.Version }

// debGlob matches the file apt-get download gives the package, whatever its architecture
// (isolinux and syslinux-common are "all", shim-signed and grub-efi-amd64-signed "amd64").
func (p DebPin) debGlob() string {
	return p.Package + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_*.deb"
}

// The files the builder takes from the pinned packages, by package.
var bootloaderFiles = map[string][]string{
	"isolinux":        {isolinuxBin},
	"syslinux-common": {ldlinuxC32},
	// shim, signed by Microsoft's UEFI CA (what firmware with Microsoft's keys trusts), with
	// Debian's key built in.
	"shim-signed": {shimSigned},
	// Debian's GRUB, signed by Debian's key (shim checks it): the network image (prefix /grub
	// on its TFTP server; TFTP built in, no HTTP) and the CD image (finds the ISO by
	// /.disk/info, reads /boot/grub/grub.cfg). Under Secure Boot neither loads a module.
	// The disk image (prefix /EFI/debian on the partition it was loaded from) is an installed
	// OS's: the tenant image's (DiskLoaders).
	"grub-efi-amd64-signed": {grubNetSigned, grubCDSigned, grubDiskSigned},
}

// Paths in the packages.
const (
	isolinuxBin    = "usr/lib/ISOLINUX/isolinux.bin"
	ldlinuxC32     = "usr/lib/syslinux/modules/bios/ldlinux.c32"
	shimSigned     = "usr/lib/shim/shimx64.efi.signed"
	grubNetSigned  = "usr/lib/grub/x86_64-efi-signed/grubnetx64.efi.signed"
	grubCDSigned   = "usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed"
	grubDiskSigned = "usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
)

// DefaultBootloaderPins are the pins in bootloaders.version.
func DefaultBootloaderPins() []DebPin {
	pins, err := ParseDebPins(bootloaderPinFile)
	if err != nil {
		panic(fmt.Sprintf("metalprobe/image/bootloaders.version: %v", err))
	}
	return pins
}

// ParseDebPins reads "<package> <version>" lines, skipping blank lines and comments; every
// package whose files the builder needs (bootloaderFiles) must be pinned exactly once.
func ParseDebPins(text string) ([]DebPin, error) {
	var pins []DebPin
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("want \"<package> <version>\", got %q", line)
		}
		pin := DebPin{Package: fields[0], Version: fields[1]}
		if _, ok := bootloaderFiles[pin.Package]; !ok {
			return nil, fmt.Errorf("package %q is not one the builder takes a boot loader from", pin.Package)
		}
		if seen[pin.Package] {
			return nil, fmt.Errorf("package %q is pinned twice", pin.Package)
		}
		seen[pin.Package] = true
		pins = append(pins, pin)
	}
	for pkg := range bootloaderFiles {
		if !seen[pkg] {
			return nil, fmt.Errorf("package %q is not pinned", pkg)
		}
	}
	return pins, nil
}

// bootloaders are the boot loader files: isolinux for the ISO's BIOS boot; shim and Debian's
// signed GRUBs for everything UEFI (the ISO's CD GRUB, the network GRUB of Secure Boot PXE).
type bootloaders struct {
	isolinux, ldlinux               []byte
	shim, grubCD, grubNet, grubDisk []byte
}

// DiskLoaders are Debian's signed shim and disk GRUB, from the packages bootloaders.version
// pins: what an installed OS's EFI system partition boots through under Secure Boot.
type DiskLoaders struct {
	// Shim is shimx64.efi, signed by Microsoft's UEFI CA; installed as /EFI/BOOT/BOOTX64.EFI
	// it loads grubx64.efi from its own directory.
	Shim []byte
	// GRUB is grubx64.efi, signed by Debian's key: it reads /EFI/debian/grub.cfg from the
	// partition it was loaded from, and under Secure Boot boots only a kernel shim verifies.
	GRUB []byte
	// Pins are the packages they came from.
	Pins []DebPin
}

// PrepareDiskLoaders fetches the pinned shim-signed and grub-efi-amd64-signed packages into
// cacheDir (DefaultCacheDir() when empty), unpacks them into dir and returns the disk loaders.
func PrepareDiskLoaders(ctx context.Context, cacheDir string, log io.Writer, dir string) (DiskLoaders, error) {
	if log == nil {
		log = io.Discard
	}
	var pins []DebPin
	for _, pin := range DefaultBootloaderPins() {
		if pin.Package == "shim-signed" || pin.Package == "grub-efi-amd64-signed" {
			pins = append(pins, pin)
		}
	}
	loaders, err := prepareBootloaders(ctx, Options{CacheDir: cacheDir, Log: log}, pins, dir)
	if err != nil {
		return DiskLoaders{}, err
	}
	return DiskLoaders{Shim: loaders.shim, GRUB: loaders.grubDisk, Pins: pins}, nil
}

// prepareBootloaders fetches the pinned packages (as the kernel's: apt-get download into the
// cache, dpkg-deb -x into dir) and reads the boot loaders out of them.
func prepareBootloaders(ctx context.Context, opts Options, pins []DebPin, dir string) (bootloaders, error) {
	cache := opts.CacheDir
	if cache == "" {
		var err error
		if cache, err = DefaultCacheDir(); err != nil {
			return bootloaders{}, err
		}
	}
	files := map[string][]byte{}
	for _, pin := range pins {
		deb, err := fetchDeb(ctx, pin.String(), pin.debGlob(), cache, opts.Log)
		if err != nil {
			return bootloaders{}, err
		}
		if err := UnpackDeb(ctx, deb, dir, opts.Log); err != nil {
			return bootloaders{}, err
		}
		for _, name := range bootloaderFiles[pin.Package] {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				return bootloaders{}, fmt.Errorf("reading /%s from %s: %w", name, pin, err)
			}
			files[name] = data
		}
	}
	return bootloaders{
		isolinux: files[isolinuxBin],
		ldlinux:  files[ldlinuxC32],
		shim:     files[shimSigned],
		grubCD:   files[grubCDSigned],
		grubNet:  files[grubNetSigned],
		grubDisk: files[grubDiskSigned],
	}, nil
}

// fetchDeb returns the path of the package spec (<package>=<version>) in cacheDir, the file
// matching glob, downloading it with apt-get download when it is not there yet: see
// FetchKernelDeb.
func fetchDeb(ctx context.Context, spec, glob, cacheDir string, log io.Writer) (string, error) {
	if found, _ := filepath.Glob(filepath.Join(cacheDir, glob)); len(found) == 1 {
		return found[0], nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("creating the package cache: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "download-")
	if err != nil {
		return "", fmt.Errorf("creating a download directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// apt-get drops privileges to _apt for the download, which needs to write here; as root it
	// otherwise downloads unsandboxed with a warning.
	_ = os.Chmod(tmp, 0o777)
	download := func() (string, error) {
		if err := run(ctx, tmp, log, "apt-get", "download", spec); err != nil {
			return "", fmt.Errorf("apt-get download %s: %w", spec, err)
		}
		found, _ := filepath.Glob(filepath.Join(tmp, glob))
		if len(found) != 1 {
			return "", fmt.Errorf("apt-get download %s: no single %s afterwards", spec, glob)
		}
		return found[0], nil
	}
	got, err := download()
	if err != nil {
		// A fresh machine has no package lists yet: fetch them once and try again.
		_, _ = fmt.Fprintf(log, "%v; running apt-get update and retrying\n", err)
		if err := run(ctx, "", log, "apt-get", "update"); err != nil {
			return "", fmt.Errorf("apt-get update: %w", err)
		}
		if got, err = download(); err != nil {
			return "", err
		}
	}
	cached := filepath.Join(cacheDir, filepath.Base(got))
	if err := os.Rename(got, cached); err != nil {
		return "", fmt.Errorf("caching %s: %w", spec, err)
	}
	return cached, nil
}
