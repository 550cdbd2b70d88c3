// Package dhcp is the boot service's DHCP server: proxyDHCP next to a site's own DHCP server,
// or a full DHCP server on a dedicated provisioning network. It answers only the MACs of
// servers the boot service has a Ready boot configuration for, and hands each the first stage
// of the chain: an iPXE binary over TFTP, then (once iPXE runs) the URL of its iPXE script.
//
// The packet logic is a pure function of a request and a lookup (Handler.Handle): the socket
// loop in server.go only reads, calls it and sends, so every decision is testable without
// sockets and fuzzable.
package dhcp

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// Mode is how the DHCP server shares the network.
type Mode string

const (
	// ModeProxy answers PXE and iPXE clients with boot information only (no address), next to
	// the site's DHCP server, which leases the addresses.
	ModeProxy Mode = "proxy"
	// ModeFull leases addresses from a range as well: a dedicated provisioning network.
	ModeFull Mode = "full"
	// ModeOff answers no DHCP at all: no DHCP socket is opened (a network without DHCP or PXE,
	// whose servers boot the probe from virtual media). A Handler in this mode ignores every
	// packet (IgnoredOff).
	ModeOff Mode = "off"
)

// Port says where a request arrived: the DHCP port, or the PXE boot-server port 4011 where a
// PXE client (or iPXE) sends a ProxyDHCP REQUEST.
type Port int

const (
	PortDHCP Port = 67
	PortPXE  Port = 4011
)

// Reason says why a packet was ignored. Each is a metric label.
type Reason string

const (
	IgnoredMalformed   Reason = "malformed"        // not a DHCP request from an Ethernet client
	IgnoredUnknownMAC  Reason = "unknown_mac"      // not a server with a Ready boot configuration
	IgnoredNotPXE      Reason = "not_pxe"          // proxy mode: neither PXE, nor HTTP boot, nor iPXE
	IgnoredArch        Reason = "unsupported_arch" // a PXE client of an architecture with no iPXE binary here
	IgnoredNotForUs    Reason = "not_for_us"       // a REQUEST to another server
	IgnoredMessageType Reason = "unsupported_message"
	IgnoredNoAddress   Reason = "no_free_address" // full mode: the range is exhausted
	IgnoredReleased    Reason = "released"        // a RELEASE or DECLINE: recorded, nothing to answer
	IgnoredDecline     Reason = "decline_refused" // full mode: a DECLINE outside its lease's exchange (leases.go)
	IgnoredOff         Reason = "dhcp_off"        // ModeOff: this service answers no DHCP
	// IgnoredHTTPSecureBoot: a UEFI HTTP boot client of a server booting with Secure Boot.
	// Debian's signed GRUB has no HTTP: such a server boots the signed chain by PXE (TFTP).
	IgnoredHTTPSecureBoot Reason = "http_boot_secure_boot"
	// IgnoredAddressOnly: proxy mode, a client whose firmware boots a URI its BMC set: it needs
	// an address only, which the site's DHCP gives.
	IgnoredAddressOnly Reason = "uri_boot"
)

// Boot files the chain starts with, served by TFTP.
const (
	FileBIOS       = "undionly.kpxe"
	FileEFI        = "ipxe.efi"
	FileEFISNPOnly = "snponly.efi"
	// FileShim starts the signed chain of x86-64 UEFI servers booting with Secure Boot: shim,
	// then GRUB and the kernel (Debian's, signed), all over TFTP.
	FileShim = "shimx64.efi"
)

// DHCP options the library has no names for.
const (
	optionPXEVendor  = 43  // PXE vendor-encapsulated options (sub-option 6: discovery control)
	optionClientUUID = 97  // the client's machine identifier, echoed to PXE clients
	optionIPXE       = 175 // iPXE's encapsulated options; its presence in a request means iPXE
	ipxeNoPXEDHCP    = 176 // inside 175: 1 = do not wait for ProxyDHCP offers
)

// Config is what the handler answers with.
type Config struct {
	Mode Mode
	// ServerIP is this server on the provisioning network: next-server and server identifier.
	ServerIP netip.Addr
	// ScriptURL is the iPXE script URL of a MAC: what iPXE is told to chain.
	ScriptURL func(mac net.HardwareAddr) string
	// LoaderURL is the HTTP URL of a loader (FileEFISNPOnly, FileEFI): what a UEFI HTTP boot
	// client is told to load.
	LoaderURL func(file string) string
	// EFIBootFile is what EFI PXE clients get: FileEFISNPOnly (default) or FileEFI.
	EFIBootFile string
	// Full mode only.
	SubnetMask net.IPMask
	Router     netip.Addr // zero: no router option
	LeaseTime  time.Duration
}

// Handler decides how to answer one request.
type Handler struct {
	Config Config
	// Lookup finds the boot of the server whose NIC has mac: false when it has no Ready boot
	// configuration (the request is ignored). It is called once per request.
	Lookup func(mac net.HardwareAddr) (Boot, bool)
	// Leases hands out addresses in full mode (nil in proxy mode).
	Leases *LeaseTable
}

// Boot is what the handler needs to know of a known client's boot.
type Boot struct {
	// SecureBoot: the server boots with Secure Boot enforced; its x86-64 UEFI PXE ROM gets
	// FileShim instead of iPXE, which such firmware refuses to run, and its UEFI HTTP boot
	// client no answer.
	SecureBoot bool
	// AddressOnly: the server's firmware boots a URI its BMC set (bootMethod UefiHttp); its
	// requests get an address and no boot file in full mode, and no answer in proxy mode (the
	// site's DHCP gives it its address).
	AddressOnly bool
}

// Decision is the answer to one request: a reply, or the reason it was ignored (and, for a
// reason worth a log line, what happened).
type Decision struct {
	Reply   *dhcpv4.DHCPv4
	Ignored Reason
	Detail  string
}

// client is what a request says about its sender.
type client struct {
	mac      net.HardwareAddr
	pxe      bool // option 60 starts with PXEClient
	http     bool // option 60 starts with HTTPClient: UEFI HTTP boot
	ipxe     bool // user class iPXE, or option 175
	arch     iana.Arch
	hasArch  bool
	msgType  dhcpv4.MessageType
	request  *dhcpv4.DHCPv4
	onPXEPrt bool
	boot     Boot // the server's, from Lookup
}

// Handle decodes a packet that arrived on port and decides the answer. It never panics on any
// input; a packet it cannot read is ignored as malformed.
func (h *Handler) Handle(packet []byte, port Port) Decision {
	req, err := dhcpv4.FromBytes(packet)
	if err != nil {
		return ignore(IgnoredMalformed)
	}
	return h.HandleRequest(req, port)
}

// HandleRequest is Handle for a decoded request.
func (h *Handler) HandleRequest(req *dhcpv4.DHCPv4, port Port) Decision {
	if h.Config.Mode != ModeProxy && h.Config.Mode != ModeFull {
		return ignore(IgnoredOff)
	}
	c, ok := classify(req, port)
	if !ok {
		return ignore(IgnoredMalformed)
	}
	switch c.msgType {
	case dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline:
	default:
		return ignore(IgnoredMessageType)
	}
	if h.Config.Mode == ModeProxy && !c.pxe && !c.ipxe && !c.http {
		return ignore(IgnoredNotPXE)
	}
	if h.Lookup == nil {
		return ignore(IgnoredUnknownMAC)
	}
	if c.boot, ok = h.Lookup(c.mac); !ok {
		return ignore(IgnoredUnknownMAC)
	}
	if h.Config.Mode == ModeFull {
		return h.full(c)
	}
	return h.proxy(c)
}

// classify reads what the handler needs from a request; false means it is not a request a DHCP
// server should read (a reply, not Ethernet, no message type).
func classify(req *dhcpv4.DHCPv4, port Port) (client, bool) {
	if req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6 {
		return client{}, false
	}
	mt := req.MessageType()
	if mt == dhcpv4.MessageTypeNone {
		return client{}, false
	}
	c := client{mac: req.ClientHWAddr, msgType: mt, request: req, onPXEPrt: port == PortPXE}
	c.pxe = strings.HasPrefix(req.ClassIdentifier(), "PXEClient")
	c.http = strings.HasPrefix(req.ClassIdentifier(), "HTTPClient")
	c.ipxe = req.Options.Has(dhcpv4.GenericOptionCode(optionIPXE)) || isIPXEUserClass(req.Options.Get(dhcpv4.OptionUserClassInformation))
	if v := req.Options.Get(dhcpv4.OptionClientSystemArchitectureType); len(v) >= 2 {
		c.arch, c.hasArch = iana.Arch(uint16(v[0])<<8|uint16(v[1])), true
	}
	return c, true
}

// isIPXEUserClass accepts the user class iPXE sends (the bare string "iPXE") and its RFC 3004
// spelling (length-prefixed strings).
func isIPXEUserClass(v []byte) bool {
	if bytes.Equal(v, []byte("iPXE")) {
		return true
	}
	for len(v) > 0 {
		n := int(v[0])
		if n == 0 || n+1 > len(v) {
			return false
		}
		if string(v[1:1+n]) == "iPXE" {
			return true
		}
		v = v[1+n:]
	}
	return false
}

// bootFile is what the client should load next; "" when it is not a network-boot client (a
// plain DHCP client such as the probe's /init). False: an architecture with no loader here.
func (h *Handler) bootFile(c client) (string, bool) {
	switch {
	case c.boot.AddressOnly:
		return "", true
	case c.ipxe:
		return h.Config.ScriptURL(c.mac), true
	case c.http:
		// UEFI HTTP boot: iPXE over HTTP, which then asks DHCP for its script as any iPXE;
		// no TFTP on the way. x86 only (ARM64, 19, comes with the arm64 probe).
		if !c.hasArch || (c.arch != iana.EFI_X86_64_HTTP && c.arch != iana.EFI_X86_HTTP) || h.Config.LoaderURL == nil {
			return "", false
		}
		file := FileEFISNPOnly
		if h.Config.EFIBootFile != "" {
			file = h.Config.EFIBootFile
		}
		return h.Config.LoaderURL(file), true
	case !c.pxe:
		return "", true
	case !c.hasArch || c.arch == iana.INTEL_X86PC:
		return FileBIOS, true
	case c.arch == iana.EFI_IA32 || c.arch == iana.EFI_X86_64 || c.arch == iana.EFI_BC:
		// EFI_BC (7) is what x86-64 firmware sends, EFI_X86_64 (9) its old spelling; there is no
		// signed shim for 32-bit UEFI.
		if c.arch != iana.EFI_IA32 && c.boot.SecureBoot {
			return FileShim, true
		}
		if h.Config.EFIBootFile != "" {
			return h.Config.EFIBootFile, true
		}
		return FileEFISNPOnly, true
	}
	return "", false
}

// httpUnderSecureBoot: a UEFI HTTP boot client whose server boots with Secure Boot gets no
// answer (its firmware goes on to PXE, where it gets the signed chain).
func (h *Handler) httpUnderSecureBoot(c client) bool {
	return c.http && !c.ipxe && !c.boot.AddressOnly && c.boot.SecureBoot
}

// proxy answers as a ProxyDHCP server: no address, the boot file, and the PXE options that
// tell the client to use it without a boot-server discovery (for HTTP boot clients, option 60
// HTTPClient and the URL).
func (h *Handler) proxy(c client) Decision {
	if c.boot.AddressOnly {
		return ignore(IgnoredAddressOnly)
	}
	if h.httpUnderSecureBoot(c) {
		return ignore(IgnoredHTTPSecureBoot)
	}
	file, ok := h.bootFile(c)
	if !ok {
		return ignore(IgnoredArch)
	}
	var reply dhcpv4.MessageType
	switch c.msgType {
	case dhcpv4.MessageTypeDiscover:
		if c.onPXEPrt {
			return ignore(IgnoredMessageType)
		}
		reply = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		// On port 67 a REQUEST is the client taking the site server's offer, unless it names us.
		if !c.onPXEPrt && !h.namesUs(c.request) {
			return ignore(IgnoredNotForUs)
		}
		reply = dhcpv4.MessageTypeAck
	default:
		return ignore(IgnoredReleased)
	}
	m := h.newReply(c, reply)
	m.YourIPAddr = net.IPv4zero
	if c.http {
		m.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient"))
	} else {
		m.UpdateOption(dhcpv4.OptClassIdentifier("PXEClient"))
		// Discovery control (sub-option 6) = 8: boot the file in this offer, no boot-server
		// discovery (PXE 2.1, 2.4.6).
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optionPXEVendor), []byte{6, 1, 8, 255}))
	}
	if uuid := c.request.Options.Get(dhcpv4.GenericOptionCode(optionClientUUID)); len(uuid) > 0 {
		m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optionClientUUID), uuid))
	}
	h.setBootFile(m, file)
	return Decision{Reply: m}
}

// full answers as the network's DHCP server: an address from the range, and the boot file for
// network-boot clients.
func (h *Handler) full(c client) Decision {
	if c.onPXEPrt {
		return ignore(IgnoredMessageType)
	}
	if h.httpUnderSecureBoot(c) {
		return ignore(IgnoredHTTPSecureBoot)
	}
	file, ok := h.bootFile(c)
	if !ok {
		return ignore(IgnoredArch)
	}
	req := c.request
	switch c.msgType {
	case dhcpv4.MessageTypeRelease:
		h.Leases.Release(c.mac, addrOf(req.ClientIPAddr))
		return ignore(IgnoredReleased)
	case dhcpv4.MessageTypeDecline:
		if err := h.Leases.Decline(c.mac, addrOf(req.RequestedIPAddress())); err != nil {
			return Decision{Ignored: IgnoredDecline, Detail: "DECLINE ignored: " + err.Error()}
		}
		return ignore(IgnoredReleased)
	case dhcpv4.MessageTypeDiscover:
		ip, ok := h.Leases.Offer(c.mac, addrOf(req.RequestedIPAddress()))
		if !ok {
			return ignore(IgnoredNoAddress)
		}
		m := h.addressReply(c, dhcpv4.MessageTypeOffer, ip)
		h.setBootFile(m, file)
		if c.http && file != "" {
			m.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient")) // EDK II takes a URL only with it
		}
		return Decision{Reply: m}
	}
	// REQUEST: selecting (names a server), init-reboot (option 50), renewing (ciaddr).
	if sid := req.ServerIdentifier(); sid != nil && !h.namesUs(req) {
		h.Leases.Release(c.mac, netip.Addr{})
		return ignore(IgnoredNotForUs)
	}
	ip := addrOf(req.RequestedIPAddress())
	if !ip.IsValid() {
		ip = addrOf(req.ClientIPAddr)
	}
	if !ip.IsValid() || !h.Leases.Commit(c.mac, ip) {
		m := h.newReply(c, dhcpv4.MessageTypeNak)
		m.YourIPAddr = net.IPv4zero
		return Decision{Reply: m}
	}
	m := h.addressReply(c, dhcpv4.MessageTypeAck, ip)
	h.setBootFile(m, file)
	if c.http && file != "" {
		m.UpdateOption(dhcpv4.OptClassIdentifier("HTTPClient"))
	}
	return Decision{Reply: m}
}

func (h *Handler) addressReply(c client, t dhcpv4.MessageType, ip netip.Addr) *dhcpv4.DHCPv4 {
	m := h.newReply(c, t)
	m.YourIPAddr = net.IP(ip.AsSlice())
	m.UpdateOption(dhcpv4.OptSubnetMask(h.Config.SubnetMask))
	if h.Config.Router.IsValid() {
		m.UpdateOption(dhcpv4.OptRouter(net.IP(h.Config.Router.AsSlice())))
	}
	m.UpdateOption(dhcpv4.OptIPAddressLeaseTime(h.Config.LeaseTime))
	return m
}

// newReply is a reply of type t with what every reply carries.
func (h *Handler) newReply(c client, t dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	req := c.request
	server := net.IP(h.Config.ServerIP.AsSlice())
	m := &dhcpv4.DHCPv4{
		OpCode: dhcpv4.OpcodeBootReply, HWType: req.HWType, TransactionID: req.TransactionID,
		Flags: req.Flags, ClientHWAddr: req.ClientHWAddr,
		ClientIPAddr: req.ClientIPAddr, YourIPAddr: net.IPv4zero, ServerIPAddr: server,
		GatewayIPAddr: req.GatewayIPAddr, Options: dhcpv4.Options{},
	}
	if m.ClientIPAddr == nil {
		m.ClientIPAddr = net.IPv4zero
	}
	if m.GatewayIPAddr == nil {
		m.GatewayIPAddr = net.IPv4zero
	}
	m.UpdateOption(dhcpv4.OptMessageType(t))
	m.UpdateOption(dhcpv4.OptServerIdentifier(server))
	for _, copied := range []dhcpv4.OptionCode{dhcpv4.OptionRelayAgentInformation, dhcpv4.OptionClientIdentifier} {
		if v := req.Options.Get(copied); v != nil {
			m.UpdateOption(dhcpv4.OptGeneric(copied, v))
		}
	}
	return m
}

// setBootFile puts the boot file in the reply; for iPXE it also says not to wait for ProxyDHCP
// offers (option 175.176 = 1), which saves iPXE seconds per boot.
func (h *Handler) setBootFile(m *dhcpv4.DHCPv4, file string) {
	if file == "" {
		return
	}
	m.UpdateOption(dhcpv4.OptGeneric(dhcpv4.GenericOptionCode(optionIPXE), []byte{ipxeNoPXEDHCP, 1, 1}))
	m.BootFileName = file
	m.UpdateOption(dhcpv4.OptBootFileName(file))
	if !strings.Contains(file, "://") {
		m.UpdateOption(dhcpv4.OptTFTPServerName(h.Config.ServerIP.String()))
	}
}

func (h *Handler) namesUs(req *dhcpv4.DHCPv4) bool {
	sid := addrOf(req.ServerIdentifier())
	return sid.IsValid() && sid == h.Config.ServerIP
}

func addrOf(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok || a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

func ignore(r Reason) Decision { return Decision{Ignored: r} }
