package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stmcginnis/gofish/common"
	"github.com/stretchr/testify/assert"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// A media error keeps its reason and what errors.Is finds, but nothing reachable from it, by
// Unwrap or errors.As, holds the image URL: not the BMC's Redfish error (whose Error prints the
// raw answer), not a *bmc.Error under it.
func TestScrubbedErrorsExposeNoURL(t *testing.T) {
	image := "http://10.0.0.1:8080/boot/tok-5e3c1a/probe.iso"
	path := "/boot/tok-5e3c1a/probe.iso"
	body := `{"error":{"code":"Base.1.8.GeneralError","message":"cannot use ` + image + `","@Message.ExtendedInfo":[` +
		`{"MessageId":"IDRAC.2.8.RAC0904","Message":"Unable to connect to ` + image + `","MessageArgs":["` + image + `"],"Resolution":"Check ` + path + `"}]}}`
	redfishErr := common.ConstructError(http.StatusInternalServerError, []byte(body))
	gofishErr := common.ConstructError(0, []byte("Post \""+image+"\": EOF"))

	for name, tc := range map[string]struct {
		err         error
		reason      string
		unsupported bool
	}{
		"the BMC's answer":          {fmt.Errorf("ejecting the media of /x: %w", redfishErr), metalv1alpha1.BMCReasonProtocolError, false},
		"gofish's own failure":      {gofishErr, metalv1alpha1.BMCReasonProtocolError, false},
		"classified, wrapping it":   {bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported, fmt.Errorf("slot /x: %w (%w)", bmc.ErrUnsupported, redfishErr)), metalv1alpha1.BMCReasonVirtualMediaUnsupported, true},
		"classified, in its text":   {bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "fetching %s: timeout", image), metalv1alpha1.BMCReasonUnreachable, false},
		"a context error, wrapping": {fmt.Errorf("reading %s: %w", path, context.DeadlineExceeded), metalv1alpha1.BMCReasonUnreachable, false},
	} {
		t.Run(name, func(t *testing.T) {
			err := classifyMedia("inserting http://10.0.0.1:8080/… into /x", tc.err, image)
			assert.Empty(t, Leaks(err, path), "%v", err)
			assert.Equal(t, tc.reason, bmc.Reason(err))
			assert.Equal(t, tc.unsupported, errors.Is(err, bmc.ErrUnsupported))
			assert.Contains(t, err.Error(), "10.0.0.1:8080", "the image server is named")
			var re *common.Error
			if errors.As(tc.err, &re) && re.HTTPReturnedStatusCode != 0 && errors.As(err, &re) {
				assert.Equal(t, http.StatusInternalServerError, re.HTTPReturnedStatusCode, "the status is kept")
			}
		})
	}
}
