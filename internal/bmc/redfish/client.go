// Package redfish drives BMCs over Redfish with github.com/stmcginnis/gofish. It survives what
// real BMCs do that the schema does not promise (../shared/design/REDFISH-QUIRKS.md): it follows
// links instead of building URIs, skips sub-resources that fail, ignores placeholder strings,
// and picks reset and boot values from what each BMC offers.
package redfish

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Options tune every client a Connector opens.
type Options struct {
	// Timeout bounds each HTTP request to a BMC (default 30s).
	Timeout time.Duration
	// RootCAs are trusted for BMC certificates; nil means the system's roots.
	RootCAs *x509.CertPool
	// MaxConcurrentRequests per BMC (default 2): BMCs are small computers.
	MaxConcurrentRequests int64
	// MediaPollInterval is how often a virtual-media change is polled for (default 1s);
	// MediaInsertTimeout (default 60s) and MediaEjectTimeout (default 30s) bound how long
	// InsertMedia and EjectMedia wait for the BMC to report the change.
	MediaPollInterval, MediaInsertTimeout, MediaEjectTimeout time.Duration
	// MaxResponseBytes bounds every response body (default DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// MaxSystems is how many systems a BMC may list (default DefaultMaxSystems); one that lists
	// more fails Systems with BMCReasonTooManySystems, its systems unread.
	MaxSystems int
	// UpdatePushTimeout bounds a multipart push of a firmware image to a BMC (StartUpdate on a
	// BMC without SimpleUpdate; default DefaultUpdatePushTimeout), in place of Timeout.
	UpdatePushTimeout time.Duration
}

// Client is a bmc.Client over one gofish session.
type Client struct {
	api        *gofish.APIClient
	root       rootLinks
	systemPath string
	maxSystems int
	media      mediaTiming
	// pushTimeout bounds a firmware image's multipart push (Options.UpdatePushTimeout).
	pushTimeout time.Duration

	mediaMu sync.Mutex
	slots   map[string]string // system URI -> its CD/DVD slot's URI, once found
}

var (
	_ bmc.Client            = (*Client)(nil)
	_ bmc.SecureBootControl = (*Client)(nil)
	_ bmc.FirmwareReader    = (*Client)(nil)
)

// Connector returns a bmc.Connector that logs in with a Redfish session (one per BMC, kept by
// bmc.Cache and reused across reconciles). Its clients share two HTTP transports, one that
// verifies BMC certificates and one for BMCs that opt out: one transport per BMC would cost a
// fleet of ten thousand tens of MiB of buffers for connections it mostly does not have.
func Connector(opts Options) bmc.Connector {
	opts = opts.withDefaults()
	verify, insecure := newTransport(opts, false), newTransport(opts, true)
	return func(ctx context.Context, t bmc.Target) (bmc.Client, error) {
		transport := verify
		if t.InsecureSkipVerify {
			transport = insecure
		}
		return connect(ctx, t, opts, transport)
	}
}

// Connect opens a session to the target, over a transport of its own.
func Connect(ctx context.Context, t bmc.Target, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	return connect(ctx, t, opts, newTransport(opts, t.InsecureSkipVerify))
}

func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.MaxConcurrentRequests == 0 {
		o.MaxConcurrentRequests = 2
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxSystems <= 0 {
		o.MaxSystems = DefaultMaxSystems
	}
	if o.UpdatePushTimeout <= 0 {
		o.UpdatePushTimeout = DefaultUpdatePushTimeout
	}
	return o
}

// newTransport is an HTTP transport to BMCs; its connections are pooled per BMC, and its
// response bodies bounded (limitBodies).
func newTransport(opts Options, insecureSkipVerify bool) http.RoundTripper {
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{
		MinVersion:         tls.VersionTLS12,
		RootCAs:            opts.RootCAs,
		InsecureSkipVerify: insecureSkipVerify, //nolint:gosec // only when the BMC opts out
		// Connections close between polls (below), so most requests to a BMC open one: a BMC
		// that offers session resumption is spared the full handshake (its certificate
		// signed, ours verified) on each. Sessions are kept by BMC host name, a bounded number.
		ClientSessionCache: newSessionCache(tlsSessions),
	}
	// One idle connection per BMC: a BMC's reconcilers seldom overlap (a request that does opens
	// a connection of its own, closed after it), and each idle one holds two goroutines, their
	// stacks, and buffers (about 20 KiB): at a thousand BMCs enrolling, tens of MiB.
	transport.MaxIdleConnsPerHost = 1
	// No cap across BMCs: the transport is shared by the whole fleet, and the default (100)
	// would close the connections of all but 100 BMCs, so most requests would pay a TLS
	// handshake. Idle connections still close after idleConnTimeout.
	transport.MaxIdleConns = 0
	// A connection outlives a burst of requests (a PXE boot is three), not the minutes between
	// polls: ten thousand idle TLS connections would cost the manager hundreds of MiB. The
	// session is not tied to the connection and survives.
	transport.IdleConnTimeout = idleConnTimeout
	return keepAlive{limitBodies{next: transport, limit: opts.MaxResponseBytes}}
}

func connect(ctx context.Context, t bmc.Target, opts Options, transport http.RoundTripper) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: opts.Timeout, Transport: transport}

	// The client's context is the connection's, not the reconcile's: the client outlives the
	// reconcile that opened it. Each request is bounded by opts.Timeout instead.
	api, err := gofish.ConnectContext(context.Background(), gofish.ClientConfig{
		Endpoint:              t.Address.Endpoint,
		Username:              t.Credentials.Username,
		Password:              t.Credentials.Password,
		Insecure:              t.InsecureSkipVerify,
		HTTPClient:            httpClient,
		MaxConcurrentRequests: opts.MaxConcurrentRequests,
	})
	if err != nil {
		return nil, classify("connecting to "+t.Address.Endpoint, err)
	}
	root := linksOf(api.Service)
	// The service root gofish read stays only as the links followed here. Kept whole (every
	// link and property), the roots of half a 10,000-BMC fleet held 9.5 MiB of the manager's
	// heap: it keeps a client per BMC.
	api.Service = nil
	return &Client{api: api, root: root, systemPath: t.Address.SystemPath, maxSystems: opts.MaxSystems, media: opts.mediaTiming(),
		pushTimeout: opts.UpdatePushTimeout}, nil
}

// rootLinks are what the client follows of a BMC's service root.
type rootLinks struct{ self, systems, managers, updateService, registries string }

// linksOf reads the links gofish keeps in unexported fields of the service root (v0.20 has no
// accessor for them); a field it no longer has reads as no link, which the tests against the
// simulators and the DMTF mockup catch.
func linksOf(s *gofish.Service) rootLinks {
	if s == nil {
		return rootLinks{}
	}
	v := reflect.ValueOf(s).Elem()
	field := func(name string) string {
		if f := v.FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
			return f.String()
		}
		return ""
	}
	return rootLinks{self: s.ODataID, systems: field("systems"), managers: field("managers"),
		updateService: field("updateService"), registries: field("registries")}
}

// idleConnTimeout closes a BMC connection nobody used for this long: longer than the gaps in a
// burst of requests (a PXE boot's three, a power change and its first check), shorter than the
// seconds between a lifecycle's steps, which reconnect resuming the TLS session (sessionCache).
const idleConnTimeout = 5 * time.Second

// tlsSessions is how many BMCs' TLS sessions a transport keeps for resumption: more than the
// BMCs a fleet's reconcilers are busy with at once (a lifecycle's bursts resume), fewer than a
// large fleet's routine polls cycle through (those mostly do a full handshake). A session is
// kept serialized (sessionCache), its certificates as DER: this bounds them to a few MiB.
const tlsSessions = 1024

// keepAlive re-enables connection reuse, which gofish turns off (Request.Close) whenever it is
// given its own http.Client: a TLS handshake per request would triple a BMC's load.
type keepAlive struct{ next http.RoundTripper }

func (k keepAlive) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Close {
		req = req.Clone(req.Context())
		req.Close = false
	}
	return k.next.RoundTrip(req)
}

// Close logs out of the session (gofish's Logout would need the service root, which the client
// no longer keeps).
func (c *Client) Close() {
	if s, err := c.api.GetSession(); err == nil {
		_ = redfish.DeleteSession(c.api, s.ID)
	}
}

// classify maps a transport or Redfish error onto a condition reason, with what was being done.
func classify(doing string, err error) error {
	var collectionErr *common.CollectionError
	if errors.As(err, &collectionErr) && len(collectionErr.Failures) > 0 {
		return classifyCollection(doing, collectionErr)
	}
	// Before the transport errors: http.Client wraps it in a *url.Error, which is a net.Error.
	var tooLarge *ResponseTooLargeError
	if errors.As(err, &tooLarge) {
		return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: %v", doing, tooLarge)
	}
	var redfishErr *common.Error
	if errors.As(err, &redfishErr) {
		switch redfishErr.HTTPReturnedStatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return bmc.Errorf(metalv1alpha1.BMCReasonAuthenticationFailed, "%s: the BMC refused the credentials (HTTP %d)", doing, redfishErr.HTTPReturnedStatusCode)
		case 0:
		default:
			return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: HTTP %d: %s", doing, redfishErr.HTTPReturnedStatusCode, redfishMessage(redfishErr))
		}
	}
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: the BMC's TLS certificate is not trusted (%v); trust its CA, or set insecureSkipVerify on the BMC", doing, certErr.Err)
	}
	var netErr net.Error
	var urlErr *url.Error
	var opErr *net.OpError
	if errors.As(err, &opErr) || errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) {
		return bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "%s: %v", doing, err)
	}
	if errors.As(err, &urlErr) {
		return bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "%s: %v", doing, urlErr.Err)
	}
	return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: %v", doing, err)
}

// classifyCollection classifies the error gofish returns when reading a collection or any of
// its members failed. That error hides each failure (a refused session, a timeout, a 5xx) in
// one JSON dump and wraps none of them, so each is classified here and the most telling one
// speaks for all: a dead session must read as refused credentials, so that it is dropped.
func classifyCollection(doing string, e *common.CollectionError) error {
	links := slices.Sorted(maps.Keys(e.Failures))
	var worst error
	for _, link := range links {
		failure := classify(doing+": reading "+link, e.Failures[link])
		if worst == nil || reasonRank(bmc.Reason(failure)) > reasonRank(bmc.Reason(worst)) {
			worst = failure
		}
	}
	if more := len(links) - 1; more > 0 {
		return bmc.Errorf(bmc.Reason(worst), "%v (and %d more failed)", worst, more)
	}
	return worst
}

// reasonRank orders failure reasons by what must be acted on first.
func reasonRank(reason string) int {
	switch reason {
	case metalv1alpha1.BMCReasonAuthenticationFailed:
		return 2
	case metalv1alpha1.BMCReasonUnreachable:
		return 1
	default:
		return 0
	}
}

// redfishMessage is the human part of a Redfish error, without echoing whole bodies. The
// extended info says what went wrong; the top-level message is often only "A general error
// has occurred. See ExtendedInfo for more information."
func redfishMessage(e *common.Error) string {
	for _, info := range e.ExtendedInfos {
		if info.Message != "" {
			return truncate(info.Message, 200)
		}
	}
	if e.Message != "" {
		return truncate(e.Message, 200)
	}
	return "no message"
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// placeholders are values vendors ship instead of a real one.
var placeholders = map[string]bool{
	"to be filled by o.e.m.": true, "default string": true, "not specified": true,
	"system serial number": true, "system product name": true, "n/a": true, "na": true,
	"none": true, "null": true, "0": true, "0123456789": true, "01234567890123456789ab": true,
	"0000000000": true, "unknown": true,
}

// clean trims a string and blanks it when it is a placeholder.
func clean(s string) string {
	s = strings.TrimSpace(s)
	if placeholders[strings.ToLower(s)] || strings.Trim(s, ".") == "" || strings.Trim(s, "0") == "" {
		return ""
	}
	return s
}

func powerState(s string) metalv1alpha1.PowerState {
	switch strings.ToLower(s) {
	case "on":
		return metalv1alpha1.PowerStateOn
	case "off":
		return metalv1alpha1.PowerStateOff
	case "poweringon":
		return metalv1alpha1.PowerStatePoweringOn
	case "poweringoff":
		return metalv1alpha1.PowerStatePoweringOff
	default:
		return metalv1alpha1.PowerStateUnknown
	}
}
