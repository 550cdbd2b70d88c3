package bmc

import (
	"errors"
	"fmt"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Error is a BMC failure classified by the reason a BMC's Ready condition reports.
type Error struct {
	// Reason is one of the metalv1alpha1.BMCReason* values.
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the reason and a formatted message.
func Errorf(reason, format string, args ...any) error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Classify wraps err with a reason, unless it already carries one.
func Classify(reason string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Reason: reason, Err: err}
}

// Reason is the condition reason for err: its own if it carries one, else ProtocolError.
func Reason(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return metalv1alpha1.BMCReasonProtocolError
}

// ErrUnsupported marks a feature the BMC does not offer (no Boot object, no Reset action).
var ErrUnsupported = errors.New("not supported by this BMC")
