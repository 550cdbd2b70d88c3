package ipmi

import (
	"context"
	"errors"
	"fmt"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Completion codes (IPMI v2.0 table 5-2 and §28.12) that mean "this BMC does not do that".
const (
	ccParameterNotSupported = 0x80
	ccInvalidCommand        = 0xC1
	ccParamOutOfRange       = 0xC9
	ccNotPresent            = 0xCB
	ccInvalidDataField      = 0xCC
	ccNotSupportedInState   = 0xD5
	ccNotSupportedDevice    = 0xD6
)

// ccError is a response whose completion code was not 0.
type ccError struct {
	cmd types.Command
	cc  uint8
}

func (e *ccError) Error() string {
	return fmt.Sprintf("IPMI %s: completion code %#02x (%s)", e.cmd.Name, e.cc, types.StrCC(e.cmd, e.cc))
}

// completionCode is err's completion code and whether it has one.
func completionCode(err error) (uint8, bool) {
	var cce *ccError
	if errors.As(err, &cce) {
		return cce.cc, true
	}
	return 0, false
}

// isUnsupportedCC reports whether err is a completion code meaning "not supported".
func isUnsupportedCC(err error) bool {
	cc, ok := completionCode(err)
	if !ok {
		return false
	}
	switch cc {
	case ccParameterNotSupported, ccInvalidCommand, ccParamOutOfRange, ccNotPresent, ccInvalidDataField, ccNotSupportedInState, ccNotSupportedDevice:
		return true
	}
	return false
}

// raw sends one command and returns its response data (after the completion code). Decoding
// is ours (decode.go): the library's decoders are stricter than real BMCs.
func raw(ctx context.Context, ic *client.Client, cmd types.Command, data ...byte) ([]byte, error) {
	res, err := ic.RawCommand(ctx, cmd.NetFn, cmd.ID, data, cmd.Name)
	if err != nil {
		if re, ok := types.IsResponseError(err); ok && re.CompletionCode() != 0 {
			return nil, &ccError{cmd: cmd, cc: uint8(re.CompletionCode())}
		}
		return nil, fmt.Errorf("IPMI %s: %w", cmd.Name, err)
	}
	return res.Response, nil
}
