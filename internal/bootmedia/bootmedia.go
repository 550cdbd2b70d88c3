// Package bootmedia makes the probe's per-boot ISO for virtual-media boots: the template ISO
// that metalprobe/image builds (probe.iso, bootable on BIOS through isolinux and on UEFI
// through GRUB, with the probe's kernel and initramfs) carries a zero-filled embed area, the
// file /IGNITION.IMG that both boot loaders load as a second initrd. A boot's ISO is the
// template with that area holding a gzip newc cpio of the boot's ignition and boot URL
// (EmbedIgnitionPath, EmbedBootURLPath): nothing is written to disk, and a BMC's range reads
// see the same bytes for the whole boot.
package bootmedia

import (
	"errors"
	"io"
	"strings"

	"github.com/ironfleet/ironfleet/internal/ignition"
)

// Files of the template, in the probe image's directory (bin/probe).
const (
	// ISOFile is the template ISO.
	ISOFile = "probe.iso"
	// ManifestFile describes it (Manifest, as JSON).
	ManifestFile = "probe-iso.json"
)

// Paths in the embedded initrd (relative, as in a cpio archive), which the probe's /init reads:
// ignition.MediaIgnitionFile and ignition.MediaBootURLFile.
var (
	EmbedIgnitionPath = strings.TrimPrefix(ignition.MediaIgnitionFile, "/")
	EmbedBootURLPath  = strings.TrimPrefix(ignition.MediaBootURLFile, "/")
)

// Manifest is probe-iso.json: where the embed area lies in the template.
type Manifest struct {
	// Size of probe.iso in bytes, and its SHA256 (hex).
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// EmbedOffset and EmbedSize locate /IGNITION.IMG's bytes in probe.iso (zeros in the template).
	EmbedOffset int64 `json:"embedOffset"`
	EmbedSize   int64 `json:"embedSize"`
}

// Template is a loaded probe.iso and its manifest.
type Template struct {
	Manifest Manifest
	path     string
}

// ErrTooLarge is returned by Embed when a boot's files do not fit the embed area.
var ErrTooLarge = errors.New("does not fit the ISO's embed area")

// LoadTemplate opens dir's probe.iso and checks it against probe-iso.json.
func LoadTemplate(dir string) (*Template, error) {
	return nil, errors.New("bootmedia: not implemented yet") // stub: implemented for issue #20
}

// Embed renders a boot's embed: a gzip newc cpio of the ignition and the boot URL, zero-padded
// to the embed area's size.
func (t *Template) Embed(ignition []byte, bootURL string) ([]byte, error) {
	return nil, errors.New("bootmedia: not implemented yet") // stub
}

// Open is the boot's ISO: the template with embed (Embed's result) in its area, Size() bytes,
// for http.ServeContent. Close releases the template's file.
func (t *Template) Open(embed []byte) (io.ReadSeekCloser, error) {
	return nil, errors.New("bootmedia: not implemented yet") // stub
}

// Size is the ISO's size in bytes.
func (t *Template) Size() int64 { return t.Manifest.Size }
