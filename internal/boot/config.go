package boot

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
)

// Artifacts the probe boots from, in Config.ProbeDir.
const (
	ArtifactKernel    = "vmlinuz"
	ArtifactInitramfs = "initramfs.cpio.gz"
)

// IPXEBinaries are the iPXE builds served by TFTP, from Config.IPXEDir (Debian's ipxe package
// installs them in /usr/lib/ipxe).
var IPXEBinaries = []string{dhcp.FileBIOS, dhcp.FileEFI, dhcp.FileEFISNPOnly}

// MinURLKeyBytes is the shortest key accepted for the per-boot URL tokens.
const MinURLKeyBytes = 32

// DefaultFirmwareMaxBytes is Config.FirmwareMaxBytes's default: 4 GiB.
const DefaultFirmwareMaxBytes = 4 << 30

// Config is what the boot service serves and how. Validate names the field that is wrong.
type Config struct {
	// Mode is dhcp.ModeProxy (next to the site's DHCP server), dhcp.ModeFull (a dedicated
	// provisioning network where this service leases the addresses) or dhcp.ModeOff (no DHCP
	// at all: servers boot the probe from virtual media; TFTP and HTTP still serve).
	Mode dhcp.Mode
	// Interface is the provisioning network's interface: OpenListeners binds the DHCP sockets
	// to it. Only OpenListeners needs it, and not in ModeOff.
	Interface string
	// ServerIP is this host's address on the provisioning network: next-server (TFTP) and DHCP
	// server identifier.
	ServerIP netip.Addr
	// PublicURL is the base of every URL handed to a booting host (iPXE script, kernel,
	// initramfs, per-boot URL): http://<ServerIP>:<port> as hosts reach it. Empty: derived from
	// ServerIP and the port of HTTPBindAddress.
	PublicURL string

	// DHCPRangeStart..DHCPRangeEnd (inclusive), SubnetMask, Router and LeaseTime: full mode.
	DHCPRangeStart, DHCPRangeEnd netip.Addr
	SubnetMask                   netip.Addr // a dotted mask such as 255.255.255.0
	Router                       netip.Addr // optional
	LeaseTime                    time.Duration
	// EFIBootFile is what EFI PXE clients load: snponly.efi (default; it drives the NIC the
	// firmware booted from through the firmware's own driver, so it works on any NIC the
	// firmware supports) or ipxe.efi (iPXE's own NIC drivers).
	EFIBootFile string

	// ProbeDir holds the probe's vmlinuz and initramfs.cpio.gz, and for virtual-media boots its
	// template ISO (bootmedia.ISOFile and bootmedia.ManifestFile, loaded once by New); IPXEDir
	// the iPXE binaries.
	ProbeDir string
	IPXEDir  string

	// HTTPBindAddress and TFTPBindAddress are what OpenListeners listens on.
	HTTPBindAddress string
	TFTPBindAddress string

	// MediaURL is the base of the ISO URLs handed to BMCs for virtual-media boots
	// (<MediaURL>/boot/<token>/probe.iso), as BMCs reach this service: their network often
	// differs from the hosts' (Ironic's external_http_url). http or https (behind a proxy that
	// terminates TLS). Empty: http://<MediaBindAddress> when that names a host and a port,
	// else PublicURL.
	MediaURL string
	// MediaBindAddress, when set, is a second HTTP listener (Listeners.Media, opened by
	// OpenMediaListener, not by OpenListeners) serving the same handler, e.g. on the BMC
	// network.
	MediaBindAddress string

	// URLKey signs the per-boot URLs (at least MinURLKeyBytes). It must survive restarts, or
	// a host booting across a restart is refused its ignition: see LoadURLKeyFile and
	// LoadOrCreateURLKey.
	URLKey []byte

	// FirmwareCacheDir is where firmware images served for BMCs (firmware.go) are downloaded
	// to, one file per image Secret, checked, then served; the service removes what it does
	// not serve (at start too), so it must be a directory of its own. Default:
	// <os.TempDir()>/<Name>-firmware. The shipped Deployment mounts an emptyDir there (its root
	// file system is read-only).
	FirmwareCacheDir string
	// FirmwareMaxBytes bounds an image's size (default 4 GiB); FirmwareFetchTimeout its
	// download from the origin (default 30 minutes).
	FirmwareMaxBytes     int64
	FirmwareFetchTimeout time.Duration

	// ServerFilter picks the Servers this service boots (nil: all). The boot configurations of
	// other Servers are left alone: not reconciled, not served.
	ServerFilter func(*metalv1alpha1.Server) bool
	// BootOperator is the name this service answers to: it serves only the boot
	// configurations whose metal.ironfleet.dev/boot-operator label names it (one without the
	// label is Ironfleet's). Default "ironfleet", the manager's default --boot-operator.
	BootOperator string
	// Namespace, when set, is the only namespace whose boot configurations are served. Full
	// mode needs it: its leases are kept in ConfigMap LeaseConfigMap there.
	Namespace string
	// RecheckInterval is how often a boot configuration waiting for a file on disk (a missing
	// artifact) is checked again. Kubernetes objects it waits for are watched instead.
	RecheckInterval time.Duration
	// Name names the controller and the event source (default "ironfleet-boot-service").
	Name string
}

// ConfigError is a Config field that is wrong; the binary maps Field to its flag.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "boot service config " + e.Field + ": " + e.Problem }

func fieldError(field, format string, args ...any) error {
	return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// withDefaults fills what has a default.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = dhcp.ModeProxy
	}
	if c.BootOperator == "" {
		c.BootOperator = metalv1alpha1.BootOperatorIronfleet
	}
	if c.IPXEDir == "" {
		c.IPXEDir = "/usr/lib/ipxe"
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = time.Hour
	}
	if c.EFIBootFile == "" {
		c.EFIBootFile = dhcp.FileEFISNPOnly
	}
	if c.RecheckInterval == 0 {
		c.RecheckInterval = 30 * time.Second
	}
	if c.Name == "" {
		c.Name = "ironfleet-boot-service"
	}
	if c.FirmwareCacheDir == "" {
		c.FirmwareCacheDir = filepath.Join(os.TempDir(), c.Name+"-firmware")
	}
	if c.FirmwareMaxBytes == 0 {
		c.FirmwareMaxBytes = DefaultFirmwareMaxBytes
	}
	if c.FirmwareFetchTimeout == 0 {
		c.FirmwareFetchTimeout = 30 * time.Minute
	}
	if c.HTTPBindAddress == "" && c.ServerIP.IsValid() {
		c.HTTPBindAddress = net.JoinHostPort(c.ServerIP.String(), "8080")
	}
	if c.TFTPBindAddress == "" && c.ServerIP.IsValid() {
		c.TFTPBindAddress = net.JoinHostPort(c.ServerIP.String(), "69")
	}
	if c.PublicURL == "" && c.ServerIP.IsValid() {
		if _, port, err := net.SplitHostPort(c.HTTPBindAddress); err == nil && port != "" && port != "0" {
			c.PublicURL = "http://" + net.JoinHostPort(c.ServerIP.String(), port)
		}
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.MediaURL == "" && c.MediaBindAddress != "" {
		if host, port, err := net.SplitHostPort(c.MediaBindAddress); err == nil && port != "" && port != "0" {
			if ip, err := netip.ParseAddr(host); err == nil && !ip.IsUnspecified() {
				c.MediaURL = "http://" + c.MediaBindAddress
			}
		}
	}
	if c.MediaURL == "" {
		c.MediaURL = c.PublicURL
	}
	c.MediaURL = strings.TrimRight(c.MediaURL, "/")
	return c
}

// Validate says what is wrong, naming the field. It checks a config with defaults applied.
func (c Config) Validate() error {
	switch c.Mode {
	case dhcp.ModeProxy, dhcp.ModeFull, dhcp.ModeOff:
	default:
		return fieldError("Mode", "%q is not %q, %q or %q", c.Mode, dhcp.ModeProxy, dhcp.ModeFull, dhcp.ModeOff)
	}
	if !c.ServerIP.Is4() || c.ServerIP.IsUnspecified() {
		return fieldError("ServerIP", "want this host's IPv4 address on the provisioning network, got %q", addrString(c.ServerIP))
	}
	u, err := url.Parse(c.PublicURL)
	if c.PublicURL == "" || err != nil || u.Scheme != "http" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		// http only: Debian's iPXE has no HTTPS (docs/boot.md, Security).
		return fieldError("PublicURL", "want an http://host:port URL hosts reach this service at, got %q", c.PublicURL)
	}
	m, err := url.Parse(c.MediaURL)
	if err != nil || (m.Scheme != "http" && m.Scheme != "https") || m.Host == "" || m.RawQuery != "" || m.Fragment != "" {
		return fieldError("MediaURL", "want an http(s)://host:port URL BMCs reach this service at, got %q", c.MediaURL)
	}
	if c.MediaBindAddress != "" {
		if _, _, err := net.SplitHostPort(c.MediaBindAddress); err != nil {
			return fieldError("MediaBindAddress", "want host:port, got %q", c.MediaBindAddress)
		}
	}
	if c.Mode == dhcp.ModeFull {
		if err := c.validateRange(); err != nil {
			return err
		}
		if c.Namespace == "" {
			return fieldError("Namespace", "required in full mode: the leases are kept in ConfigMap %s there", LeaseConfigMap)
		}
	}
	if c.LeaseTime < time.Minute {
		return fieldError("LeaseTime", "%s is shorter than a minute", c.LeaseTime)
	}
	if c.EFIBootFile != dhcp.FileEFI && c.EFIBootFile != dhcp.FileEFISNPOnly {
		return fieldError("EFIBootFile", "%q is not %s or %s", c.EFIBootFile, dhcp.FileEFISNPOnly, dhcp.FileEFI)
	}
	if c.ProbeDir == "" {
		return fieldError("ProbeDir", "required: the directory holding the probe's %s and %s", ArtifactKernel, ArtifactInitramfs)
	}
	if len(c.URLKey) < MinURLKeyBytes {
		return fieldError("URLKey", "%d bytes, want at least %d", len(c.URLKey), MinURLKeyBytes)
	}
	if c.RecheckInterval < 0 {
		return fieldError("RecheckInterval", "negative")
	}
	if !filepath.IsAbs(c.FirmwareCacheDir) {
		return fieldError("FirmwareCacheDir", "want an absolute path, got %q", c.FirmwareCacheDir)
	}
	if c.FirmwareMaxBytes < 0 {
		return fieldError("FirmwareMaxBytes", "negative")
	}
	if c.FirmwareFetchTimeout < 0 {
		return fieldError("FirmwareFetchTimeout", "negative")
	}
	return nil
}

func (c Config) validateRange() error {
	if !c.DHCPRangeStart.Is4() || !c.DHCPRangeEnd.Is4() {
		return fieldError("DHCPRange", "full mode needs a range of IPv4 addresses to lease")
	}
	if c.DHCPRangeEnd.Less(c.DHCPRangeStart) {
		return fieldError("DHCPRange", "%s is after %s", c.DHCPRangeStart, c.DHCPRangeEnd)
	}
	if n := ipv4Uint(c.DHCPRangeEnd) - ipv4Uint(c.DHCPRangeStart) + 1; n > MaxLeaseRange {
		return fieldError("DHCPRange", "%d addresses, more than the %d whose leases fit the ConfigMap they are kept in", n, MaxLeaseRange)
	}
	mask, err := c.mask()
	if err != nil {
		return err
	}
	bits, _ := mask.Size()
	subnet := netip.PrefixFrom(c.ServerIP, bits).Masked()
	for _, a := range []netip.Addr{c.DHCPRangeStart, c.DHCPRangeEnd} {
		if !subnet.Contains(a) {
			return fieldError("DHCPRange", "%s is not in this host's subnet %s (ServerIP and SubnetMask)", a, subnet)
		}
	}
	if c.DHCPRangeStart == c.DHCPRangeEnd && c.DHCPRangeStart == c.ServerIP {
		return fieldError("DHCPRange", "holds only the server's own address")
	}
	if c.Router.IsValid() && (!c.Router.Is4() || !subnet.Contains(c.Router)) {
		return fieldError("Router", "%s is not in this host's subnet %s", c.Router, subnet)
	}
	return nil
}

// mask is SubnetMask as a net.IPMask; it must be contiguous.
func (c Config) mask() (net.IPMask, error) {
	if !c.SubnetMask.Is4() {
		return nil, fieldError("SubnetMask", "full mode needs a subnet mask such as 255.255.255.0")
	}
	m := net.IPMask(c.SubnetMask.AsSlice())
	if ones, bits := m.Size(); bits == 0 || ones == 0 {
		return nil, fieldError("SubnetMask", "%s is not a contiguous mask", c.SubnetMask)
	}
	return m, nil
}

func ipv4Uint(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}
