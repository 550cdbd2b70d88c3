// Package image builds the probe's boot image: Debian's kernel (vmlinuz) and an initramfs
// holding metalprobe's static /init, the metalprobe binary itself and the kernel modules for
// common server NICs and storage controllers. The build is reproducible: the same sources,
// Go toolchain and kernel package give the same bytes.
package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Output file names in the build directory.
const (
	// The template ISO and its bootmedia.Manifest are ISOFile and ISOManifestFile (iso.go).
	KernelFile    = "vmlinuz"
	InitramfsFile = "initramfs.cpio.gz"
	ManifestFile  = "manifest.json"
	// ShimFile and GRUBFile are the signed chain of Secure Boot network boots: shim, which the
	// firmware verifies against Microsoft's UEFI CA, and the network GRUB shim fetches from
	// beside itself under this name and verifies against Debian's key; GRUB then has shim
	// verify the kernel.
	ShimFile = "shimx64.efi"
	GRUBFile = "grubx64.efi"
)

// MaxImageBytes bounds the kernel plus the initramfs: a server downloads both at every boot,
// over iPXE's plain HTTP, and the initramfs is unpacked into RAM.
const MaxImageBytes = 40 << 20

// Paths inside the initramfs that /init relies on.
const (
	// ModulesDir holds the kernel modules, flat, by file name.
	ModulesDir = "lib/modules"
	// LoadOrderFile lists ModulesDir's files, one a line, in the order they must be loaded,
	// each with what /init needs to decide whether this machine needs it: its dependencies,
	// its PCI alias patterns, whether it is there only as a dependency (format: LoadOrder).
	LoadOrderFile = ModulesDir + "/load-order"
	// MetalprobePath is the probe binary /init runs.
	MetalprobePath = "bin/metalprobe"
)

// Options say what to build and where.
type Options struct {
	// OutDir receives vmlinuz, initramfs.cpio.gz, probe.iso, probe-iso.json, shimx64.efi,
	// grubx64.efi and manifest.json.
	OutDir string
	// Kernel is the kernel package; DefaultKernelPin() when zero.
	Kernel KernelPin
	// KernelDeb is the kernel package file; when empty it is downloaded into CacheDir.
	KernelDeb string
	// Bootloaders are the packages the ISO's boot loaders come from; DefaultBootloaderPins()
	// when nil. They are downloaded into CacheDir like the kernel's.
	Bootloaders []DebPin
	// CacheDir keeps downloaded packages; DefaultCacheDir() when empty.
	CacheDir string
	// ProbeVersion is compiled into metalprobe (cli.Version).
	ProbeVersion string
	// ModuleDir is a directory inside this Go module, where go build runs; "." when empty.
	ModuleDir string
	// Log receives the tools' output; io.Discard when nil.
	Log io.Writer
	// Force rebuilds even when OutDir already holds a build of the same sources.
	Force bool
}

// Build builds the image into opts.OutDir and returns its manifest and whether it built
// anything: when OutDir already holds an intact build of the same sources (see sourceDigest)
// it is kept, unless opts.Force. It fails when the kernel plus the initramfs are larger than
// MaxImageBytes.
func Build(ctx context.Context, opts Options) (*Manifest, bool, error) {
	if opts.OutDir == "" {
		return nil, false, errors.New("no output directory")
	}
	if opts.Kernel == (KernelPin{}) {
		opts.Kernel = DefaultKernelPin()
	}
	if opts.Bootloaders == nil {
		opts.Bootloaders = DefaultBootloaderPins()
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.ModuleDir == "" {
		opts.ModuleDir = "."
	}
	srcDigest, err := sourceDigest(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	if m, ok := current(opts.OutDir, srcDigest); ok && !opts.Force {
		return m, false, nil
	}
	m, err := build(ctx, opts, srcDigest)
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

func build(ctx context.Context, opts Options, srcDigest string) (*Manifest, error) {
	work, err := os.MkdirTemp("", "probe-image-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()

	// The Go binaries build while the kernel package is fetched and unpacked.
	var binaries struct {
		init, probe []byte
		err         error
	}
	var wg sync.WaitGroup
	start := time.Now()
	wg.Go(func() {
		binaries.init, binaries.err = goBuild(ctx, opts.ModuleDir, InitPackage, "", work, opts.Log)
		if binaries.err == nil {
			binaries.probe, binaries.err = goBuild(ctx, opts.ModuleDir, MetalprobePackage, opts.ProbeVersion, work, opts.Log)
		}
		_, _ = fmt.Fprintf(opts.Log, "built /init and metalprobe in %s\n", time.Since(start).Round(time.Millisecond))
	})
	kernel, modules, files, kerr := PrepareKernel(ctx, KernelSource{Pin: opts.Kernel, Deb: opts.KernelDeb, CacheDir: opts.CacheDir, Log: opts.Log}, WantedModules, filepath.Join(work, "kernel"))
	_, _ = fmt.Fprintf(opts.Log, "prepared the kernel and %d modules in %s\n", len(modules), time.Since(start).Round(time.Millisecond))
	var loaders bootloaders
	if kerr == nil {
		loaders, kerr = prepareBootloaders(ctx, opts, opts.Bootloaders, filepath.Join(work, "bootloaders"))
	}
	wg.Wait()
	if kerr != nil {
		return nil, kerr
	}
	if binaries.err != nil {
		return nil, binaries.err
	}

	files = append(files,
		File{Name: "init", Mode: 0o755, Data: binaries.init},
		File{Name: MetalprobePath, Mode: 0o755, Data: binaries.probe},
		// The kernel opens /dev/console for /init's output before /init can mount devtmpfs.
		File{Name: "dev/console", Mode: 0o600, CharDev: &[2]uint64{5, 1}},
	)
	for _, dir := range []string{"proc", "sys", "run", "tmp", "etc", "bin"} {
		files = append(files, File{Name: dir, Dir: true, Mode: 0o755})
	}
	var initramfs bytes.Buffer
	packed := time.Now()
	if err := WriteInitramfs(&initramfs, files); err != nil {
		return nil, err
	}
	_, _ = fmt.Fprintf(opts.Log, "packed the initramfs in %s\n", time.Since(packed).Round(time.Millisecond))

	mastered := time.Now()
	iso, isoManifest, err := buildISO(work, kernel, initramfs.Bytes(), loaders)
	if err != nil {
		return nil, err
	}
	isoJSON, err := json.MarshalIndent(isoManifest, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the ISO's manifest: %w", err)
	}
	isoJSON = append(isoJSON, '\n')
	_, _ = fmt.Fprintf(opts.Log, "wrote the ISO in %s\n", time.Since(mastered).Round(time.Millisecond))

	m := &Manifest{
		Kernel:       opts.Kernel,
		Bootloaders:  opts.Bootloaders,
		ISO:          []FileDigest{DigestOf(ISOFile, iso), DigestOf(ISOManifestFile, isoJSON)},
		SignedChain:  []FileDigest{DigestOf(ShimFile, loaders.shim), DigestOf(GRUBFile, loaders.grubNet)},
		ProbeVersion: opts.ProbeVersion,
		Files:        []FileDigest{DigestOf(KernelFile, kernel), DigestOf(InitramfsFile, initramfs.Bytes())},
		Modules:      modules,
		SourceDigest: srcDigest,
	}
	for _, f := range m.Files {
		m.TotalBytes += f.Size
	}
	if m.TotalBytes > MaxImageBytes {
		return nil, fmt.Errorf("the image is %d bytes (kernel %d + initramfs %d), more than the %d allowed: drop modules from WantedModules or shrink the binaries",
			m.TotalBytes, m.Files[0].Size, m.Files[1].Size, MaxImageBytes)
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.OutDir, err)
	}
	// The manifest goes last: a build directory with a manifest is complete.
	_ = os.Remove(filepath.Join(opts.OutDir, ManifestFile))
	for _, out := range []struct {
		name string
		data []byte
	}{{KernelFile, kernel}, {InitramfsFile, initramfs.Bytes()}, {ISOFile, iso}, {ISOManifestFile, isoJSON},
		{ShimFile, loaders.shim}, {GRUBFile, loaders.grubNet}, {ManifestFile, append(manifest, '\n')}} {
		if err := writeFileAtomic(filepath.Join(opts.OutDir, out.name), out.data); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// KernelSource says where a boot image's kernel package comes from.
type KernelSource struct {
	Pin KernelPin
	// Deb is the package file; when empty it is downloaded into CacheDir.
	Deb string
	// CacheDir keeps downloaded packages; DefaultCacheDir() when empty.
	CacheDir string
	// Log receives the tools' output.
	Log io.Writer
}

// PrepareKernel fetches and unpacks the kernel package into dir and returns vmlinuz, the
// closure of the wanted modules in load order, and the initramfs files that carry them: the
// modules flat in ModulesDir and their order in LoadOrderFile (LoadOrder), which
// earlyboot.LoadModules reads. Other boot images (test/tenantimage) use it for their kernel too.
func PrepareKernel(ctx context.Context, src KernelSource, wanted []string, dir string) ([]byte, []Module, []File, error) {
	deb := src.Deb
	if deb == "" {
		cache := src.CacheDir
		if cache == "" {
			var err error
			if cache, err = DefaultCacheDir(); err != nil {
				return nil, nil, nil, err
			}
		}
		var err error
		if deb, err = FetchKernelDeb(ctx, src.Pin, cache, src.Log); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := UnpackDeb(ctx, deb, dir, src.Log); err != nil {
		return nil, nil, nil, err
	}
	release := src.Pin.Release()
	kernel, err := os.ReadFile(filepath.Join(dir, "boot", "vmlinuz-"+release))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the kernel from %s (is it %s?): %w", deb, src.Pin, err)
	}
	idx, err := IndexModules(dir, release)
	if err != nil {
		return nil, nil, nil, err
	}
	modules, err := idx.ModuleClosure(wanted)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("resolving modules: %w", err)
	}
	order, err := LoadOrder(modules)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("writing the module load order: %w", err)
	}
	files := []File{{Name: ModulesDir, Dir: true, Mode: 0o755}}
	for _, m := range modules {
		data, err := os.ReadFile(m.Path)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading module %s: %w", m.Name, err)
		}
		files = append(files, File{Name: ModulesDir + "/" + m.File, Mode: 0o644, Data: data})
	}
	files = append(files, File{Name: LoadOrderFile, Mode: 0o644, Data: order})
	return kernel, modules, files, nil
}

// writeFileAtomic writes data to a temporary file next to path and renames it into place.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
