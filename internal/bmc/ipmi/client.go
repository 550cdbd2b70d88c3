package ipmi

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// SystemURI is the one system an IPMI BMC manages. Methods given any other URI answer a
// ProtocolError ("no such system").
const SystemURI = "ipmi:system"

// cipherSuites are proposed in this order and no others: 17 (HMAC-SHA256, AES-128) is
// preferred, 3 (HMAC-SHA1, AES-128) is the suite every IPMI 2.0 BMC must offer. Never suite 0,
// which authenticates nothing.
var cipherSuites = []types.CipherSuiteID{types.CipherSuiteID17, types.CipherSuiteID3}

const closeTimeout = 2 * time.Second

// Options tune every client a Connector opens.
type Options struct {
	// Timeout bounds each UDP attempt (default 1s).
	Timeout time.Duration
	// Retries is how many times an unanswered request is resent (default 3).
	Retries int
	// CallTimeout bounds each bmc.Client call whose context has no deadline (default 20s).
	CallTimeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 20 * time.Second
	}
	return o
}

// Client is a bmc.Client over one RMCP+ session, reused across calls and re-established once
// when the BMC forgets it.
type Client struct {
	host  string
	port  int
	creds bmc.Credentials
	opts  Options

	mu     sync.Mutex // serialises calls: one request in flight per BMC
	sess   *session
	closed bool
	// fru is FRU device 0, read once per client (it takes many small reads).
	fru *FRU
	// lanChannel is the BMC's 802.3 LAN channel, found once (0 until then).
	lanChannel uint8
	// boot remembers the persistent override to re-send before power-on (see boot.go).
	boot bootMemory
}

var _ bmc.Client = (*Client)(nil)

// session is one go-ipmi session, closed at most once.
type session struct {
	ipmi *client.Client
	once sync.Once
}

// close logs out (bounded by ctx) and closes the socket; later calls do nothing. go-ipmi's own
// Close panics when called twice.
func (s *session) close(ctx context.Context) {
	s.once.Do(func() { _ = s.ipmi.Close(ctx) })
}

// Connector returns a bmc.Connector that opens an RMCP+ session at once, so wrong credentials
// show when connecting. Its clients are meant to be kept by bmc.Cache.
func Connector(o Options) bmc.Connector {
	return func(ctx context.Context, t bmc.Target) (bmc.Client, error) {
		c, err := Dial(ctx, t, o)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// Dial opens a client to the target and logs in. Target.Address.Endpoint is
// "ipmi://host:port" (IPv6 hosts in brackets).
func Dial(ctx context.Context, t bmc.Target, o Options) (*Client, error) {
	host, port, err := parseEndpoint(t.Address)
	if err != nil {
		return nil, err
	}
	c := &Client{host: host, port: port, creds: t.Credentials, opts: o.withDefaults()}
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.connectLocked(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func parseEndpoint(a bmc.Address) (string, int, error) {
	if a.Type != "" && a.Type != "ipmi" {
		return "", 0, bmc.Errorf(metalv1alpha1.BMCReasonUnsupportedProtocol, "BMC type %q is not IPMI", a.Type)
	}
	u, err := url.Parse(a.Endpoint)
	if err != nil || u.Scheme != "ipmi" || u.Hostname() == "" {
		return "", 0, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid IPMI endpoint %q: want ipmi://host:port", a.Endpoint)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil || port < 1 || port > 65535 {
		return "", 0, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "invalid IPMI endpoint %q: no valid port", a.Endpoint)
	}
	return u.Hostname(), port, nil
}

// callContext bounds a call by CallTimeout unless the caller already set a deadline.
func (c *Client) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.opts.CallTimeout)
}

// connectLocked opens a session with suites 17 then 3. A failed attempt's socket is closed at
// once: its half-made session is not worth waiting for.
func (c *Client) connectLocked(ctx context.Context) error {
	ic, err := client.NewClient(c.host, c.port, c.creds.Username, c.creds.Password)
	if err != nil {
		return bmc.Errorf(metalv1alpha1.BMCReasonAuthenticationFailed, "IPMI user name %q is longer than 16 bytes", c.creds.Username)
	}
	ic.WithTimeout(c.opts.Timeout).WithRetry(c.opts.Retries).
		WithCipherSuiteID(cipherSuites...).
		WithMaxPrivilegeLevel(types.PrivilegeLevelAdministrator)
	s := &session{ipmi: ic}
	if err := ic.Connect(ctx); err != nil {
		done, cancel := context.WithCancel(context.Background())
		cancel()
		s.close(done)
		return c.classifyConnect(err)
	}
	c.sess = s
	return nil
}

// dropSessionLocked logs out of the current session, waiting at most one UDP attempt: it is
// called when the session is probably gone already.
func (c *Client) dropSessionLocked(ctx context.Context) {
	if c.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	c.sess.close(ctx)
	c.sess = nil
}

// do runs op on the session, connecting first when there is none. When op fails because the
// BMC stopped answering on an established session (a restarted BMC forgets sessions and drops
// their packets silently), it logs in again once and reruns op; every op is safe to repeat.
func (c *Client) do(ctx context.Context, what string, op func(ctx context.Context, ic *client.Client) error) error {
	ctx, cancel := c.callContext(ctx)
	defer cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: IPMI client is closed", what)
	}
	fresh := false
	if c.sess == nil {
		if err := c.connectLocked(ctx); err != nil {
			return err
		}
		fresh = true
	}
	err := op(ctx, c.sess.ipmi)
	if err == nil {
		return nil
	}
	if fresh || ctx.Err() != nil || !isNoResponse(err) {
		return c.classifyCommand(what, err)
	}
	c.dropSessionLocked(ctx)
	if cerr := c.connectLocked(ctx); cerr != nil {
		return bmc.Classify(metalv1alpha1.BMCReasonUnreachable,
			fmt.Errorf("%s: BMC stopped answering on its session and logging in again failed: %w", what, cerr))
	}
	if err := op(ctx, c.sess.ipmi); err != nil {
		return c.classifyCommand(what, err)
	}
	return nil
}

// Close logs out and closes the socket. It is safe to call more than once.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	c.sess.close(ctx)
	c.sess = nil
}

// checkSystem rejects any system URI but SystemURI.
func checkSystem(systemURI string) error {
	if systemURI != SystemURI {
		return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "no such system %q: an IPMI BMC has one system, %q", systemURI, SystemURI)
	}
	return nil
}

// unsupported wraps bmc.ErrUnsupported with what was asked.
func unsupported(format string, args ...any) error {
	return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), bmc.ErrUnsupported))
}
