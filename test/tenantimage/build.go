package tenantimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ironfleet/ironfleet/metalprobe/image"
)

// Packages the builder compiles and whose sources decide the image's bytes.
const (
	InitPackage    = "github.com/ironfleet/ironfleet/test/tenantimage/init"
	builderPackage = "github.com/ironfleet/ironfleet/test/tenantimage"
)

// WantedModules are the drivers /init loads: the virtio, NVMe, SATA and CD-ROM disks a config
// drive can be on, isofs to mount it, QEMU's NICs and Intel's common ones, and virtio_rng.
// Their dependencies are added (metalprobe/image.ModuleIndex.ModuleClosure); those built into
// Debian's kernel are skipped.
var WantedModules = []string{
	"virtio_pci", "virtio_blk", "virtio_scsi", "nvme", "ahci", "sd_mod", "sr_mod", "isofs",
	"virtio_net", "e1000", "e1000e", "igb",
	"virtio_rng",
}

// Options say what to build and where.
type Options struct {
	// OutDir receives the disk, its compressed copies, SHA256SUMS and manifest.json.
	OutDir string
	// Kernel is the kernel package; the probe's pin (metalprobe/image/kernel.version) when zero.
	Kernel image.KernelPin
	// KernelDeb is the kernel package file; when empty it is downloaded into CacheDir.
	KernelDeb string
	// CacheDir keeps downloaded kernel packages; metalprobe/image.DefaultCacheDir() when empty.
	CacheDir string
	// ModuleDir is a directory inside this Go module, where go runs; "." when empty.
	ModuleDir string
	// Log receives the tools' output and the build's steps, from more than one goroutine;
	// io.Discard when nil.
	Log io.Writer
	// Force rebuilds even when OutDir already holds a build of the same sources.
	Force bool
}

// Manifest describes a build; the builder writes it as manifest.json, last.
type Manifest struct {
	Kernel image.KernelPin `json:"kernel"`
	// Files are disk.raw and its compressed copies, as served (SHA256SUMS lists the same).
	Files []image.FileDigest `json:"files"`
	// Disk is the disk's layout.
	Disk DiskLayout `json:"disk"`
	// Boot are the files copied onto the boot partition, by path (syslinux adds ldlinux.sys
	// and ldlinux.c32).
	Boot []image.FileDigest `json:"boot"`
	// Modules are the kernel modules in the initramfs, in the order /init loads them.
	Modules []image.Module `json:"modules"`
	// Tools are the Debian packages whose programs wrote the disk, with their versions.
	Tools map[string]string `json:"tools"`
	// SourceDigest identifies the inputs: a build with the same one writes the same bytes.
	SourceDigest string `json:"sourceDigest"`
}

// DiskLayout is where the boot partition is.
type DiskLayout struct {
	Bytes          int64  `json:"bytes"`
	PartitionStart int64  `json:"partitionStart"`
	PartitionBytes int64  `json:"partitionBytes"`
	PartitionType  string `json:"partitionType"`
	Filesystem     string `json:"filesystem"`
	// Bootloader is the BIOS boot's: syslinux, in the MBR and the partition's boot sector.
	Bootloader    string `json:"bootloader"`
	KernelCmdline string `json:"kernelCmdline"`
	// UEFILoaders are the packages of the UEFI boot's shim and GRUB (EFIShim, EFIGRUB), both
	// signed: the disk boots with Secure Boot on.
	UEFILoaders []image.DebPin `json:"uefiLoaders"`
}

// File returns the digest of the output file name.
func (m *Manifest) File(name string) (image.FileDigest, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return image.FileDigest{}, false
}

// Build builds the image into opts.OutDir and returns its manifest and whether it built
// anything: a directory that already holds an intact build of the same sources is kept,
// unless opts.Force.
func Build(ctx context.Context, opts Options) (*Manifest, bool, error) {
	if opts.OutDir == "" {
		return nil, false, errors.New("no output directory")
	}
	if opts.Kernel == (image.KernelPin{}) {
		opts.Kernel = image.DefaultKernelPin()
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.ModuleDir == "" {
		opts.ModuleDir = "."
	}
	t, err := findTools(ctx)
	if err != nil {
		return nil, false, err
	}
	digest, err := sourceDigest(ctx, opts, t)
	if err != nil {
		return nil, false, err
	}
	if m, ok := current(opts.OutDir, digest); ok && !opts.Force {
		return m, false, nil
	}
	m, err := build(ctx, opts, t, digest)
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

// Ensure makes Dir() hold a current build, building it there when it does not, and returns
// the directory and its manifest: what a test that boots the tenant image calls. It builds as
// `make tenant-image` does, by running build-tenant-image (go run) in a process of its own,
// so that a test binary built with -race does not compress the disk itself (minutes instead
// of seconds). A current build costs a fraction of a second.
func Ensure(ctx context.Context) (string, *Manifest, error) {
	dir, err := Dir()
	if err != nil {
		return "", nil, err
	}
	if _, err := runBuilder(ctx, dir, false); err != nil {
		return "", nil, err
	}
	m, err := ReadManifest(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, m, nil
}

// builderCommand is build-tenant-image, relative to the repository's root.
const builderCommand = "./test/tenantimage/cmd/build-tenant-image"

// runBuilder runs build-tenant-image -out out (-force) from the repository's root and returns
// its output.
func runBuilder(ctx context.Context, out string, force bool) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	args := []string{"run", builderCommand, "-out", out}
	if force {
		args = append(args, "-force")
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	output, err := cmd.CombinedOutput()
	if err != nil {
		if strings.Contains(string(output), errTools.Error()) {
			return "", fmt.Errorf("%w (go %s)", errTools, strings.Join(args, " "))
		}
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, output)
	}
	return string(output), nil
}

func build(ctx context.Context, opts Options, t *tools, digest string) (*Manifest, error) {
	work, err := os.MkdirTemp("", "tenant-image-")
	if err != nil {
		return nil, fmt.Errorf("creating a work directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(work) }()
	logf := func(format string, args ...any) { _, _ = fmt.Fprintf(opts.Log, format+"\n", args...) }
	start := time.Now()

	// /init compiles while the kernel package is fetched and unpacked.
	var initBin []byte
	var initErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		initBin, initErr = image.GoBuild(ctx, opts.ModuleDir, InitPackage, work, opts.Log)
		logf("built /init in %s", since(start))
	})
	kernel, modules, files, kerr := image.PrepareKernel(ctx, image.KernelSource{Pin: opts.Kernel, Deb: opts.KernelDeb, CacheDir: opts.CacheDir, Log: opts.Log}, WantedModules, filepath.Join(work, "kernel"))
	logf("prepared the kernel and %d modules in %s", len(modules), since(start))
	loaders, lerr := image.PrepareDiskLoaders(ctx, opts.CacheDir, opts.Log, filepath.Join(work, "loaders"))
	wg.Wait()
	if err := errors.Join(kerr, lerr, initErr); err != nil {
		return nil, err
	}
	files = append(files,
		image.File{Name: "init", Mode: 0o755, Data: initBin},
		// The kernel opens /dev/console for /init's output before /init mounts devtmpfs.
		image.File{Name: "dev/console", Mode: 0o600, CharDev: &[2]uint64{5, 1}},
	)
	for _, dir := range []string{"proc", "sys", "mnt"} {
		files = append(files, image.File{Name: dir, Dir: true, Mode: 0o755})
	}
	var initrd bytes.Buffer
	if err := image.WriteInitramfs(&initrd, files); err != nil {
		return nil, err
	}

	boot := []bootFile{
		{BootKernel, kernel},
		{BootInitrd, initrd.Bytes()},
		{SyslinuxCfg, []byte(SyslinuxConfig)},
		{EFIShim, loaders.Shim},
		{EFIGRUB, loaders.GRUB},
		{EFIGRUBCfg, []byte(GRUBConfig)},
	}
	disk, err := assembleDisk(ctx, t, filepath.Join(work, "disk"), boot, opts.Log)
	if err != nil {
		return nil, err
	}
	logf("assembled the disk in %s", since(start))
	compressed, err := compressAll(disk)
	if err != nil {
		return nil, err
	}
	logf("compressed the disk in %s", since(start))

	for i := range modules {
		modules[i].Path = "" // in the work directory, removed when Build returns
	}
	m := &Manifest{
		Kernel: opts.Kernel,
		Disk: DiskLayout{
			Bytes: DiskBytes, PartitionStart: PartitionStart, PartitionBytes: PartitionBytes,
			PartitionType: fmt.Sprintf("0x%02x", PartitionType), Filesystem: "FAT32",
			Bootloader: "syslinux " + t.versions["syslinux"], KernelCmdline: KernelCmdline,
			UEFILoaders: loaders.Pins,
		},
		Modules:      modules,
		Tools:        t.versions,
		SourceDigest: digest,
	}
	for _, b := range boot {
		m.Boot = append(m.Boot, image.DigestOf(b.name, b.data))
	}
	outputs := append([]output{{DiskFile, disk}}, compressed...)
	for _, o := range outputs {
		m.Files = append(m.Files, image.DigestOf(o.name, o.data))
	}
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	outputs = append(outputs, output{SumsFile, []byte(sha256Sums(m.Files))}, output{ManifestFile, append(manifest, '\n')})

	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", opts.OutDir, err)
	}
	// The manifest goes last: a build directory with a manifest is complete.
	_ = os.Remove(filepath.Join(opts.OutDir, ManifestFile))
	for _, o := range outputs {
		if err := writeFileAtomic(filepath.Join(opts.OutDir, o.name), o.data); err != nil {
			return nil, err
		}
	}
	logf("wrote %s in %s", opts.OutDir, since(start))
	return m, nil
}

type output struct {
	name string
	data []byte
}

// sha256Sums is SHA256SUMS in sha256sum's format, so `sha256sum -c SHA256SUMS` checks a
// download.
func sha256Sums(files []image.FileDigest) string {
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "%s  %s\n", f.SHA256, f.Name)
	}
	return b.String()
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// writeFileAtomic writes data to a temporary file next to path and renames it into place.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
