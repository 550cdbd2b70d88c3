package ipmi

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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

// cipherSuites are tried in this order and no others, one per go-ipmi Connect: 17
// (HMAC-SHA256, AES-128) is preferred, 3 (HMAC-SHA1, AES-128) is the suite every IPMI 2.0 BMC
// must offer, tried only when the BMC refused 17 at Open Session (see connectLocked). Never
// suite 0, which authenticates nothing.
var cipherSuites = []types.CipherSuiteID{types.CipherSuiteID17, types.CipherSuiteID3}

const closeTimeout = 2 * time.Second

// A session's life. go-ipmi v0.9.1 starts a keepalive goroutine at every login: each
// client.DefaultKeepAliveIntervalSec (30 s, a constant) it sends Get Session Info, with a
// context that is never cancelled and outside our lock. When the session is closed while that
// exchange is under way, go-ipmi's UDP client has already set its socket to nil and the
// exchange writes to it: a nil-pointer panic in go-ipmi's goroutine, which kills the whole
// process (the manager; it happened in test/e2e). So no session lives to see its keepalive
// fire: calls that begin within defaultSessionReuse of its login use it, later ones log in
// anew; every call on it ends by defaultSessionEnd (its context's deadline); and a timer logs
// it out then if no call did sooner. keepaliveMargin is left before the first tick, for the
// keepalive goroutine to see the session closed before its ticker fires.
const (
	defaultSessionReuse = 10 * time.Second
	defaultSessionEnd   = 25 * time.Second
	keepaliveMargin     = 5 * time.Second
)

// IPMI 2.0's limits: user names of 16 bytes (go-ipmi refuses longer ones), passwords of 20
// (go-ipmi does not check).
const (
	maxUserNameLength = 16
	maxPasswordLength = 20
)

// privilegeLevels maps bmc.Address.PrivilegeLevel to the session privilege requested.
var privilegeLevels = map[string]types.PrivilegeLevel{
	"":              types.PrivilegeLevelAdministrator,
	"ADMINISTRATOR": types.PrivilegeLevelAdministrator,
	"OPERATOR":      types.PrivilegeLevelOperator,
	"USER":          types.PrivilegeLevelUser,
}

// Options tune every client a Connector opens.
type Options struct {
	// Timeout bounds each UDP attempt (default 1s).
	Timeout time.Duration
	// Retries is how many times an unanswered request is resent (default 3).
	Retries int
	// CallTimeout bounds each bmc.Client call whose context has no deadline (default 20s).
	CallTimeout time.Duration

	// sessionReuse and sessionEnd are defaultSessionReuse and defaultSessionEnd unless a test
	// shortens them.
	sessionReuse, sessionEnd time.Duration
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
	if o.sessionReuse <= 0 {
		o.sessionReuse = defaultSessionReuse
	}
	if o.sessionEnd <= 0 {
		o.sessionEnd = defaultSessionEnd
	}
	return o
}

// Client is a bmc.Client over one RMCP+ session, reused across calls and re-established once
// when the BMC forgets it.
type Client struct {
	host  string // bare: "fd00::6", not "[fd00::6]"
	port  int
	creds bmc.Credentials
	opts  Options
	// privilege is the session privilege asked for (Address.PrivilegeLevel).
	privilege types.PrivilegeLevel

	mu     sync.Mutex // serialises calls: one request in flight per BMC
	sess   *session
	closed bool
	// fru is FRU device 0, read once per client (it takes many small reads).
	fru *FRU
	// mac is the BMC's own MAC, read once per client ("" when it did not say); nil until then.
	mac *string
	// manufacturer is the BMC's IANA number (Get Device ID), read once per client for the boot
	// device selector (boot.go); nil until then.
	manufacturer *uint32
	// boot remembers the persistent override to re-send before power-on (see boot.go).
	boot bootMemory
}

var (
	_ bmc.Client         = (*Client)(nil)
	_ bmc.FirmwareReader = (*Client)(nil)
)

// session is one go-ipmi session, closed at most once.
type session struct {
	ipmi *client.Client
	once sync.Once
	// reuseUntil: calls that begin before it may use the session. endBy: every call on it
	// ends by then, and it is logged out then at the latest (by timer). Both count from
	// before the login, so from before go-ipmi started the keepalive.
	reuseUntil, endBy time.Time
	timer             *time.Timer
}

// close logs out (bounded by ctx) and closes the socket; later calls do nothing. go-ipmi's own
// Close panics when called twice.
func (s *session) close(ctx context.Context) {
	s.once.Do(func() {
		if s.timer != nil {
			s.timer.Stop()
		}
		_ = s.ipmi.Close(ctx)
	})
}

// end logs s out when its life is over, unless a call has already replaced or closed it.
func (c *Client) end(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess != s {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	s.close(ctx)
	c.sess = nil
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
	privilege, ok := privilegeLevels[strings.ToUpper(t.Address.PrivilegeLevel)]
	if !ok {
		return nil, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError,
			"invalid IPMI privilege level %q: want ADMINISTRATOR, OPERATOR or USER", t.Address.PrivilegeLevel)
	}
	c := &Client{host: host, port: port, creds: t.Credentials, opts: o.withDefaults(), privilege: privilege}
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

// connectLocked logs in with suite 17 alone, then with suite 3 alone only when the BMC refused
// 17 at Open Session (no RAKP exchange, so no login attempt counted against the user). go-ipmi's
// own multi-suite Connect moves on after any failure, a wrong password included, which makes
// one wrong password two failed logins (and a lockout sooner) on BMCs offering both suites.
func (c *Client) connectLocked(ctx context.Context) error {
	if len(c.creds.Username) > maxUserNameLength {
		return bmc.Errorf(metalv1alpha1.BMCReasonAuthenticationFailed, "IPMI user name %q is longer than %d bytes", c.creds.Username, maxUserNameLength)
	}
	if len(c.creds.Password) > maxPasswordLength {
		return bmc.Errorf(metalv1alpha1.BMCReasonAuthenticationFailed,
			"the IPMI password of user %q is %d bytes long: IPMI 2.0 passwords are at most %d bytes", c.creds.Username, len(c.creds.Password), maxPasswordLength)
	}
	ic, err := client.NewClient(dialHost(c.host), c.port, c.creds.Username, c.creds.Password)
	if err != nil {
		return c.classifyConnect(err)
	}
	ic.WithTimeout(c.opts.Timeout).WithRetry(c.opts.Retries).WithMaxPrivilegeLevel(c.privilege)
	s := &session{ipmi: ic}
	start := time.Now()
	// One socket for both attempts, as go-ipmi's own suite loop does: after a refused Open
	// Session the client is still before any session.
	var errs []error
	for _, suite := range cipherSuites {
		err := ic.WithCipherSuiteID(suite).Connect(ctx)
		if err == nil {
			s.reuseUntil, s.endBy = start.Add(c.opts.sessionReuse), start.Add(c.opts.sessionEnd)
			s.timer = time.AfterFunc(time.Until(s.endBy), func() { c.end(s) })
			c.sess = s
			return nil
		}
		errs = append(errs, err)
		if !suiteRefused(err) || ctx.Err() != nil {
			break
		}
	}
	// A failed attempt's socket is closed at once: its half-made session is not worth waiting for.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	s.close(done)
	return c.classifyConnect(errs...)
}

// dialHost is host as go-ipmi wants it: it dials fmt.Sprintf("%s:%d", host, port), so an IPv6
// address must come bracketed.
func dialHost(host string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
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
		return errClientReplaced(what)
	}
	if c.sess != nil && !time.Now().Before(c.sess.reuseUntil) {
		c.dropSessionLocked(ctx) // too old to outlive this call safely: see defaultSessionEnd
	}
	fresh := false
	if c.sess == nil {
		if err := c.connectLocked(ctx); err != nil {
			return err
		}
		fresh = true
	}
	err := c.runLocked(ctx, op)
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
	if err := c.runLocked(ctx, op); err != nil {
		return c.classifyCommand(what, err)
	}
	return nil
}

// runLocked runs op on the current session, ending it by the session's end: a call cut short
// there reads as no answer, and do reruns it once on a new session.
func (c *Client) runLocked(ctx context.Context, op func(ctx context.Context, ic *client.Client) error) error {
	ctx, cancel := context.WithDeadline(ctx, c.sess.endBy)
	defer cancel()
	return op(ctx, c.sess.ipmi)
}

// errClientReplaced is what a closed client answers: bmc.Cache closes a client when it replaces
// or drops it, while a caller may still hold it. Transient: the caller fetches a new client.
func errClientReplaced(what string) error {
	return bmc.Classify(metalv1alpha1.BMCReasonUnreachable,
		fmt.Errorf("%s: IPMI client was replaced (credentials or address changed, or a login failed); retry", what))
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
