package dhcp

import (
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// FuzzDHCP feeds arbitrary packets through decode + handle in both modes on both ports. It must
// never panic; a packet the library cannot decode must be ignored as malformed; a reply must
// only go to a known MAC and must encode to a packet that decodes again.
func FuzzDHCP(f *testing.F) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0x00, 0x00, 0x02} // known: last byte even
	for _, mods := range [][]dhcpv4.Modifier{
		nil,
		{dhcpv4.WithOption(dhcpv4.OptClassIdentifier(pxeVendorClass)), dhcpv4.WithOption(dhcpv4.OptClientArch(iana.EFI_X86_64))},
		{dhcpv4.WithOption(dhcpv4.OptClassIdentifier(pxeVendorClass)), dhcpv4.WithUserClass("iPXE", false)},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeRequest), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.20.0.120")))},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeRelease), dhcpv4.WithClientIP(net.ParseIP("10.20.0.120"))},
		{dhcpv4.WithMessageType(dhcpv4.MessageTypeDecline), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.20.0.121")))},
	} {
		m, err := dhcpv4.NewDiscovery(mac, mods...)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.ToBytes())
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 6, 0})

	knownEven := func(m net.HardwareAddr) bool { return len(m) == 6 && m[5]%2 == 0 }
	handlers := []*Handler{newHandler(ModeProxy), newHandler(ModeFull)}
	for _, h := range handlers {
		h.Lookup = lookupOf(knownEven, func(m net.HardwareAddr) Boot { return Boot{AddressOnly: m[4]%2 == 0, SecureBoot: m[3]%2 == 0} })
	}
	f.Fuzz(func(t *testing.T, packet []byte) {
		_, decodeErr := dhcpv4.FromBytes(packet)
		for _, h := range handlers {
			for _, port := range []Port{PortDHCP, PortPXE} {
				d := h.Handle(packet, port)
				if (d.Reply == nil) == (d.Ignored == "") {
					t.Fatalf("%s/%d: want exactly one of a reply or a reason, got %v and %q", h.Config.Mode, port, d.Reply, d.Ignored)
				}
				if decodeErr != nil && d.Ignored != IgnoredMalformed {
					t.Fatalf("%s/%d: undecodable packet not ignored as malformed: %v", h.Config.Mode, port, d)
				}
				if d.Reply == nil {
					continue
				}
				if !knownEven(d.Reply.ClientHWAddr) {
					t.Fatalf("%s/%d: replied to unknown MAC %s", h.Config.Mode, port, d.Reply.ClientHWAddr)
				}
				if _, err := dhcpv4.FromBytes(d.Reply.ToBytes()); err != nil {
					t.Fatalf("%s/%d: reply does not decode: %v", h.Config.Mode, port, err)
				}
			}
		}
	})
}
