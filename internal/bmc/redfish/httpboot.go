package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// HTTPBootSupported says whether the system can boot a URI by UEFI HTTP boot: its Boot object
// must offer the UefiHttp override target (when it lists its targets) and have HttpBootUri
// (ComputerSystem v1.9 and later). ErrUnsupported, wrapped, says what it lacks.
func (c *Client) HTTPBootSupported(ctx context.Context, systemURI string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctl, err := c.controls(systemURI)
	if err != nil {
		return err
	}
	return httpBootSupport(systemURI, ctl)
}

func httpBootSupport(systemURI string, ctl *systemControls) error {
	unsupported := func(format string, args ...any) error {
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s %s: %w", systemURI, fmt.Sprintf(format, args...), bmc.ErrUnsupported))
	}
	switch {
	case ctl.Boot == nil:
		return unsupported("has no Boot object")
	case len(ctl.Boot.TargetAllowed) > 0 && !slices.Contains(ctl.Boot.TargetAllowed, string(bmc.BootUefiHttp)):
		return unsupported("offers no UefiHttp boot target (it offers %s)", strings.Join(ctl.Boot.TargetAllowed, ", "))
	case len(ctl.Boot.HTTPBootURI) == 0:
		return unsupported("has no Boot.HttpBootUri (Redfish ComputerSystem v1.9): its firmware cannot be given a URI")
	case len(ctl.Boot.EnabledAllowed) > 0 && !slices.Contains(ctl.Boot.EnabledAllowed, "Once"):
		return unsupported("offers no Once boot override (it offers %s)", strings.Join(ctl.Boot.EnabledAllowed, ", "))
	}
	return nil
}

// SetHTTPBootOnce PATCHes the boot override to UefiHttp once with HttpBootUri url, and the
// override mode to UEFI where the system shows it in another mode (UEFI HTTP boot is UEFI's;
// Secure Boot is the SecureBoot resource's business). A BMC that refuses the PATCH with the
// mode in it (400) gets it once more without, as setBoot does. Errors never hold url: BMCs echo
// values they refuse.
func (c *Client) SetHTTPBootOnce(ctx context.Context, systemURI, url string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctl, err := c.controls(systemURI)
	if err != nil {
		return err
	}
	if err := httpBootSupport(systemURI, ctl); err != nil {
		return err
	}
	boot := map[string]string{
		"BootSourceOverrideTarget":  string(bmc.BootUefiHttp),
		"BootSourceOverrideEnabled": "Once",
		"HttpBootUri":               url,
	}
	const uefi = "UEFI"
	withMode := false
	if !strings.EqualFold(ctl.Boot.Mode, uefi) && (slices.Contains(ctl.Boot.ModeAllowed, uefi) || (len(ctl.Boot.ModeAllowed) == 0 && ctl.Boot.Mode != "")) {
		boot["BootSourceOverrideMode"] = uefi
		withMode = true
	}
	doing := fmt.Sprintf("setting %s to boot %s by UEFI HTTP boot once", systemURI, redact(url))
	resp, err := c.patchBoot(systemURI, boot, withMode)
	if err != nil {
		var redfishErr *common.Error
		refused := errors.As(err, &redfishErr) && redfishErr.HTTPReturnedStatusCode == http.StatusBadRequest
		err = classifyMedia(doing, err, url)
		if refused {
			// It shows UefiHttp and HttpBootUri, and refuses them: as good as without.
			return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("%w (refused: %w)", err, bmc.ErrUnsupported))
		}
		return err
	}
	drain(resp.Body)
	return nil
}
