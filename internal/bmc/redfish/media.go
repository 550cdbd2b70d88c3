package redfish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/common"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Virtual media (issue #20, docs/bmc-virtual-media.md). gofish v0.20.0 reads VirtualMedia but
// its Insert/Eject send a fixed payload, only through the actions, and hide the Allow and
// ETag headers, so the slots are read as raw JSON and the requests sent with c.api.

// Polling defaults for virtual media (Options.Media*).
const (
	defaultMediaPollInterval = time.Second
	defaultMediaInsertWait   = 60 * time.Second
	defaultMediaEjectWait    = 30 * time.Second
)

// mediaTiming bounds the waits for a BMC to report a change of its virtual media.
type mediaTiming struct {
	poll, insertWait, ejectWait time.Duration
}

func (o Options) mediaTiming() mediaTiming {
	t := mediaTiming{poll: o.MediaPollInterval, insertWait: o.MediaInsertTimeout, ejectWait: o.MediaEjectTimeout}
	if t.poll <= 0 {
		t.poll = defaultMediaPollInterval
	}
	if t.insertWait <= 0 {
		t.insertWait = defaultMediaInsertWait
	}
	if t.ejectWait <= 0 {
		t.ejectWait = defaultMediaEjectWait
	}
	return t
}

// VirtualMedia finds the system's CD/DVD slot and reports what it holds.
func (c *Client) VirtualMedia(ctx context.Context, systemURI string) (bmc.MediaSlot, error) {
	if err := ctx.Err(); err != nil {
		return bmc.MediaSlot{}, err
	}
	s, err := c.slot(systemURI)
	if err != nil {
		return bmc.MediaSlot{}, err
	}
	return bmc.MediaSlot{URI: s.uri, Image: s.image, Inserted: s.inserted}, nil
}

// InsertMedia makes imageURL the inserted media of the system's CD/DVD slot and waits until
// the BMC reports it (Inserted, with that Image). Media already inserted with this URL is left
// alone; other media is ejected first. The request is the one most BMCs take ({"Image"} to
// the InsertMedia action), adjusted by what a refusal names, or a PATCH of the slot where
// the BMC has no action (older iDRAC and iLO, XCC). No image URL is put in an error whole,
// neither this one nor one the slot held (another boot's): each is a boot's secret.
func (c *Client) InsertMedia(ctx context.Context, systemURI, imageURL string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if u, err := url.Parse(imageURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("inserting media into %s: the image URL must be an absolute http or https URL", systemURI)
	}
	s, err := c.slot(systemURI)
	if err != nil {
		return err
	}
	seen := &images{}
	seen.add(imageURL)
	seen.add(s.image)
	doing := fmt.Sprintf("inserting %s into %s", redact(imageURL), s.uri)
	fail := func(err error) error { return classifyMedia(doing, err, seen.urls...) }
	if sameImage(s.image, imageURL) {
		if s.inserted {
			return nil
		}
		// Ours, not reported inserted yet (a BMC that lags, a previous call that gave up
		// waiting): wait for it rather than insert it again.
		if err := c.waitSlot(ctx, s.uri, c.media.insertWait, func(s *slot) bool { return s.inserted && sameImage(s.image, imageURL) }, seen); err == nil {
			return nil
		} else if !isTimeout(err) {
			return fail(err)
		}
		if s, err = c.readSlot(s.uri, seen); err != nil {
			return fail(err)
		}
	}
	if !s.empty() {
		if err := c.ejectAndWait(ctx, s, seen); err != nil {
			return fail(err)
		}
	}
	if err := c.insert(ctx, s, imageURL, seen); err != nil {
		return fail(err)
	}
	err = c.waitSlot(ctx, s.uri, c.media.insertWait, func(s *slot) bool { return s.inserted && sameImage(s.image, imageURL) }, seen)
	if err != nil {
		return fail(err)
	}
	return nil
}

// insertParams are the parameters a refusal may name, and the value each takes when added.
var insertParams = []string{"TransferProtocolType", "TransferMethod", "Inserted", "WriteProtected"}

// insert sends the insert request: POST to the action, adjusting the payload as refusals
// ask (sushy's way: start with {"Image"} only, as Supermicro X11 refuses Inserted and
// WriteProtected; add TransferProtocolType or TransferMethod when a BMC names them missing),
// ejecting once when the BMC says the slot is in use; or PATCH with If-Match. The images the
// slot shows meanwhile are noted in seen.
func (c *Client) insert(ctx context.Context, s *slot, imageURL string, seen *images) error {
	if s.insertTarget == "" {
		if !s.patch {
			return bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported, fmt.Errorf("%s has no InsertMedia action and does not allow PATCH: %w", s.uri, bmc.ErrUnsupported))
		}
		return c.patchSlot(s, map[string]any{"Image": imageURL, "Inserted": true, "WriteProtected": true}, seen)
	}
	payload := map[string]any{"Image": imageURL}
	toggled := map[string]bool{}
	ejected := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		resp, err := c.api.Post(s.insertTarget, payload)
		if err == nil {
			drain(resp.Body)
			return nil
		}
		var re *common.Error
		if !errors.As(err, &re) {
			return err
		}
		switch re.HTTPReturnedStatusCode {
		case http.StatusConflict:
			// In use (iDRAC: eject first), perhaps media the slot did not show yet.
			if ejected {
				return err
			}
			ejected = true
			fresh, rerr := c.readSlot(s.uri, seen)
			if rerr != nil {
				return rerr
			}
			if eerr := c.ejectAndWait(ctx, fresh, seen); eerr != nil {
				return eerr
			}
			continue
		case http.StatusBadRequest:
			changed := false
			for _, p := range insertParams {
				if toggled[p] || !names(re, p) {
					continue
				}
				toggled[p], changed = true, true
				if _, present := payload[p]; present {
					delete(payload, p)
					continue
				}
				switch p {
				case "TransferProtocolType":
					u, _ := url.Parse(imageURL)
					payload[p] = strings.ToUpper(u.Scheme)
				case "TransferMethod":
					payload[p] = "Stream"
				default: // Inserted, WriteProtected
					payload[p] = true
				}
			}
			if changed {
				continue
			}
		}
		return err
	}
}

// names says whether a Redfish error names a parameter: in its MessageArgs, or failing
// those, in its messages.
func names(e *common.Error, param string) bool {
	hasArgs := false
	for _, info := range e.ExtendedInfos {
		for _, arg := range info.MessageArgs {
			hasArgs = true
			if strings.EqualFold(arg, param) {
				return true
			}
		}
	}
	if hasArgs {
		return false
	}
	text := e.Message
	for _, info := range e.ExtendedInfos {
		text += " " + info.Message
	}
	return strings.Contains(text, param)
}

// patchSlot PATCHes the slot with its ETag in If-Match, once more with a fresh ETag when the
// BMC says it changed meanwhile (noting its image in seen).
func (c *Client) patchSlot(s *slot, body map[string]any, seen *images) error {
	etag := s.etag
	for attempt := 0; ; attempt++ {
		headers := map[string]string{}
		if etag != "" {
			headers["If-Match"] = etag
		}
		resp, err := c.api.PatchWithHeaders(s.uri, body, headers)
		if err == nil {
			drain(resp.Body)
			return nil
		}
		var re *common.Error
		if attempt > 0 || !errors.As(err, &re) || re.HTTPReturnedStatusCode != http.StatusPreconditionFailed {
			return err
		}
		fresh, rerr := c.readSlot(s.uri, seen)
		if rerr != nil {
			return err
		}
		etag = fresh.etag
	}
}

// EjectMedia ejects whatever the system's CD/DVD slot holds and waits until the BMC reports
// it empty. An empty slot is left alone.
func (c *Client) EjectMedia(ctx context.Context, systemURI string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s, err := c.slot(systemURI)
	if err != nil {
		return err
	}
	if s.empty() {
		return nil
	}
	seen := &images{}
	seen.add(s.image)
	if err := c.ejectAndWait(ctx, s, seen); err != nil {
		return classifyMedia("ejecting the media of "+s.uri, err, seen.urls...)
	}
	return nil
}

// ejectAndWait ejects and waits until the slot reads not inserted (iDRAC keeps saying
// inserted for a while after an eject).
// The errors are unclassified (the callers classify them) unless already classified. The
// images the slot shows are noted in seen.
func (c *Client) ejectAndWait(ctx context.Context, s *slot, seen *images) error {
	if err := c.eject(s, seen); err != nil {
		// Refused, but perhaps because nothing is in (iLO refuses to eject an empty slot).
		fresh, rerr := c.readSlot(s.uri, seen)
		if rerr != nil || fresh.inserted {
			return fmt.Errorf("ejecting the media of %s: %w", s.uri, err)
		}
		return nil
	}
	if err := c.waitSlot(ctx, s.uri, c.media.ejectWait, func(s *slot) bool { return !s.inserted }, seen); err != nil {
		return fmt.Errorf("ejecting the media of %s: %w", s.uri, err)
	}
	return nil
}

// eject sends the eject request: POST to the action without a body, as the schema allows,
// then with {} when the BMC wants JSON (iLO: 415); or PATCH {"Image": null, "Inserted": false}.
func (c *Client) eject(s *slot, seen *images) error {
	if s.ejectTarget == "" {
		if !s.patch {
			return bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported, fmt.Errorf("%s has no EjectMedia action and does not allow PATCH: %w", s.uri, bmc.ErrUnsupported))
		}
		return c.patchSlot(s, map[string]any{"Image": nil, "Inserted": false}, seen)
	}
	resp, err := c.api.Post(s.ejectTarget, nil)
	if err == nil {
		drain(resp.Body)
		return nil
	}
	var re *common.Error
	if !errors.As(err, &re) || (re.HTTPReturnedStatusCode != http.StatusBadRequest && re.HTTPReturnedStatusCode != http.StatusUnsupportedMediaType) {
		return err
	}
	resp, err = c.api.Post(s.ejectTarget, struct{}{})
	if err != nil {
		return err
	}
	drain(resp.Body)
	return nil
}

// errWaitTimeout is a BMC that did not report a change within the bound.
var errWaitTimeout = errors.New("the BMC did not report the change in time")

func isTimeout(err error) bool { return errors.Is(err, errWaitTimeout) }

// waitSlot polls the slot until done holds, for at most wait, every poll interval, noting the
// images it shows in seen.
func (c *Client) waitSlot(ctx context.Context, uri string, wait time.Duration, done func(*slot) bool, seen *images) error {
	deadline := time.Now().Add(wait)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var last *slot
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
		s, err := c.readSlot(uri, seen)
		if err != nil {
			return err
		}
		if done(s) {
			return nil
		}
		last = s
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: after %s %s still reads Inserted=%t", errWaitTimeout, wait, uri, last.inserted)
		}
		timer.Reset(min(c.media.poll, time.Until(deadline)))
	}
}

// sameImage compares image URLs as BMCs echo them: exactly, or with the scheme and host in
// another case.
func sameImage(shown, want string) bool {
	if shown == want {
		return true
	}
	a, errA := url.Parse(shown)
	b, errB := url.Parse(want)
	return errA == nil && errB == nil && shown != "" &&
		strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host) && a.EscapedPath() == b.EscapedPath() && a.RawQuery == b.RawQuery
}
