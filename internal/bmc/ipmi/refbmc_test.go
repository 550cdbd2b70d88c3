package ipmi

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gbmc "github.com/bougou/go-ipmi/pkg/bmc"
	"github.com/bougou/go-ipmi/pkg/hal"
	"github.com/bougou/go-ipmi/pkg/hal/mock"
	"github.com/bougou/go-ipmi/pkg/handlers"
	"github.com/bougou/go-ipmi/pkg/server"
	"github.com/bougou/go-ipmi/pkg/transport/udp"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

const (
	refUser     = "admin"
	refPassword = "ref-s3cret"
)

// refGUID is the System GUID the reference BMC answers, in wire (SMBIOS) order.
var refGUID = [16]byte{0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0}

// request is one command the reference BMC received, with the session's authentication
// algorithm (which cipher suite was negotiated).
type request struct {
	cmd     types.Command
	data    []byte
	authAlg types.AuthAlg
}

// refBMC is go-ipmi v0.9.1's reference BMC server on 127.0.0.1 with an in-memory HAL and a
// middleware recording every command it dispatches.
type refBMC struct {
	t    *testing.T
	port int
	hal  *mock.HAL
	opts refOptions

	mu       sync.Mutex
	requests []request
	stop     func()
	// fruCC, when not 0, is the completion code Get FRU Inventory Area Info answers.
	fruCC atomic.Uint32
	// hardResetCC, when not 0, is the completion code a Chassis Control hard reset answers.
	hardResetCC atomic.Uint32
	// fruLies makes Read FRU Data answer as a hostile BMC could: a full datagram of data, and
	// a count of 0 bytes returned.
	fruLies atomic.Bool
}

type refOptions struct {
	suites []types.CipherSuiteID
	// noGUID leaves Get System GUID unanswered (the reference server has no handler for it).
	noGUID bool
	// ipv6 serves on [::1] instead of 127.0.0.1.
	ipv6 bool
	// userPrivilege is the highest privilege the user may have (default ADMINISTRATOR).
	userPrivilege gbmc.PrivilegeLevel
	// manufacturerID is the IANA number Get Device ID answers (default 674, Dell).
	manufacturerID uint32
}

func startRefBMC(t *testing.T, o refOptions) *refBMC {
	t.Helper()
	if o.suites == nil {
		o.suites = []types.CipherSuiteID{types.CipherSuiteID3, types.CipherSuiteID17}
	}
	if o.userPrivilege == 0 {
		o.userPrivilege = gbmc.PrivilegeLevelAdministrator
	}
	if o.manufacturerID == 0 {
		o.manufacturerID = 674
	}
	r := &refBMC{t: t, hal: mock.New(), opts: o}
	ctx := context.Background()
	require.NoError(t, r.hal.Storage().FRU().Write(ctx, 0, buildFRU(nil,
		fruArea([]byte{0x19, 0, 0, 0}, ascii("Board Maker"), ascii("Board X"), ascii("BSN-1")),
		fruArea([]byte{0x19}, ascii("Ironfleet Labs"), ascii("IF-2000"), ascii("IF-2000-A"), ascii("v1"), // not "1": a one-character 8-bit field reads C1h, the end marker
			ascii("SN-REF-0001")))))
	require.NoError(t, r.hal.Network().SetConfig(ctx, &hal.IPConfig{MAC: [6]byte{0x52, 0x54, 0x00, 0xab, 0xcd, 0xef}}))
	r.serve(0)
	t.Cleanup(func() { r.stop() })
	return r
}

// serve starts a BMC with no sessions on port (0: any free port).
func (r *refBMC) serve(port int) {
	t := r.t
	b := gbmc.New(gbmc.DeviceInfo{DeviceID: 0x20, FirmwareMajor: 2, FirmwareMinor: 0x15, IPMIVersion: 0x20, ManufacturerID: r.opts.manufacturerID, ProductID: 0x0100},
		refGUID, r.hal, gbmc.WithCipherSuites(r.opts.suites))
	user, err := b.Users.Add(2, refUser)
	require.NoError(t, err)
	user.SetPassword([]byte(refPassword))
	user.Enabled = true
	user.ChannelAccess[1] = gbmc.UserChannelAccess{MaxPrivilege: r.opts.userPrivilege, Enabled: true}

	reg := handlers.NewRegistry()
	reg.Use(func(next handlers.Handler) handlers.Handler {
		return handlers.HandlerFunc(func(ctx context.Context, hctx *handlers.HandlerContext, data []byte) ([]byte, types.CompletionCode, error) {
			req := request{cmd: hctx.Command, data: append([]byte(nil), data...)}
			if hctx.Session != nil {
				req.authAlg = hctx.Session.AuthAlg
			}
			r.mu.Lock()
			r.requests = append(r.requests, req)
			r.mu.Unlock()
			if cc := r.fruCC.Load(); cc != 0 && hctx.Command.ID == types.CommandGetFRUInventoryAreaInfo.ID &&
				hctx.Command.NetFn == types.CommandGetFRUInventoryAreaInfo.NetFn {
				return nil, types.CompletionCode(cc), nil
			}
			if r.fruLies.Load() && hctx.Command.ID == types.CommandReadFRUData.ID && hctx.Command.NetFn == types.CommandReadFRUData.NetFn {
				return append([]byte{0}, make([]byte, 1000)...), types.CodeOK, nil
			}
			if cc := r.hardResetCC.Load(); cc != 0 && hctx.Command.ID == types.CommandChassisControl.ID &&
				hctx.Command.NetFn == types.CommandChassisControl.NetFn && len(data) > 0 && data[0] == 0x03 {
				return nil, types.CompletionCode(cc), nil
			}
			return next.Handle(ctx, hctx, data)
		})
	})
	handlers.RegisterAllHandlers(reg)
	if !r.opts.noGUID {
		reg.RegisterFunc(types.CommandGetSystemGUID, func(_ context.Context, hctx *handlers.HandlerContext, _ []byte) ([]byte, types.CompletionCode, error) {
			return append([]byte(nil), hctx.BMC.GUID[:]...), types.CodeOK, nil
		})
	}

	ip := net.IPv4(127, 0, 0, 1)
	if r.opts.ipv6 {
		ip = net.IPv6loopback
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: ip, Port: port})
	require.NoError(t, err)
	r.port = pc.LocalAddr().(*net.UDPAddr).Port
	srv := server.NewServer(b, udp.Wrap(pc), server.WithHandlerRegistry(reg))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx)
	}()
	r.stop = func() {
		cancel()
		_ = pc.Close()
		<-done
	}
}

// restart forgets every session, as a rebooted BMC does, keeping port and hardware.
func (r *refBMC) restart() {
	r.stop()
	r.serve(r.port)
}

// addr is the BMC's "host:port" (IPv6 in brackets).
func (r *refBMC) addr() string {
	host := "127.0.0.1"
	if r.opts.ipv6 {
		host = "::1"
	}
	return net.JoinHostPort(host, strconv.Itoa(r.port))
}

func (r *refBMC) target(password string) bmc.Target {
	return refTarget(r.addr(), password)
}

// refTarget addresses the reference BMC's user at addr ("host:port", the BMC's or a proxy's).
func refTarget(addr, password string) bmc.Target {
	return lanTarget(addr, refUser, password)
}

// lanTarget addresses user at addr ("host:port").
func lanTarget(addr, user, password string) bmc.Target {
	return bmc.Target{
		Address:     bmc.Address{Type: "ipmi", Endpoint: "ipmi://" + addr},
		Credentials: bmc.Credentials{Username: user, Password: password},
	}
}

// received takes the data of every request for cmd from the recording.
func (r *refBMC) received(cmd types.Command) [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	kept := r.requests[:0]
	for _, req := range r.requests {
		if req.cmd.ID == cmd.ID && req.cmd.NetFn == cmd.NetFn {
			out = append(out, req.data)
		} else {
			kept = append(kept, req)
		}
	}
	r.requests = kept
	return out
}

// authAlgs lists the authentication algorithms of the sessions requests came in on.
func (r *refBMC) authAlgs() []types.AuthAlg {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []types.AuthAlg
	for _, req := range r.requests {
		if req.authAlg != 0 && (len(out) == 0 || out[len(out)-1] != req.authAlg) {
			out = append(out, req.authAlg)
		}
	}
	return out
}

// fastOptions make a dead BMC show within a second.
var fastOptions = Options{Timeout: 200 * time.Millisecond, Retries: 1, CallTimeout: 5 * time.Second}

func dialRef(t *testing.T, r *refBMC) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := Dial(ctx, r.target(refPassword), fastOptions)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}
