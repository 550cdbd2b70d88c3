package redfish

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stmcginnis/gofish/common"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

// TransportOf is the HTTP transport a client's requests go through.
func TransportOf(c *Client) *http.Transport {
	return c.api.HTTPClient.Transport.(keepAlive).next.(limitBodies).next.(*http.Transport)
}

// WrapTransport puts wrap around a client's HTTP transport: tests make the BMC answer what
// the simulator does not. (TransportOf no longer works on the client.)
func WrapTransport(c *Client, wrap func(http.RoundTripper) http.RoundTripper) {
	c.api.HTTPClient.Transport = wrap(c.api.HTTPClient.Transport)
}

// Leaks lists where any of secrets shows in err: in its text, or in the text or fields of an
// error reachable from it, by Unwrap (one or many) or by errors.As as a *common.Error (every
// field a caller could log) or a *bmc.Error (and what it wraps).
func Leaks(err error, secrets ...string) []string {
	var leaks []string
	check := func(where, text string) {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				leaks = append(leaks, fmt.Sprintf("%s holds %q: %s", where, s, text))
			}
		}
	}
	var walk func(path string, e error, depth int)
	walk = func(path string, e error, depth int) {
		if e == nil || depth > 20 {
			return
		}
		path = fmt.Sprintf("%s/%T", path, e)
		check(path+".Error()", e.Error())
		var re *common.Error
		if errors.As(e, &re) {
			check(path+" as *common.Error: Error()", re.Error())
			check(path+" as *common.Error: Code", re.Code)
			check(path+" as *common.Error: Message", re.Message)
			for _, info := range re.ExtendedInfos {
				check(path+" as *common.Error: ExtendedInfo", strings.Join(append([]string{info.MessageID, info.Message, info.Severity, info.Resolution}, info.MessageArgs...), " | "))
			}
		}
		var be *bmc.Error
		if errors.As(e, &be) {
			check(path+" as *bmc.Error: Error()", be.Error())
			if be.Err != nil {
				check(path+" as *bmc.Error: Err", be.Err.Error())
				if inner := errors.Unwrap(be.Err); inner != nil {
					walk(path+" as *bmc.Error: Err", inner, depth+1)
				}
			}
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(path, u.Unwrap(), depth+1)
		case interface{ Unwrap() []error }:
			for _, inner := range u.Unwrap() {
				walk(path, inner, depth+1)
			}
		}
	}
	walk("", err, 0)
	return leaks
}

// SessionsOf is the TLS session cache of a client's transport: how many sessions it keeps, and
// a way to damage the one kept for key.
func SessionsOf(c *Client) (kept func() int, damage func(key string)) {
	cache := TransportOf(c).TLSClientConfig.ClientSessionCache.(*sessionCache)
	return cache.lru.Len, func(key string) {
		if v, ok := cache.lru.Get(key); ok {
			s := v.(session)
			cache.lru.Add(key, session{ticket: s.ticket, state: s.state[:len(s.state)/2]})
		}
	}
}
