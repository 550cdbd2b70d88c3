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

// connect20 renders per-suite errors the way go-ipmi v0.9.1's Connect20 does: joined, then
// flattened with %v.
func connect20(errs ...error) error {
	return fmt.Errorf("connect20 failed after try all cipher suite ids ([17 3]), errs: \n%v", errors.Join(errs...))
}

func TestClassifyConnect(t *testing.T) {
	short := errors.New("client exchange failed, err: unpack session setup response failed, err: unpacked data is too short (2/8)")
	rakp2 := fmt.Errorf("validate rakp2 message failed, err: RAKP2 authentication code mismatch: %w", client.ErrRAKPAuthentication)
	timeout := fmt.Errorf("IPMI LAN: no matching IPMI response (expected rqSeq 0x07, command 0x01) before UDP read deadline after 4 attempt(s): %w",
		&net.OpError{Op: "read", Net: "udp", Err: errors.New("i/o timeout")})
	status := func(code uint8) error {
		return fmt.Errorf("rakp1 failed with cipher suite id (3), err: %w", types.NewRmcpStatusError(types.RmcpStatusCode(code)))
	}
	for _, tc := range []struct {
		name   string
		err    error
		reason string
		text   string
	}{
		{"17 refused, 3 wrong password", connect20(short, rakp2), metalv1alpha1.BMCReasonAuthenticationFailed, "rejected the credentials"},
		{"RAKP4 mismatch", connect20(errors.New("rakp3 failed: RAKP4 authentication code mismatch")), metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"unauthorized name", connect20(short, status(0x0d)), metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"invalid integrity check", connect20(status(0x0f)), metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"unauthorized role", status(0x0a), metalv1alpha1.BMCReasonAuthenticationFailed, "rejected"},
		{"session table full", connect20(status(0x01), status(0x0b)), metalv1alpha1.BMCReasonUnreachable, "session table full"},
		{"no suite", connect20(short, short), metalv1alpha1.BMCReasonProtocolError, "neither cipher suite 17 nor 3"},
		{"suite refused by status", connect20(status(0x04), status(0x11)), metalv1alpha1.BMCReasonProtocolError, "never uses suite 0"},
		{"17 refused, 3 timed out", connect20(short, timeout), metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"auth caps timed out", fmt.Errorf("cmd: Get Channel Authentication Capabilities failed, err: %w", timeout), metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"deadline", context.DeadlineExceeded, metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"refused", errors.New("read udp 127.0.0.1:5->127.0.0.1:6: recvfrom: connection refused"), metalv1alpha1.BMCReasonUnreachable, "no answer"},
		{"other", errors.New("something odd"), metalv1alpha1.BMCReasonProtocolError, "something odd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{host: "::1", port: 623, creds: bmc.Credentials{Username: "admin", Password: "s3cret-pw"}}
			err := c.classifyConnect(tc.err)
			var be *bmc.Error
			require.ErrorAs(t, err, &be)
			assert.Equal(t, tc.reason, be.Reason)
			assert.Contains(t, err.Error(), tc.text)
			assert.Contains(t, err.Error(), "[::1]:623")
			assert.NotContains(t, err.Error(), "s3cret-pw")
		})
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
