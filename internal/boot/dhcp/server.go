package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/go-logr/logr"
	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Server reads DHCP requests from a socket, asks the Handler, and sends the replies.
//
// It reads the socket itself instead of running server4.Server: that one drops packets it
// cannot parse without a word and answers from a goroutine per packet, and the boot service
// counts malformed packets and keeps the decision in one pure function. The socket comes from
// server4.NewIPv4UDPConn (bound to the interface, broadcast allowed) in OpenListeners, or from
// whoever embeds the service.
type Server struct {
	Handler *Handler
	// OnReply and OnIgnored count what happened (either may be nil).
	OnReply   func(mode Mode, reply *dhcpv4.DHCPv4)
	OnIgnored func(Reason)
	Log       logr.Logger
}

// Serve answers requests arriving on conn (which arrived on port) until ctx ends; it closes
// conn then and returns nil.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn, port Port) error {
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	buf := make([]byte, 4096)
	for {
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("reading DHCP requests on port %d: %w", port, err)
		}
		d := s.Handler.Handle(buf[:n], port)
		if d.Reply == nil {
			if s.OnIgnored != nil {
				s.OnIgnored(d.Ignored)
			}
			if d.Detail != "" {
				s.Log.Info(d.Detail, "from", peer.String())
			}
			continue
		}
		to := replyAddress(d.Reply, peer, port)
		if _, err := conn.WriteTo(d.Reply.ToBytes(), to); err != nil {
			s.Log.Info("sending a DHCP reply failed", "to", to.String(), "mac", d.Reply.ClientHWAddr.String(), "error", err.Error())
			continue
		}
		if s.OnReply != nil {
			s.OnReply(s.Handler.Config.Mode, d.Reply)
		}
	}
}

// replyAddress is where a reply goes (RFC 2131 4.1): back to the source of a request to the
// PXE port; to the relay agent when there is one; to the client's address when it has one;
// else broadcast, since a client without an address cannot be reached by unicast without
// writing its ARP entry. A loopback peer (a test) is answered directly.
func replyAddress(reply *dhcpv4.DHCPv4, peer net.Addr, port Port) net.Addr {
	udp, _ := peer.(*net.UDPAddr)
	if udp != nil && (port == PortPXE || udp.IP.IsLoopback()) {
		return udp
	}
	if gi := reply.GatewayIPAddr; gi != nil && !gi.IsUnspecified() {
		return &net.UDPAddr{IP: gi, Port: dhcpv4.ServerPort}
	}
	if ci := reply.ClientIPAddr; ci != nil && !ci.IsUnspecified() && !reply.IsBroadcast() &&
		reply.MessageType() != dhcpv4.MessageTypeNak {
		return &net.UDPAddr{IP: ci, Port: dhcpv4.ClientPort}
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
}
