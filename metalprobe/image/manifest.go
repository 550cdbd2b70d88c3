package image

import (
	"crypto/sha256"
	"encoding/hex"
)

// Manifest describes a built image; the builder writes it as manifest.json next to the files.
type Manifest struct {
	Kernel KernelPin `json:"kernel"`
	// ProbeVersion is the metalprobe version compiled in (cli.Version).
	ProbeVersion string `json:"probeVersion"`
	// Files are vmlinuz and initramfs.cpio.gz.
	Files []FileDigest `json:"files"`
	// Bootloaders are the packages the ISO's boot loaders come from.
	Bootloaders []DebPin `json:"bootloaders"`
	// ISO are probe.iso, the template of virtual-media boots (internal/bootmedia), and its
	// probe-iso.json; they are not part of what a network boot downloads (TotalBytes).
	ISO []FileDigest `json:"iso"`
	// SignedChain are shimx64.efi and grubx64.efi, the loaders of Secure Boot network boots,
	// copied unchanged (their signatures intact) from the pinned packages.
	SignedChain []FileDigest `json:"signedChain"`
	// TotalBytes is the kernel plus the initramfs: what a server downloads to boot.
	TotalBytes int64 `json:"totalBytes"`
	// Modules are the kernel modules in the initramfs, in the order /init loads them.
	Modules []Module `json:"modules"`
	// SourceDigest identifies the inputs (see sourceDigest): a build with the same one would
	// write the same bytes.
	SourceDigest string `json:"sourceDigest"`
}

// FileDigest is one output file's name, size and SHA-256.
type FileDigest struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// DigestOf is the digest of an output file name that holds data.
func DigestOf(name string, data []byte) FileDigest {
	sum := sha256.Sum256(data)
	return FileDigest{Name: name, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
}
