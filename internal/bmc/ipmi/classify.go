package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// RMCP+ status codes (IPMI v2.0 table 13-15) that decide a connect failure's reason.
const (
	rmcpInsufficientResources     = 0x01
	rmcpInvalidAuthAlgorithm      = 0x04
	rmcpInvalidIntegrityAlgorithm = 0x05
	rmcpInvalidRole               = 0x09
	rmcpUnauthorizedRole          = 0x0A
	rmcpInsufficientResourcesRole = 0x0B
	rmcpInvalidNameLength         = 0x0C
	rmcpUnauthorizedName          = 0x0D
	rmcpInvalidIntegrityCheck     = 0x0F
	rmcpInvalidConfidentiality    = 0x10
	rmcpNoCipherSuiteMatch        = 0x11
)

// rmcpStatusText finds the RMCP+ status codes go-ipmi printed ("RMCP+ status 0xd: …"): its
// Connect flattens the per-suite errors with %v, so errors.As cannot reach them.
var rmcpStatusText = regexp.MustCompile(`RMCP\+ status 0x([0-9a-fA-F]{1,2})`)

// rmcpStatuses lists the RMCP+ status codes in err's chain and text.
func rmcpStatuses(err error) map[uint8]bool {
	found := map[uint8]bool{}
	var se *types.RmcpStatusError
	if errors.As(err, &se) {
		found[uint8(se.StatusCode())] = true
	}
	for _, m := range rmcpStatusText.FindAllStringSubmatch(err.Error(), -1) {
		if n, perr := strconv.ParseUint(m[1], 16, 8); perr == nil {
			found[uint8(n)] = true
		}
	}
	return found
}

func anyOf(found map[uint8]bool, codes ...uint8) bool {
	for _, c := range codes {
		if found[c] {
			return true
		}
	}
	return false
}

// isAuthFailure reports whether err says the BMC rejected the credentials: a RAKP2/RAKP4
// authentication code mismatch (wrong password) or an RMCP+ status naming the user or
// integrity check. (Role statuses are isPrivilegeRefused.)
func isAuthFailure(err error) bool {
	if errors.Is(err, client.ErrRAKPAuthentication) {
		return true
	}
	text := err.Error()
	if strings.Contains(text, client.ErrRAKPAuthentication.Error()) ||
		strings.Contains(text, "authentication code mismatch") {
		return true
	}
	return anyOf(rmcpStatuses(err), rmcpInvalidNameLength, rmcpUnauthorizedName, rmcpInvalidIntegrityCheck)
}

// isPrivilegeRefused reports whether err says the user may not have the privilege level the
// session asked for: RAKP2 status "invalid role" or "unauthorized role or privilege level", or
// a refused Set Session Privilege Level once logged in.
func isPrivilegeRefused(err error) bool {
	return anyOf(rmcpStatuses(err), rmcpInvalidRole, rmcpUnauthorizedRole) ||
		(strings.Contains(err.Error(), "SetSessionPrivilegeLevel to") && !isNoResponse(err))
}

// openSessionFailed reports whether a one-suite go-ipmi Connect error happened at RMCP+ Open
// Session, before any authentication exchange.
func openSessionFailed(err error) bool {
	return strings.Contains(err.Error(), "RMCP+ Open Session failed")
}

// cipherRefused reports whether a one-suite connect failed because the BMC refused the suite
// at Open Session: an RMCP+ status naming an algorithm or "no matching cipher suite", or the
// short reply ipmi_sim gives for suites it lacks.
func cipherRefused(err error) bool {
	return openSessionFailed(err) &&
		(anyOf(rmcpStatuses(err), rmcpInvalidAuthAlgorithm, rmcpInvalidIntegrityAlgorithm, rmcpInvalidConfidentiality, rmcpNoCipherSuiteMatch) ||
			errors.Is(err, types.ErrUnpackedDataTooShort) || strings.Contains(err.Error(), types.ErrUnpackedDataTooShort.Error()))
}

// suiteRefused reports whether the next cipher suite should be tried after err: the BMC
// refused the suite, or did not answer its Open Session (some BMCs drop suites they lack).
// Never after an authentication exchange (RAKP) failed: that was a login attempt.
func suiteRefused(err error) bool {
	return cipherRefused(err) || (openSessionFailed(err) && isNoResponse(err))
}

// isNoResponse reports whether err means the BMC did not answer: UDP timeouts, no matching
// response after every attempt, ICMP port unreachable, or the context's deadline.
func isNoResponse(err error) bool {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		(errors.As(err, &ne) && ne.Timeout()) {
		return true
	}
	text := err.Error()
	for _, s := range []string{"no matching IPMI response", "no UDP datagram matched", "no datagram matched",
		"UDP read timed out", "i/o timeout", "deadline exceeded", "connection refused"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// classifyConnect gives a failed login its condition reason; errs are the failures of each
// cipher suite tried, in order. Order matters: "17 refused, 3 rejected the password" is a
// password problem and "17 refused, 3 timed out" an unreachable BMC.
func (c *Client) classifyConnect(errs ...error) error {
	what := fmt.Sprintf("IPMI login to %s as %q", c.endpoint(), c.creds.Username)
	err := errors.Join(errs...)
	allRefused := len(errs) > 0
	for _, e := range errs {
		allRefused = allRefused && cipherRefused(e)
	}
	switch {
	case isPrivilegeRefused(err):
		name, advice := c.privilegeRefusal()
		return c.scrubbed(metalv1alpha1.BMCReasonAuthenticationFailed,
			"%s: the BMC refused the %s privilege level: the user lacks it, the password was not checked (%s): %v",
			what, name, advice, err)
	case isAuthFailure(err):
		return c.scrubbed(metalv1alpha1.BMCReasonAuthenticationFailed, "%s: BMC rejected the credentials: %v", what, err)
	case anyOf(rmcpStatuses(err), rmcpInsufficientResources, rmcpInsufficientResourcesRole):
		return c.scrubbed(metalv1alpha1.BMCReasonUnreachable, "%s: BMC session table full: %v", what, err)
	case isNoResponse(err):
		return c.scrubbed(metalv1alpha1.BMCReasonUnreachable, "%s: no answer: %v", what, err)
	case allRefused:
		return c.scrubbed(metalv1alpha1.BMCReasonProtocolError,
			"%s: BMC offers neither cipher suite 17 nor 3 (Ironfleet never uses suite 0, which authenticates nothing): %v", what, err)
	default:
		return c.scrubbed(metalv1alpha1.BMCReasonProtocolError, "%s: %v", what, err)
	}
}

// privilegeRefusal names the session privilege asked for, as ?privilegelevel= spells it, and
// says what to do when the BMC refused it.
func (c *Client) privilegeRefusal() (name, advice string) {
	switch c.privilege {
	case types.PrivilegeLevelOperator:
		return "OPERATOR", "ask for less with ?privilegelevel=USER in the BMC address, or grant the user OPERATOR; Ironfleet needs OPERATOR to power and boot"
	case types.PrivilegeLevelUser:
		return "USER", "grant the user at least USER on the BMC's LAN channel"
	default:
		return "ADMINISTRATOR", "ask for less with ?privilegelevel=OPERATOR in the BMC address, or grant the user ADMINISTRATOR"
	}
}

// classifyCommand gives a failed command its reason; errors already classified keep theirs.
func (c *Client) classifyCommand(what string, err error) error {
	var classified *bmc.Error
	if errors.As(err, &classified) {
		return err
	}
	var cce *ccError
	switch {
	case errors.As(err, &cce):
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("%s: %w", what, err))
	case isNoResponse(err):
		return c.scrubbed(metalv1alpha1.BMCReasonUnreachable, "%s: BMC %s did not answer: %v", what, c.endpoint(), err)
	default:
		return c.scrubbed(metalv1alpha1.BMCReasonProtocolError, "%s: %v", what, err)
	}
}

// scrubbed formats a classified error, removing the password should a library ever print it.
func (c *Client) scrubbed(reason, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if p := c.creds.Password; len(p) >= 4 {
		msg = strings.ReplaceAll(msg, p, "<password>")
	}
	var cause error
	for _, a := range args {
		if e, ok := a.(error); ok {
			cause = e
		}
	}
	return &bmc.Error{Reason: reason, Err: &scrubbedError{msg: msg, cause: cause}}
}

// scrubbedError is a message without secrets that still unwraps to its cause, for errors.Is.
type scrubbedError struct {
	msg   string
	cause error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.cause }

func (c *Client) endpoint() string {
	return net.JoinHostPort(c.host, strconv.Itoa(c.port))
}
