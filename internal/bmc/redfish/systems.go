package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Systems lists the BMC's computer systems (or the one its address names).
func (c *Client) Systems(ctx context.Context) ([]bmc.SystemInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var systems []*redfish.ComputerSystem
	if c.systemPath != "" {
		system, err := redfish.GetComputerSystem(c.api, c.systemPath)
		if err != nil {
			return nil, classify("reading system "+c.systemPath, err)
		}
		systems = []*redfish.ComputerSystem{system}
	} else {
		links, err := c.systemLinks()
		if err != nil {
			return nil, err
		}
		if systems, err = common.GetObjects[redfish.ComputerSystem](c.api, links); err != nil {
			return nil, classify("listing systems", err)
		}
	}
	out := make([]bmc.SystemInfo, 0, len(systems))
	for _, s := range systems {
		out = append(out, systemInfo(s))
	}
	return out, nil
}

// systemLinks reads the Systems collection's members and refuses a BMC that lists more than
// maxSystems before any of them is read: each member read costs a request, and each system a
// Server.
func (c *Client) systemLinks() ([]string, error) {
	links, err := c.memberLinks(c.root.systems, c.maxSystems)
	var tooMany *tooManyMembers
	if errors.As(err, &tooMany) {
		return nil, bmc.Errorf(metalv1alpha1.BMCReasonTooManySystems,
			"the BMC lists %s, more than the %d a BMC may have (--max-systems-per-bmc): no server is made for any of them", tooMany.count("systems"), c.maxSystems)
	}
	var failed *pageError
	if errors.As(err, &failed) {
		return nil, classify("listing systems: reading "+failed.page, failed.err)
	}
	return links, err
}

// memberLinks reads a collection's member links, page by page (Members@odata.nextLink),
// and stops with a *tooManyMembers as soon as there are more than max.
func (c *Client) memberLinks(collection string, max int) ([]string, error) {
	var links []string
	for page, next := 0, collection; next != ""; page++ {
		// A page lists one member at least: more pages than max are too many members, or
		// pages that list none and never end.
		if page > max {
			return nil, &tooManyMembers{listed: len(links), pages: page}
		}
		col, err := common.GetCollection(c.api, next)
		if err != nil {
			return nil, &pageError{page: next, err: err}
		}
		links = append(links, col.ItemLinks...)
		next = col.MembersNextLink
		if len(links) > max {
			return nil, &tooManyMembers{listed: len(links), more: next != ""}
		}
	}
	return links, nil
}

// tooManyMembers: a collection lists more members than its reader takes.
type tooManyMembers struct {
	listed int
	// more: there were pages still unread; pages, when not 0: the pages read, which
	// outnumbered the bound.
	more  bool
	pages int
}

func (e *tooManyMembers) count(what string) string {
	switch {
	case e.pages > 0:
		return fmt.Sprintf("%d %s on %d pages and more pages", e.listed, what, e.pages)
	case e.more:
		return fmt.Sprintf("at least %d %s", e.listed, what)
	}
	return fmt.Sprintf("%d %s", e.listed, what)
}

func (e *tooManyMembers) Error() string {
	return "the collection lists " + e.count("members") + ", too many"
}

// pageError: reading a page of a collection failed.
type pageError struct {
	page string
	err  error
}

func (e *pageError) Error() string { return "reading " + e.page + ": " + e.err.Error() }
func (e *pageError) Unwrap() error { return e.err }

func systemInfo(s *redfish.ComputerSystem) bmc.SystemInfo {
	return bmc.SystemInfo{
		URI:          s.ODataID,
		ID:           s.ID,
		UUID:         normaliseUUID(s.UUID),
		Manufacturer: clean(s.Manufacturer),
		Model:        clean(s.Model),
		SerialNumber: clean(s.SerialNumber),
		SKU:          clean(s.SKU),
		BIOSVersion:  clean(s.BIOSVersion),
		PowerState:   powerState(string(s.PowerState)),
	}
}

// PowerState reads one system's power state.
func (c *Client) PowerState(ctx context.Context, systemURI string) (metalv1alpha1.PowerState, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return "", classify("reading system "+systemURI, err)
	}
	return powerState(string(system.PowerState)), nil
}

// normaliseUUID lower-cases a UUID and blanks the all-zero and all-F ones some BMCs report.
func normaliseUUID(u string) string {
	u = strings.ToLower(strings.TrimSpace(u))
	if strings.Trim(u, "0-") == "" || strings.Trim(u, "f-") == "" {
		return ""
	}
	return u
}

// Manager reads the BMC's own identity (the first manager of type BMC, else the first).
func (c *Client) Manager(ctx context.Context) (bmc.ManagerInfo, error) {
	if err := ctx.Err(); err != nil {
		return bmc.ManagerInfo{}, err
	}
	managers, err := redfish.ListReferencedManagers(c.api, c.root.managers)
	if err != nil {
		return bmc.ManagerInfo{}, classify("listing managers", err)
	}
	if len(managers) == 0 {
		return bmc.ManagerInfo{}, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "the BMC lists no managers")
	}
	m := managers[0]
	for _, candidate := range managers {
		if candidate.ManagerType == redfish.BMCManagerType {
			m = candidate
			break
		}
	}
	return bmc.ManagerInfo{
		Manufacturer:    clean(m.Manufacturer),
		Model:           clean(m.Model),
		SerialNumber:    clean(m.SerialNumber),
		FirmwareVersion: clean(m.FirmwareVersion),
		PowerState:      powerState(string(m.PowerState)),
	}, nil
}

// systemControls is the part of a ComputerSystem's raw JSON that gofish does not expose:
// the reset action's target and allowed values (inline or through ActionInfo) and the boot
// override's allowed values.
type systemControls struct {
	Manufacturer string
	Links        struct {
		ManagedBy []link
	}
	Actions struct {
		Reset *struct {
			Target     string   `json:"target"`
			Allowable  []string `json:"ResetType@Redfish.AllowableValues"`
			ActionInfo string   `json:"@Redfish.ActionInfo"`
		} `json:"#ComputerSystem.Reset"`
	}
	Boot *struct {
		Enabled        string   `json:"BootSourceOverrideEnabled"`
		EnabledAllowed []string `json:"BootSourceOverrideEnabled@Redfish.AllowableValues"`
		TargetAllowed  []string `json:"BootSourceOverrideTarget@Redfish.AllowableValues"`
		Mode           string   `json:"BootSourceOverrideMode"`
		ModeAllowed    []string `json:"BootSourceOverrideMode@Redfish.AllowableValues"`
		// HTTPBootURI is kept raw: present (a string, or null when unset) is what matters.
		HTTPBootURI json.RawMessage `json:"HttpBootUri"`
	}
}

// patchBoot PATCHes the system's Boot object with boot; a BMC that refuses it with the override
// mode in it (withMode; 400) gets it once more without.
func (c *Client) patchBoot(systemURI string, boot map[string]string, withMode bool) (*http.Response, error) {
	resp, err := c.api.Patch(systemURI, map[string]any{"Boot": boot})
	var redfishErr *common.Error
	if withMode && errors.As(err, &redfishErr) && redfishErr.HTTPReturnedStatusCode == http.StatusBadRequest {
		delete(boot, "BootSourceOverrideMode")
		resp, err = c.api.Patch(systemURI, map[string]any{"Boot": boot})
	}
	return resp, err
}

func (c *Client) controls(systemURI string) (*systemControls, error) {
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return nil, classify("reading system "+systemURI, err)
	}
	var ctl systemControls
	if err := json.Unmarshal(system.RawData, &ctl); err != nil {
		return nil, bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "reading system %s: %v", systemURI, err)
	}
	return &ctl, nil
}

// resetCandidates lists, best first, the Redfish reset types that carry out each action.
var resetCandidates = map[bmc.PowerAction][]string{
	bmc.PowerOn:               {"On", "ForceOn"},
	bmc.PowerOff:              {"ForceOff"},
	bmc.PowerGracefulShutdown: {"GracefulShutdown"},
	bmc.PowerForceRestart:     {"ForceRestart", "PowerCycle", "GracefulRestart"},
}

// SetPower requests a power action with a reset type the BMC offers.
func (c *Client) SetPower(ctx context.Context, systemURI string, action bmc.PowerAction) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	candidates, ok := resetCandidates[action]
	if !ok {
		return fmt.Errorf("unknown power action %q", action)
	}
	ctl, err := c.controls(systemURI)
	if err != nil {
		return err
	}
	if ctl.Actions.Reset == nil || ctl.Actions.Reset.Target == "" {
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s has no Reset action: %w", systemURI, bmc.ErrUnsupported))
	}
	allowed := ctl.Actions.Reset.Allowable
	if len(allowed) == 0 && ctl.Actions.Reset.ActionInfo != "" {
		allowed = c.actionInfoAllowable(ctl.Actions.Reset.ActionInfo, "ResetType")
	}
	resetType := candidates[0]
	if len(allowed) > 0 {
		resetType = ""
		for _, candidate := range candidates {
			if slices.Contains(allowed, candidate) {
				resetType = candidate
				break
			}
		}
		if resetType == "" {
			return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s offers reset types %v, none of which does %s: %w", systemURI, allowed, action, bmc.ErrUnsupported))
		}
	}
	resp, err := c.api.Post(ctl.Actions.Reset.Target, map[string]string{"ResetType": resetType})
	if err != nil {
		if c.alreadyThere(ctx, systemURI, action, err) {
			return nil
		}
		return classify(fmt.Sprintf("resetting %s (%s)", systemURI, resetType), err)
	}
	drain(resp.Body)
	return nil
}

// alreadyThere says whether a refused power action was refused because the system is already
// in the state it asks for: some BMCs (iDRAC) answer an On for a system that is on, or a
// ForceOff for one that is off, with 409 or 400 instead of doing nothing. Such a request is
// done, not failed: retrying it would loop for ever.
func (c *Client) alreadyThere(ctx context.Context, systemURI string, action bmc.PowerAction, err error) bool {
	var redfishErr *common.Error
	if !errors.As(err, &redfishErr) || (redfishErr.HTTPReturnedStatusCode != http.StatusConflict && redfishErr.HTTPReturnedStatusCode != http.StatusBadRequest) {
		return false
	}
	var want metalv1alpha1.PowerState
	switch action {
	case bmc.PowerOn:
		want = metalv1alpha1.PowerStateOn
	case bmc.PowerOff, bmc.PowerGracefulShutdown:
		want = metalv1alpha1.PowerStateOff
	default:
		return false // a restart is never "already done"
	}
	now, perr := c.PowerState(ctx, systemURI)
	return perr == nil && now == want
}

// actionInfoAllowable reads a parameter's allowable values from an ActionInfo resource; a
// failure means "unknown", and the caller falls back to its first choice.
func (c *Client) actionInfoAllowable(uri, parameter string) []string {
	resp, err := c.api.Get(uri)
	if err != nil {
		return nil
	}
	defer drain(resp.Body)
	var info struct {
		Parameters []struct {
			Name            string
			AllowableValues []string
		}
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&info) != nil {
		return nil
	}
	for _, p := range info.Parameters {
		if p.Name == parameter {
			return p.AllowableValues
		}
	}
	return nil
}

// SetBootOnce points the next boot at target, in mode's firmware mode (see setBoot).
func (c *Client) SetBootOnce(ctx context.Context, systemURI string, target bmc.BootTarget, mode metalv1alpha1.BootMode) error {
	return c.setBoot(ctx, systemURI, target, "Once", mode)
}

// SetBootPersistent points every boot from now on at target (BootSourceOverrideEnabled
// Continuous): an installed server boots its disk on every power-on, whatever the boot order
// says.
func (c *Client) SetBootPersistent(ctx context.Context, systemURI string, target bmc.BootTarget, mode metalv1alpha1.BootMode) error {
	return c.setBoot(ctx, systemURI, target, "Continuous", mode)
}

// setBoot PATCHes the boot override. BootSourceOverrideMode is sent only when a mode is asked
// for, the system shows the property (it lists the wanted value among its allowable ones, or,
// listing none, reports a current mode) and the mode differs from the current one: some BMCs
// refuse to PATCH it at all (iDRAC), and a PATCH that needs no mode change must not fail for
// it. A Cd boot of a Dell system whose iDRAC offers ImportSystemConfiguration goes through it
// instead (dell.go): iDRAC's Cd is the physical drive. A BMC that refuses the PATCH with the
// mode in it (400) gets it once more without: the
// boot happens in the firmware's own mode, which the probe then reports (and the server's
// BootMode condition compares with spec.bootMode).
func (c *Client) setBoot(ctx context.Context, systemURI string, target bmc.BootTarget, enabled string, mode metalv1alpha1.BootMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctl, err := c.controls(systemURI)
	if err != nil {
		return err
	}
	if ctl.Boot == nil {
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s has no Boot object: %w", systemURI, bmc.ErrUnsupported))
	}
	if len(ctl.Boot.TargetAllowed) > 0 && !slices.Contains(ctl.Boot.TargetAllowed, string(target)) {
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s cannot boot from %s (offers %v): %w", systemURI, target, ctl.Boot.TargetAllowed, bmc.ErrUnsupported))
	}
	if len(ctl.Boot.EnabledAllowed) > 0 && !slices.Contains(ctl.Boot.EnabledAllowed, enabled) {
		return bmc.Classify(metalv1alpha1.BMCReasonProtocolError, fmt.Errorf("system %s offers no %s boot override (offers %v): %w", systemURI, enabled, ctl.Boot.EnabledAllowed, bmc.ErrUnsupported))
	}
	if target == bmc.BootCd {
		if action, fqdd := c.dellVirtualCD(ctl); action != "" {
			return c.dellBootVirtualCD(ctx, systemURI, action, fqdd, enabled)
		}
	}
	boot := map[string]string{
		"BootSourceOverrideTarget":  string(target),
		"BootSourceOverrideEnabled": enabled,
	}
	withMode := false
	if want := overrideMode(mode); want != "" && !strings.EqualFold(ctl.Boot.Mode, want) &&
		(slices.Contains(ctl.Boot.ModeAllowed, want) || (len(ctl.Boot.ModeAllowed) == 0 && ctl.Boot.Mode != "")) {
		boot["BootSourceOverrideMode"] = want
		withMode = true
	}
	resp, err := c.patchBoot(systemURI, boot, withMode)
	if err != nil {
		return classify(fmt.Sprintf("setting %s to boot from %s (%s)", systemURI, target, enabled), err)
	}
	drain(resp.Body)
	return nil
}

func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<20))
	_ = body.Close()
}
