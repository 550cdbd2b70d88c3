package dhcp

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	serverIP   = netip.MustParseAddr("10.20.0.1")
	knownMAC   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x01}
	otherMAC   = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x02}
	unknownMAC = net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x99}
	rangeStart = netip.MustParseAddr("10.20.0.100")
	rangeEnd   = netip.MustParseAddr("10.20.0.199")
)

const pxeVendorClass = "PXEClient:Arch:00000:UNDI:002001"

func scriptURL(mac net.HardwareAddr) string { return "http://10.20.0.1:8080/ipxe/" + mac.String() }

func known(mac net.HardwareAddr) bool {
	return mac.String() == knownMAC.String() || mac.String() == otherMAC.String()
}

// lookupOf is a Lookup that knows the MACs known says, each with the boot of.
func lookupOf(known func(net.HardwareAddr) bool, of func(net.HardwareAddr) Boot) func(net.HardwareAddr) (Boot, bool) {
	return func(mac net.HardwareAddr) (Boot, bool) {
		if !known(mac) {
			return Boot{}, false
		}
		return of(mac), true
	}
}

func plainBoot(net.HardwareAddr) Boot { return Boot{} }

func newHandler(mode Mode) *Handler {
	h := &Handler{
		Config: Config{Mode: mode, ServerIP: serverIP, ScriptURL: scriptURL, LoaderURL: func(f string) string { return "http://10.20.0.1:8080/loaders/" + f },
			SubnetMask: net.CIDRMask(24, 32), Router: netip.MustParseAddr("10.20.0.254"), LeaseTime: time.Hour},
		Lookup: lookupOf(known, plainBoot),
	}
	if mode == ModeFull {
		h.Leases = NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, nil)
	}
	return h
}

func discover(t *testing.T, mac net.HardwareAddr, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	m, err := dhcpv4.NewDiscovery(mac, mods...)
	require.NoError(t, err)
	return m
}

func pxe(arch iana.Arch) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(pxeVendorClass)),
		dhcpv4.WithOption(dhcpv4.OptClientArch(arch)),
	}
}

func ipxeClient() []dhcpv4.Modifier {
	return append(pxe(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", false))
}

// handle runs a request through the wire format, as the server does.
func handle(h *Handler, m *dhcpv4.DHCPv4, port Port) Decision {
	return h.Handle(m.ToBytes(), port)
}

func requireReply(t *testing.T, d Decision, want dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	t.Helper()
	require.NotNil(t, d.Reply, "ignored: %s", d.Ignored)
	require.Equal(t, want, d.Reply.MessageType())
	// What is sent must read back as the same reply.
	back, err := dhcpv4.FromBytes(d.Reply.ToBytes())
	require.NoError(t, err)
	return back
}

func TestProxyBIOSPXEGetsUndionly(t *testing.T) {
	h := newHandler(ModeProxy)
	req := discover(t, knownMAC, append(pxe(iana.INTEL_X86PC),
		dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optionClientUUID), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}))...)
	r := requireReply(t, handle(h, req, PortDHCP), dhcpv4.MessageTypeOffer)
	assert.Equal(t, req.TransactionID, r.TransactionID)
	assert.True(t, r.YourIPAddr.IsUnspecified(), "proxyDHCP hands out no address")
	assert.Equal(t, "10.20.0.1", r.ServerIPAddr.String())
	assert.Equal(t, "10.20.0.1", r.ServerIdentifier().String())
	assert.Equal(t, FileBIOS, r.BootFileName)
	assert.Equal(t, FileBIOS, r.BootFileNameOption())
	assert.Equal(t, "PXEClient", r.ClassIdentifier())
	assert.Equal(t, []byte{6, 1, 8, 255}, r.Options.Get(dhcpv4.GenericOptionCode(optionPXEVendor)), "discovery control: boot the offered file")
	assert.Equal(t, req.Options.Get(dhcpv4.GenericOptionCode(optionClientUUID)), r.Options.Get(dhcpv4.GenericOptionCode(optionClientUUID)))
	assert.Nil(t, r.Options.Get(dhcpv4.OptionSubnetMask), "no address, no mask")
}

func TestUEFIPXEGetsAnEFIBinary(t *testing.T) {
	h := newHandler(ModeProxy)
	for _, arch := range []iana.Arch{iana.EFI_X86_64, iana.EFI_BC, iana.EFI_IA32} {
		r := requireReply(t, handle(h, discover(t, knownMAC, pxe(arch)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.Equal(t, FileEFISNPOnly, r.BootFileName, "arch %d", arch)
	}
	h.Config.EFIBootFile = FileEFI
	r := requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.EFI_X86_64)...), PortDHCP), dhcpv4.MessageTypeOffer)
	assert.Equal(t, FileEFI, r.BootFileName)

	d := handle(h, discover(t, knownMAC, pxe(iana.EFI_ARM64)...), PortDHCP)
	assert.Nil(t, d.Reply)
	assert.Equal(t, IgnoredArch, d.Ignored)
}

// TestSecureBootServersGetShim: an x86-64 UEFI PXE ROM of a server booting with Secure Boot
// gets shim (the signed chain) in both modes; the same ROM of another server, and a 32-bit
// UEFI one (no signed shim exists for it), gets iPXE, and BIOS ROMs are unaffected.
func TestSecureBootServersGetShim(t *testing.T) {
	for _, mode := range []Mode{ModeProxy, ModeFull} {
		h := newHandler(mode)
		var asked []string
		h.Lookup = lookupOf(known, func(mac net.HardwareAddr) Boot {
			asked = append(asked, mac.String())
			return Boot{SecureBoot: mac.String() == knownMAC.String()}
		})
		for _, arch := range []iana.Arch{iana.EFI_BC, iana.EFI_X86_64} {
			r := requireReply(t, handle(h, discover(t, knownMAC, pxe(arch)...), PortDHCP), dhcpv4.MessageTypeOffer)
			assert.Equal(t, FileShim, r.BootFileName, "%s arch %d", mode, arch)
		}
		r := requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.EFI_IA32)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.Equal(t, FileEFISNPOnly, r.BootFileName, "%s: 32-bit UEFI", mode)
		r = requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.INTEL_X86PC)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.Equal(t, FileBIOS, r.BootFileName, "%s: BIOS", mode)
		assert.Contains(t, asked, knownMAC.String())

		h.Lookup = lookupOf(known, plainBoot)
		r = requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.EFI_BC)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.Equal(t, FileEFISNPOnly, r.BootFileName, "%s: without Secure Boot", mode)
	}
}

// TestURIBootGetsAnAddressOnly: a server whose firmware boots a URI its BMC set (bootMethod
// UefiHttp) gets, in full mode, an address and nothing to boot — no file, no TFTP server, no
// HTTPClient class, no PXE options — from its HTTP boot client and its PXE ROM alike (Secure
// Boot or not); in proxy mode no answer (the site's DHCP gives the address). Another server
// still gets its loader.
func TestURIBootGetsAnAddressOnly(t *testing.T) {
	httpClient := []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64_HTTP))}
	for _, secure := range []bool{false, true} {
		uri := lookupOf(known, func(mac net.HardwareAddr) Boot {
			return Boot{AddressOnly: mac.String() == knownMAC.String(), SecureBoot: secure}
		})
		h := newHandler(ModeFull)
		h.Lookup = uri
		for _, mods := range [][]dhcpv4.Modifier{httpClient, pxe(iana.EFI_BC), nil} {
			r := requireReply(t, handle(h, discover(t, knownMAC, mods...), PortDHCP), dhcpv4.MessageTypeOffer)
			assert.NotEqual(t, net.IPv4zero.String(), r.YourIPAddr.String(), "an address")
			assert.Empty(t, r.BootFileName, "no boot file")
			assert.False(t, r.Options.Has(dhcpv4.OptionBootfileName), "no option 67")
			assert.Empty(t, r.TFTPServerName(), "no TFTP server")
			assert.Empty(t, r.ClassIdentifier(), "no HTTPClient/PXEClient class")
			assert.Nil(t, r.Options.Get(dhcpv4.GenericOptionCode(optionPXEVendor)), "no PXE options")
		}
		r := requireReply(t, handle(h, discover(t, otherMAC, pxe(iana.EFI_BC)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.NotEmpty(t, r.BootFileName, "another server still gets its loader")

		p := newHandler(ModeProxy)
		p.Lookup = uri
		for _, mods := range [][]dhcpv4.Modifier{httpClient, pxe(iana.EFI_BC)} {
			d := handle(p, discover(t, knownMAC, mods...), PortDHCP)
			assert.Nil(t, d.Reply)
			assert.Equal(t, IgnoredAddressOnly, d.Ignored)
		}
	}
}

// TestUEFIHTTPBootGetsIPXEOverHTTP: a UEFI HTTP boot client (option 60 HTTPClient, x86
// architecture 16 or 15) is offered iPXE's URL with option 60 HTTPClient, and no TFTP server,
// in both modes; ARM64's (19) is not served yet; a Secure Boot server's HTTP client gets no
// answer (the signed chain has no HTTP), so its firmware goes on to PXE.
func TestUEFIHTTPBootGetsIPXEOverHTTP(t *testing.T) {
	httpClient := func(arch iana.Arch) []dhcpv4.Modifier {
		return []dhcpv4.Modifier{dhcpv4.WithOption(dhcpv4.OptClassIdentifier("HTTPClient:Arch:00016:UNDI:003001")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(arch))}
	}
	for _, mode := range []Mode{ModeProxy, ModeFull} {
		h := newHandler(mode)
		for _, arch := range []iana.Arch{iana.EFI_X86_64_HTTP, iana.EFI_X86_HTTP} {
			r := requireReply(t, handle(h, discover(t, knownMAC, httpClient(arch)...), PortDHCP), dhcpv4.MessageTypeOffer)
			assert.Equal(t, "http://10.20.0.1:8080/loaders/snponly.efi", r.BootFileName, "%s arch %d", mode, arch)
			assert.Equal(t, "HTTPClient", r.ClassIdentifier(), mode)
			assert.Empty(t, r.TFTPServerName(), "%s: no TFTP on the way", mode)
			assert.Nil(t, r.Options.Get(dhcpv4.GenericOptionCode(optionPXEVendor)), "%s: no PXE options", mode)
		}
		d := handle(h, discover(t, knownMAC, httpClient(iana.EFI_ARM64_HTTP)...), PortDHCP)
		assert.Equal(t, IgnoredArch, d.Ignored, mode)
		d = handle(h, discover(t, unknownMAC, httpClient(iana.EFI_X86_64_HTTP)...), PortDHCP)
		assert.Equal(t, IgnoredUnknownMAC, d.Ignored, mode)

		h.Lookup = lookupOf(known, func(net.HardwareAddr) Boot { return Boot{SecureBoot: true} })
		d = handle(h, discover(t, knownMAC, httpClient(iana.EFI_X86_64_HTTP)...), PortDHCP)
		assert.Nil(t, d.Reply, mode)
		assert.Equal(t, IgnoredHTTPSecureBoot, d.Ignored, mode)
		r := requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.EFI_BC)...), PortDHCP), dhcpv4.MessageTypeOffer)
		assert.Equal(t, FileShim, r.BootFileName, "%s: its PXE gets the signed chain", mode)
	}
}

func TestIPXEGetsItsScriptURLAndSkipsTheProxyWait(t *testing.T) {
	for _, mode := range []Mode{ModeProxy, ModeFull} {
		h := newHandler(mode)
		want := dhcpv4.MessageTypeOffer
		r := requireReply(t, handle(h, discover(t, knownMAC, ipxeClient()...), PortDHCP), want)
		assert.Equal(t, "http://10.20.0.1:8080/ipxe/52:54:00:00:00:01", r.BootFileName, mode)
		assert.Equal(t, []byte{ipxeNoPXEDHCP, 1, 1}, r.Options.Get(dhcpv4.GenericOptionCode(optionIPXE)), mode)
		assert.Empty(t, r.TFTPServerName(), "an HTTP boot file needs no TFTP server")
	}
	// iPXE recognised by its option 175 alone (a build that sends no user class).
	h := newHandler(ModeProxy)
	req := discover(t, knownMAC, append(pxe(iana.EFI_X86_64), dhcpv4.WithGeneric(dhcpv4.GenericOptionCode(optionIPXE), []byte{19, 1, 1}))...)
	r := requireReply(t, handle(h, req, PortDHCP), dhcpv4.MessageTypeOffer)
	assert.Equal(t, scriptURL(knownMAC), r.BootFileName)
	// And by an RFC 3004 user class list.
	req = discover(t, knownMAC, append(pxe(iana.INTEL_X86PC), dhcpv4.WithUserClass("iPXE", true))...)
	r = requireReply(t, handle(h, req, PortDHCP), dhcpv4.MessageTypeOffer)
	assert.Equal(t, scriptURL(knownMAC), r.BootFileName)
}

func TestPlainDHCPClient(t *testing.T) {
	// Proxy mode: the site's DHCP server serves it.
	d := handle(newHandler(ModeProxy), discover(t, knownMAC), PortDHCP)
	assert.Nil(t, d.Reply)
	assert.Equal(t, IgnoredNotPXE, d.Ignored)

	// Full mode: the probe's /init gets an address, and no boot file.
	h := newHandler(ModeFull)
	r := requireReply(t, handle(h, discover(t, knownMAC), PortDHCP), dhcpv4.MessageTypeOffer)
	ip := addrOf(r.YourIPAddr)
	assert.True(t, h.Leases.Contains(ip), "%s out of range", ip)
	assert.Empty(t, r.BootFileName)
	assert.Nil(t, r.Options.Get(dhcpv4.GenericOptionCode(optionIPXE)))
	assert.Equal(t, "ffffff00", r.SubnetMask().String())
	assert.Equal(t, []net.IP{net.ParseIP("10.20.0.254").To4()}, r.Router())
	assert.Equal(t, time.Hour, r.IPAddressLeaseTime(0))
}

func TestUnknownMACIsIgnoredInBothModes(t *testing.T) {
	for _, mode := range []Mode{ModeProxy, ModeFull} {
		h := newHandler(mode)
		for _, req := range []*dhcpv4.DHCPv4{
			discover(t, unknownMAC, pxe(iana.INTEL_X86PC)...),
			discover(t, unknownMAC, ipxeClient()...),
		} {
			d := handle(h, req, PortDHCP)
			assert.Nil(t, d.Reply, mode)
			assert.Equal(t, IgnoredUnknownMAC, d.Ignored, mode)
		}
	}
	// A nil lookup knows no one.
	h := newHandler(ModeFull)
	h.Lookup = nil
	assert.Equal(t, IgnoredUnknownMAC, handle(h, discover(t, knownMAC), PortDHCP).Ignored)
}

// ModeOff answers nobody, a known PXE client included: the boot service runs no DHCP (and opens
// no DHCP socket); a handler in this mode is only a guard.
func TestModeOffAnswersNobody(t *testing.T) {
	h := newHandler(ModeOff)
	for _, req := range []*dhcpv4.DHCPv4{
		discover(t, knownMAC, pxe(iana.INTEL_X86PC)...),
		discover(t, knownMAC, ipxeClient()...),
		discover(t, knownMAC),
	} {
		for _, port := range []Port{PortDHCP, PortPXE} {
			d := handle(h, req, port)
			assert.Nil(t, d.Reply)
			assert.Equal(t, IgnoredOff, d.Ignored)
		}
	}
}

func TestMalformedIsIgnored(t *testing.T) {
	h := newHandler(ModeFull)
	good := discover(t, knownMAC, pxe(iana.INTEL_X86PC)...)
	reply := discover(t, knownMAC)
	reply.OpCode = dhcpv4.OpcodeBootReply
	noType := discover(t, knownMAC)
	noType.Options.Del(dhcpv4.OptionDHCPMessageType)
	shortMAC := discover(t, net.HardwareAddr{1, 2, 3})
	for name, packet := range map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("GET / HTTP/1.1\r\n\r\n"),
		"truncated":      good.ToBytes()[:100],
		"a reply":        reply.ToBytes(),
		"no type":        noType.ToBytes(),
		"short hardware": shortMAC.ToBytes(),
	} {
		d := h.Handle(packet, PortDHCP)
		assert.Nil(t, d.Reply, name)
		assert.Equal(t, IgnoredMalformed, d.Ignored, name)
	}
}

func TestFullModeRequestAckFlow(t *testing.T) {
	h := newHandler(ModeFull)
	offer := requireReply(t, handle(h, discover(t, knownMAC, pxe(iana.INTEL_X86PC)...), PortDHCP), dhcpv4.MessageTypeOffer)
	assert.Equal(t, FileBIOS, offer.BootFileName)
	assert.Equal(t, "10.20.0.1", offer.TFTPServerName())

	req, err := dhcpv4.NewRequestFromOffer(offer, pxe(iana.INTEL_X86PC)...)
	require.NoError(t, err)
	ack := requireReply(t, handle(h, req, PortDHCP), dhcpv4.MessageTypeAck)
	assert.Equal(t, offer.YourIPAddr.String(), ack.YourIPAddr.String())
	assert.Equal(t, FileBIOS, ack.BootFileName)
	assert.Equal(t, knownMAC.String(), h.Leases.Holder(addrOf(ack.YourIPAddr)))

	// Renewing (ciaddr, no server identifier) keeps the address.
	renew := discover(t, knownMAC, dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithClientIP(ack.YourIPAddr))
	renewed := requireReply(t, handle(h, renew, PortDHCP), dhcpv4.MessageTypeAck)
	assert.Equal(t, ack.YourIPAddr.String(), renewed.YourIPAddr.String())

	// Another client asking for that address is refused (NAK).
	steal := discover(t, otherMAC, dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(ack.YourIPAddr)))
	requireReply(t, handle(h, steal, PortDHCP), dhcpv4.MessageTypeNak)

	// So is an address outside the range (a client back from another network).
	away := discover(t, knownMAC, dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("192.168.1.5"))))
	requireReply(t, handle(h, away, PortDHCP), dhcpv4.MessageTypeNak)

	// A REQUEST choosing another server frees what was offered.
	offer2 := requireReply(t, handle(h, discover(t, otherMAC), PortDHCP), dhcpv4.MessageTypeOffer)
	elsewhere := discover(t, otherMAC, dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.20.0.2"))),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer2.YourIPAddr)))
	d := handle(h, elsewhere, PortDHCP)
	assert.Nil(t, d.Reply)
	assert.Equal(t, IgnoredNotForUs, d.Ignored)
	assert.Empty(t, h.Leases.Holder(addrOf(offer2.YourIPAddr)))

	// RELEASE frees the address.
	rel := discover(t, knownMAC, dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease), dhcpv4.WithClientIP(ack.YourIPAddr))
	assert.Equal(t, IgnoredReleased, handle(h, rel, PortDHCP).Ignored)
	assert.Empty(t, h.Leases.Holder(addrOf(ack.YourIPAddr)))
}

func TestProxyRequests(t *testing.T) {
	h := newHandler(ModeProxy)
	// A PXE client's REQUEST to the site server on port 67 is not ours.
	siteReq := discover(t, knownMAC, append(pxe(iana.INTEL_X86PC), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.20.0.2"))))...)
	assert.Equal(t, IgnoredNotForUs, handle(h, siteReq, PortDHCP).Ignored)

	// Its ProxyDHCP REQUEST on port 4011 is answered, with no address.
	pxeReq := discover(t, knownMAC, append(ipxeClient(), dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest),
		dhcpv4.WithClientIP(net.ParseIP("10.20.0.50")))...)
	r := requireReply(t, handle(h, pxeReq, PortPXE), dhcpv4.MessageTypeAck)
	assert.True(t, r.YourIPAddr.IsUnspecified())
	assert.Equal(t, scriptURL(knownMAC), r.BootFileName)

	// A DISCOVER on 4011 is not how PXE works.
	assert.Equal(t, IgnoredMessageType, handle(h, discover(t, knownMAC, pxe(iana.INTEL_X86PC)...), PortPXE).Ignored)
	// Nor INFORM anywhere.
	inform := discover(t, knownMAC, append(pxe(iana.INTEL_X86PC), dhcpv4.WithMessageType(dhcpv4.MessageTypeInform))...)
	assert.Equal(t, IgnoredMessageType, handle(h, inform, PortDHCP).Ignored)
}

func TestLeasesAreStableAcrossRestarts(t *testing.T) {
	newTable := func() *LeaseTable { return NewLeaseTable(rangeStart, rangeEnd, serverIP, time.Hour, nil) }
	first := newTable()
	a, ok := first.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, first.Preferred(knownMAC), a, "a MAC is offered its preferred address")
	require.True(t, first.Commit(knownMAC, a))

	// A restarted service (an empty table) offers the same address.
	restarted := newTable()
	again, ok := restarted.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, a, again)

	// When another MAC holds it, the next free address is offered instead...
	conflict := newTable()
	require.True(t, conflict.Commit(otherMAC, a))
	fallback, ok := conflict.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.NotEqual(t, a, fallback)
	require.True(t, conflict.Commit(knownMAC, fallback))
	// ...and after a restart, the client asking for its fallback address keeps it.
	later := newTable()
	kept, ok := later.Offer(knownMAC, fallback)
	require.True(t, ok)
	assert.Equal(t, fallback, kept)
}

func TestLeaseTableLimits(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	// Two addresses, one of them the server's own.
	table := NewLeaseTable(netip.MustParseAddr("10.20.0.1"), netip.MustParseAddr("10.20.0.2"), serverIP, time.Hour, clock)
	got, ok := table.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, "10.20.0.2", got.String(), "the server's own address is never handed out")
	require.True(t, table.Commit(knownMAC, got))
	_, ok = table.Offer(otherMAC, netip.Addr{})
	assert.False(t, ok, "the range is full")
	assert.False(t, table.Commit(otherMAC, serverIP))

	// A lease that expired is free again.
	now = now.Add(2 * time.Hour)
	got2, ok := table.Offer(otherMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, got, got2)

	// A declined address is set aside even from its decliner.
	require.True(t, table.Commit(otherMAC, got2))
	require.NoError(t, table.Decline(otherMAC, got2))
	_, ok = table.Offer(otherMAC, netip.Addr{})
	assert.False(t, ok)

	h := newHandler(ModeFull)
	h.Leases = table
	assert.Equal(t, IgnoredNoAddress, handle(h, discover(t, knownMAC), PortDHCP).Ignored)
}

// An offer to a MAC that holds a committed lease does not shorten that lease to the offer's
// short hold: the address stays its own for the lease time.
func TestOfferKeepsACommittedLease(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { return now }
	table := NewLeaseTable(netip.MustParseAddr("10.20.0.1"), netip.MustParseAddr("10.20.0.2"), serverIP, time.Hour, clock)
	got, ok := table.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	require.True(t, table.Commit(knownMAC, got))
	again, ok := table.Offer(knownMAC, netip.Addr{})
	require.True(t, ok)
	assert.Equal(t, got, again)
	now = now.Add(30 * time.Minute) // past the offer's hold, within the lease
	_, ok = table.Offer(otherMAC, netip.Addr{})
	assert.False(t, ok, "the committed address is still leased to its MAC")
}
