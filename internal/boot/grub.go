package boot

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/boot/tftp"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// The signed chain a server booting with UEFI Secure Boot network-boots, all over TFTP:
//
//	firmware PXE → shimx64.efi (signed by Microsoft's UEFI CA, which the firmware trusts)
//	             → grubx64.efi (Debian's network GRUB, signed by Debian: shim checks it)
//	             → grub/grub.cfg → grub/boot-<mac>.cfg (this server's boot, like its iPXE script)
//	             → vmlinuz (Debian's kernel, signed: GRUB has shim check it) + initramfs.cpio.gz
//
// Debian's signed GRUB has TFTP built in but no HTTP, and loads no module under Secure Boot,
// so the kernel and initramfs come over TFTP too. The initramfs is not verified by the chain
// (docs/boot.md, "Secure Boot").
const (
	// ArtifactShim and ArtifactGRUB are in Config.ProbeDir: make probe-image copies them from
	// the pinned shim-signed and grub-efi-amd64-signed packages, signatures intact.
	ArtifactShim = dhcp.FileShim
	ArtifactGRUB = "grubx64.efi"
	// grubConfig is what Debian's network GRUB reads first: its prefix is /grub on the TFTP
	// server it was loaded from. It asks for grub/x86_64-efi/grub.cfg before it, which is not
	// served.
	grubConfig = "grub/grub.cfg"
	// grubBootPrefix starts the name of a NIC's boot configuration: grub/boot-<mac>.cfg.
	grubBootPrefix = "grub/boot-"
)

// grubConfigBody sends GRUB on to the configuration of the NIC it booted from ($net_default_mac,
// lower-case colon-separated, as net.HardwareAddr prints it).
const grubConfigBody = `# Ironfleet boot service: the configuration of the NIC this GRUB booted from.
set timeout=0
configfile $prefix/boot-${net_default_mac}.cfg
echo "Ironfleet boot service: no boot configuration for ${net_default_mac}; booting the next device"
exit 1
`

// secureBoot says whether server boots with Secure Boot enforced: it gets the signed chain.
func secureBoot(server *metalv1alpha1.Server) bool {
	return server.EffectiveBootMode() == metalv1alpha1.BootModeUEFISecureBoot
}

// tftpOpener is what TFTP serves: the iPXE binaries, the signed chain and the probe's kernel
// and initramfs (the same for every boot: no secret), GRUB's configuration, and each NIC's
// boot configuration, which binds the boot to the asking host as its iPXE script does.
func (s *Service) tftpOpener() tftp.Opener {
	ipxe := tftp.Dir(s.cfg.IPXEDir, IPXEBinaries...)
	probe := tftp.Dir(s.cfg.ProbeDir, ArtifactShim, ArtifactGRUB, ArtifactKernel, ArtifactInitramfs)
	return func(ctx context.Context, name string, from netip.Addr) (io.ReadCloser, int64, error) {
		switch {
		case slices.Contains(IPXEBinaries, name):
			return ipxe(ctx, name, from)
		case name == grubConfig:
			return text(grubConfigBody)
		case strings.HasPrefix(name, grubBootPrefix) && strings.HasSuffix(name, ".cfg"):
			mac, err := net.ParseMAC(strings.TrimSuffix(strings.TrimPrefix(name, grubBootPrefix), ".cfg"))
			if err != nil || len(mac) != 6 {
				return nil, 0, tftp.ErrNotServed
			}
			body, err := s.grubBootConfig(ctx, mac, from)
			if err != nil {
				return nil, 0, err
			}
			return text(body)
		}
		return probe(ctx, name, from)
	}
}

func text(body string) (io.ReadCloser, int64, error) {
	return io.NopCloser(strings.NewReader(body)), int64(len(body)), nil
}

// grubBootConfig is the GRUB configuration of a NIC, asked for by the host at from: the boot
// of its server, as serveScript gives iPXE, or, with nothing to boot, one that says so and
// hands back to the firmware. It holds no secret; fetching it binds the boot to from (admit).
func (s *Service) grubBootConfig(ctx context.Context, mac net.HardwareAddr, from netip.Addr) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	none := fmt.Sprintf("echo \"Ironfleet boot service: no Ready boot configuration for %s; booting the next device\"\nexit 1\n", mac)
	t, err := s.targetByMAC(ctx, mac)
	if err != nil {
		return "", err
	}
	if t == nil {
		return none, nil
	}
	fresh, err := s.bootByID(ctx, s.tokens.id(t.sbc))
	if err != nil {
		return "", err
	}
	if fresh == nil {
		return none, nil
	}
	switch status := s.admitAddr(ctx, fresh, from, fetchScript); status {
	case 0:
	case http.StatusNotFound:
		return none, nil
	case http.StatusForbidden:
		return "", fmt.Errorf("%w: %s is not the host of server %s's boot", tftp.ErrDenied, from, t.server.Name)
	default:
		return "", fmt.Errorf("recording who boot %s was served to failed (HTTP status %d)", fresh.sbc.Name, status)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "echo \"Ironfleet: booting the metalprobe (%s) for server %s over the signed chain\"\n", strings.ToLower(string(fresh.sbc.Spec.Purpose)), t.server.Name)
	fmt.Fprintf(&b, "linux /%s %s\ninitrd /%s\nboot\n", ArtifactKernel, s.probeKernelArgs(fresh, bootIfOf(mac)), ArtifactInitramfs)
	s.events.Eventf(fresh.sbc, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonScriptServed, "Boot", "GRUB configuration served to %s (%s) for server %s", mac, from, t.server.Name)
	return b.String(), nil
}

// bootIfOf is the BOOTIF= value of a NIC: 01 (Ethernet), then the MAC with hyphens.
func bootIfOf(mac net.HardwareAddr) string {
	return "01-" + strings.ReplaceAll(mac.String(), ":", "-")
}

// probeKernelArgs is the probe's kernel command line for boot t from the NIC bootIf (whatever
// loads the kernel: iPXE or GRUB): the serial console, the boot's ignition URL by its public
// id, and the NIC.
func (s *Service) probeKernelArgs(t *target, bootIf string) string {
	return fmt.Sprintf("console=ttyS0,115200 quiet %s=%s%s%s %s=%s",
		ignition.KernelArgIgnition, s.cfg.PublicURL, ignition.IgnitionPathPrefix, s.tokens.id(t.sbc), ignition.KernelArgBootIf, bootIf)
}

// signedChainFiles are the files a Secure Boot network boot needs besides the probe's kernel
// and initramfs.
func (s *Service) signedChainFiles() []string {
	return []string{filepath.Join(s.cfg.ProbeDir, ArtifactShim), filepath.Join(s.cfg.ProbeDir, ArtifactGRUB)}
}
