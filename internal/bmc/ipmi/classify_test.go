package ipmi

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// connect20 renders a one-suite go-ipmi v0.9.1 Connect20 failure: the suite's error joined,
// then flattened with %v, under "try all cipher suite ids" (said whatever went wrong).
func connect20(suite int, err error) error {
	return fmt.Errorf("connect20 failed after try all cipher suite ids ([%d]), errs: \n%v", suite, errors.Join(err))
}

func TestClassifyConnect(t *testing.T) {
	short := errors.New("client exchange failed, err: unpack session setup response failed, err: unpacked data is too short (2/8)")
	timeout := fmt.Errorf("IPMI LAN: no matching IPMI response (expected rqSeq 0x07, command 0x01) before UDP read deadline after 4 attempt(s): %w",
		&net.OpError{Op: "read", Net: "udp", Err: errors.New("i/o timeout")})
	openSession := func(suite int, err error) error {
		return connect20(suite, fmt.Errorf("cmd: RMCP+ Open Session failed with cipher suite id (%d), err: %w", suite, err))
	}
	rakp1 := func(suite int, err error) error {
		return connect20(suite, fmt.Errorf("cmd: rakp1 failed with cipher suite id (%d), err: %w", suite, err))
	}
	status := func(code uint8) error { return types.NewRmcpStatusError(types.RmcpStatusCode(code)) }
	rakp2 := rakp1(3, fmt.Errorf("validate rakp2 message failed, err: RAKP2 authentication code mismatch: %w", client.ErrRAKPAuthentication))
	for _, tc := range []struct {
		name   string
		errs   []error
		reason string
		text   string
	}{
		{"17 refused, 3 wrong password", []error{openSession(17, short), rakp2}, metalv1alpha1.BMCReasonAuthenticationFailed, "rejected the credentials"},
		{"RAKP4 mismatch", []error{connect20(17, errors.New("cmd: rakp3 failed: RAKP4 authentication code mismatch"))}, metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"unauthorized name", []error{openSession(17, short), rakp1(3, status(0x0d))}, metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"invalid integrity check", []error{rakp1(17, status(0x0f))}, metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"unauthorized role", []error{rakp1(17, status(0x0a))}, metalv1alpha1.BMCReasonAuthenticationFailed, "refused the ADMINISTRATOR privilege level"},
		{"invalid role", []error{rakp1(17, status(0x09))}, metalv1alpha1.BMCReasonAuthenticationFailed, "?privilegelevel=OPERATOR"},
		{"privilege refused after login", []error{errors.New("SetSessionPrivilegeLevel to (ADMINISTRATOR) failed, err: completion code 0x81")},
			metalv1alpha1.BMCReasonAuthenticationFailed, "the user lacks it"},
		{"session table full", []error{openSession(17, status(0x01))}, metalv1alpha1.BMCReasonUnreachable, "session table full"},
		{"no suite", []error{openSession(17, short), openSession(3, short)}, metalv1alpha1.BMCReasonProtocolError, "neither cipher suite 17 nor 3"},
		{"suite refused by status", []error{openSession(17, status(0x11)), openSession(3, status(0x04))}, metalv1alpha1.BMCReasonProtocolError, "never uses suite 0"},
		{"17 refused, 3 timed out", []error{openSession(17, short), openSession(3, timeout)}, metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"auth caps timed out", []error{fmt.Errorf("cmd: Get Channel Authentication Capabilities failed, err: %w", timeout)}, metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"deadline", []error{context.DeadlineExceeded}, metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"refused", []error{errors.New("read udp 127.0.0.1:5->127.0.0.1:6: recvfrom: connection refused")}, metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"other", []error{errors.New("something odd")}, metalv1alpha1.BMCReasonProtocolError, "something odd"},
		{"17 refused, 3 odd", []error{openSession(17, short), rakp1(3, errors.New("something odd"))}, metalv1alpha1.BMCReasonProtocolError, "something odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{host: "::1", port: 623, creds: bmc.Credentials{Username: "admin", Password: "s3cret-pw"}}
			err := c.classifyConnect(tc.errs...)
			var be *bmc.Error
			require.ErrorAs(t, err, &be)
			assert.Equal(t, tc.reason, be.Reason)
			assert.Contains(t, err.Error(), tc.text)
			assert.Contains(t, err.Error(), "[::1]:623")
			assert.NotContains(t, err.Error(), "s3cret-pw")
			if tc.reason != metalv1alpha1.BMCReasonProtocolError || tc.text == "something odd" {
				assert.NotContains(t, err.Error(), "neither cipher suite", "only when every suite was refused")
			}
		})
	}
}

// TestSuiteRefused: suite 3 is tried after 17 only when 17 was refused (or unanswered) at Open
// Session, never after an authentication exchange.
func TestSuiteRefused(t *testing.T) {
	open := func(err error) error {
		return connect20(17, fmt.Errorf("cmd: RMCP+ Open Session failed with cipher suite id (17), err: %w", err))
	}
	for _, refused := range []error{
		open(fmt.Errorf("client exchange failed, err: unpack session setup response failed, err: %w", types.ErrUnpackedDataTooShortWith(2, 8))),
		open(types.NewRmcpStatusError(0x11)), open(types.NewRmcpStatusError(0x04)), open(types.NewRmcpStatusError(0x05)), open(types.NewRmcpStatusError(0x10)),
		open(fmt.Errorf("IPMI LAN: UDP read timed out: %w", context.DeadlineExceeded)),
	} {
		assert.True(t, suiteRefused(refused), "%v", refused)
	}
	for _, tried := range []error{
		connect20(17, fmt.Errorf("cmd: rakp1 failed with cipher suite id (17), err: %w", client.ErrRAKPAuthentication)),
		connect20(17, fmt.Errorf("cmd: rakp1 failed with cipher suite id (17), err: %w", types.NewRmcpStatusError(0x0d))),
		connect20(17, fmt.Errorf("cmd: rakp3 failed with cipher suite id (17), err: %w", types.NewRmcpStatusError(0x11))),
		open(types.NewRmcpStatusError(0x01)),
		fmt.Errorf("cmd: Get Channel Authentication Capabilities failed, err: %w", context.DeadlineExceeded),
	} {
		assert.False(t, suiteRefused(tried), "%v", tried)
	}
}

func TestClassifyCommand(t *testing.T) {
	c := &Client{host: "127.0.0.1", port: 623, creds: bmc.Credentials{Username: "admin", Password: "s3cret-pw"}}

	err := c.classifyCommand("power On", &ccError{cmd: types.CommandChassisControl, cc: 0xc1})
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
	assert.Contains(t, err.Error(), "Chassis Control: completion code 0xc1 (Invalid command)")

	err = c.classifyCommand("power On", fmt.Errorf("IPMI LAN: UDP read timed out waiting for BMC response after 4 attempt(s): %w", context.DeadlineExceeded))
	assert.Equal(t, metalv1alpha1.BMCReasonUnreachable, bmc.Reason(err))
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the cause stays reachable")

	already := unsupported("power action %q", "Nap")
	assert.Same(t, already, c.classifyCommand("power Nap", already))
	assert.ErrorIs(t, already, bmc.ErrUnsupported)

	err = c.scrubbed(metalv1alpha1.BMCReasonProtocolError, "library said %s", "password s3cret-pw")
	assert.NotContains(t, err.Error(), "s3cret-pw")
}
