package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
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

// slot is one VirtualMedia resource as read now.
type slot struct {
	uri                       string
	mediaTypes                []string
	image                     string
	inserted                  bool
	insertTarget, ejectTarget string
	patch                     bool   // the resource's Allow header lists PATCH
	etag                      string // for If-Match
}

// cd says whether the slot takes CDs or DVDs (Cisco blades offer DVD only).
func (s *slot) cd() bool {
	return slices.ContainsFunc(s.mediaTypes, func(t string) bool { return strings.EqualFold(t, "CD") || strings.EqualFold(t, "DVD") })
}

// usable says whether media can be inserted: through the action or by PATCH.
func (s *slot) usable() bool { return s.insertTarget != "" || s.patch }

// empty says whether the slot holds nothing, as far as the BMC shows.
func (s *slot) empty() bool { return !s.inserted && s.image == "" }

type link struct {
	ID string `json:"@odata.id"`
}

// getJSON GETs uri and decodes its JSON into v, returning the response's headers.
func (c *Client) getJSON(uri string, v any) (http.Header, error) {
	resp, err := c.api.Get(uri)
	if err != nil {
		return nil, err
	}
	defer drain(resp.Body)
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", uri, err)
	}
	return resp.Header, nil
}

// readSlot reads one VirtualMedia resource, noting the image it holds in seen (which may be nil).
func (c *Client) readSlot(uri string, seen *images) (*slot, error) {
	var raw struct {
		ODataID    string `json:"@odata.id"`
		MediaTypes []string
		Image      *string
		Inserted   *bool
		Actions    struct {
			Insert *struct {
				Target string `json:"target"`
			} `json:"#VirtualMedia.InsertMedia"`
			Eject *struct {
				Target string `json:"target"`
			} `json:"#VirtualMedia.EjectMedia"`
		}
	}
	header, err := c.getJSON(uri, &raw)
	if err != nil {
		return nil, err
	}
	s := &slot{uri: uri, mediaTypes: raw.MediaTypes, etag: header.Get("ETag")}
	if raw.Image != nil {
		s.image = *raw.Image
		seen.add(s.image)
	}
	if raw.Inserted != nil {
		s.inserted = *raw.Inserted
	} else {
		s.inserted = s.image != "" // no Inserted: an image means media
	}
	if raw.Actions.Insert != nil {
		s.insertTarget = raw.Actions.Insert.Target
	}
	if raw.Actions.Eject != nil {
		s.ejectTarget = raw.Actions.Eject.Target
	}
	for m := range strings.SplitSeq(header.Get("Allow"), ",") {
		if strings.EqualFold(strings.TrimSpace(m), http.MethodPatch) {
			s.patch = true
		}
	}
	return s, nil
}

// missing says whether err is a BMC saying a resource is not there (or not readable as
// one): such a place holds no slots, and the search goes on.
func missing(err error) bool {
	var re *common.Error
	if errors.As(err, &re) {
		switch re.HTTPReturnedStatusCode {
		case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusBadRequest:
			return true
		}
	}
	return false
}

// sameURI compares two @odata.id values as BMCs spell them (case, trailing slash).
func sameURI(a, b string) bool {
	return strings.EqualFold(strings.TrimRight(a, "/"), strings.TrimRight(b, "/"))
}

// findSlot looks for the system's CD/DVD slot: under the System, then under the Managers that
// manage it, then under every Manager (Ironic's order; iDRAC ≥ 6 and DMTF's current model keep
// slots under the System, iLO, XCC, Supermicro and OpenBMC under the Manager). The first slot
// that takes CDs or DVDs and can be filled (an InsertMedia action, or PATCH allowed) wins.
func (c *Client) findSlot(systemURI string) (*slot, error) {
	var sys struct {
		VirtualMedia *link
		Links        struct{ ManagedBy []link }
	}
	if _, err := c.getJSON(systemURI, &sys); err != nil {
		return nil, classify("reading system "+systemURI, err)
	}
	var collections []string
	if sys.VirtualMedia != nil && sys.VirtualMedia.ID != "" {
		collections = append(collections, sys.VirtualMedia.ID)
	}
	var managers []string
	for _, m := range sys.Links.ManagedBy {
		if m.ID != "" {
			managers = append(managers, m.ID)
		}
	}
	var notCD, notUsable []string
	search := func(collection string) (*slot, error) {
		var coll struct{ Members []link }
		if _, err := c.getJSON(collection, &coll); err != nil {
			if missing(err) {
				return nil, nil
			}
			return nil, classify("reading "+collection, err)
		}
		for _, m := range coll.Members {
			s, err := c.readSlot(m.ID, nil)
			if err != nil {
				if missing(err) {
					continue
				}
				return nil, classify("reading "+m.ID, err)
			}
			switch {
			case !s.cd():
				notCD = append(notCD, fmt.Sprintf("%s offers %s", m.ID, strings.Join(s.mediaTypes, "/")))
			case !s.usable():
				notUsable = append(notUsable, m.ID)
			default:
				return s, nil
			}
		}
		return nil, nil
	}
	searched := 0
	for _, coll := range collections {
		searched++
		if s, err := search(coll); s != nil || err != nil {
			return s, err
		}
	}
	// Every Manager, after those of the System: listed only when those had no slot.
	allManagers := func() ([]string, error) {
		var root struct{ Managers *link }
		if _, err := c.getJSON(c.serviceRoot(), &root); err != nil || root.Managers == nil || root.Managers.ID == "" {
			return nil, nil //nolint:nilerr // a root without Managers has none to search
		}
		var coll struct{ Members []link }
		if _, err := c.getJSON(root.Managers.ID, &coll); err != nil && !missing(err) {
			return nil, classify("listing managers", err)
		}
		var more []string
		for _, m := range coll.Members {
			if m.ID != "" && !slices.ContainsFunc(managers, func(seen string) bool { return sameURI(seen, m.ID) }) {
				more = append(more, m.ID)
			}
		}
		return more, nil
	}
	listedAll := false
	for i := 0; ; i++ {
		if i == len(managers) {
			if listedAll {
				break
			}
			listedAll = true
			more, err := allManagers()
			if err != nil {
				return nil, err
			}
			if managers = append(managers, more...); i == len(managers) {
				break
			}
		}
		mgr := managers[i]
		var m struct{ VirtualMedia *link }
		if _, err := c.getJSON(mgr, &m); err != nil {
			if missing(err) {
				continue
			}
			return nil, classify("reading manager "+mgr, err)
		}
		if m.VirtualMedia == nil || m.VirtualMedia.ID == "" {
			continue
		}
		searched++
		if s, err := search(m.VirtualMedia.ID); s != nil || err != nil {
			return s, err
		}
	}

	var found string
	switch {
	case len(notCD) == 0 && len(notUsable) == 0:
		found = fmt.Sprintf("no VirtualMedia under %s or its managers", systemURI)
		if searched > 0 {
			found = fmt.Sprintf("the VirtualMedia collections of %s and its managers are empty", systemURI)
		}
	case len(notUsable) == 0:
		found = fmt.Sprintf("no CD/DVD slot for %s: slots offer only %s", systemURI, onlyTypes(notCD))
	default:
		found = fmt.Sprintf("the CD/DVD slots of %s (%s) have no InsertMedia action and do not allow PATCH (KVM-only slots)", systemURI, strings.Join(notUsable, ", "))
		if len(notCD) > 0 {
			found += "; the others are " + strings.Join(notCD, ", ")
		}
	}
	return nil, bmc.Classify(metalv1alpha1.BMCReasonVirtualMediaUnsupported, fmt.Errorf("%s: %w", found, bmc.ErrUnsupported))
}

// onlyTypes summarises what non-CD slots offer: "USBStick/Floppy (…/1 offers Floppy/USBStick)".
func onlyTypes(notCD []string) string {
	var types []string
	for _, s := range notCD {
		_, offers, _ := strings.Cut(s, " offers ")
		for t := range strings.SplitSeq(offers, "/") {
			if t != "" && !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	if len(types) == 0 {
		types = []string{"no media types"}
	}
	return strings.Join(types, "/") + " (" + strings.Join(notCD, "; ") + ")"
}

// serviceRoot is the service root's path, as gofish found it.
func (c *Client) serviceRoot() string {
	if c.api.Service != nil && c.api.Service.ODataID != "" {
		return c.api.Service.ODataID
	}
	return "/redfish/v1/"
}

// slot finds the system's CD/DVD slot, through the one found before when it still reads.
func (c *Client) slot(systemURI string) (*slot, error) {
	c.mediaMu.Lock()
	known := c.slots[systemURI]
	c.mediaMu.Unlock()
	if known != "" {
		if s, err := c.readSlot(known, nil); err == nil && s.cd() && s.usable() {
			return s, nil
		} else if err != nil && !missing(err) {
			return nil, classify("reading "+known, err)
		}
	}
	s, err := c.findSlot(systemURI)
	if err != nil {
		return nil, err
	}
	c.mediaMu.Lock()
	if c.slots == nil {
		c.slots = map[string]string{}
	}
	c.slots[systemURI] = s.uri
	c.mediaMu.Unlock()
	return s, nil
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

// redact shows an image URL without its path and query, which carry the boot's token.
func redact(image string) string {
	u, err := url.Parse(image)
	if err != nil || u.Host == "" {
		return "the image"
	}
	return u.Scheme + "://" + u.Host + "/…"
}

// images are the image URLs one media call has seen: the one it inserts and every one the slot
// reported meanwhile (media of another boot, whose URL holds that boot's token). The call's
// errors are scrubbed of all of them. A nil *images notes nothing.
type images struct{ urls []string }

func (m *images) add(image string) {
	if m != nil && image != "" && !slices.Contains(m.urls, image) {
		m.urls = append(m.urls, image)
	}
}

// classifyMedia classifies a virtual-media failure with what was being done, keeping a
// reason it already has (VirtualMediaUnsupported), with the image URLs removed from every
// message before any of it is cut short.
func classifyMedia(doing string, err error, urls ...string) error {
	var classified *bmc.Error
	if errors.As(err, &classified) {
		return scrub(fmt.Errorf("%s: %w", doing, err), urls)
	}
	var re *common.Error
	if errors.As(err, &re) && len(urls) > 0 {
		clean := scrubRedfish(re, urls)
		if re.HTTPReturnedStatusCode == 0 {
			// Not the BMC's answer but gofish's own failure, its text in Message.
			err = errors.New(clean.Message)
		} else {
			err = clean
		}
	}
	return scrub(classify(doing, err), urls)
}

// scrub removes image URLs (and their paths) from an error's text, keeping its reason: BMCs
// echo the URL in their messages (iDRAC's RAC0904), and errors end up in conditions and logs.
// The error returned holds nothing of the original that can be reached (see scrubbed).
func scrub(err error, urls []string) error {
	if err == nil || len(urls) == 0 {
		return err
	}
	return &scrubbed{msg: scrubText(err.Error(), urls), orig: err, urls: urls}
}

// scrubText replaces image URLs, and their paths alone, in a text; as written, and as JSON
// writes them with escaped slashes.
func scrubText(text string, urls []string) string {
	type secret struct{ text, shown string }
	var secrets []secret
	for _, image := range urls {
		if image == "" {
			continue
		}
		forms := []string{image}
		if u, err := url.Parse(image); err == nil && len(u.Path) > 1 {
			forms = append(forms, u.RequestURI(), u.EscapedPath(), u.Path)
		}
		for _, f := range forms {
			secrets = append(secrets, secret{f, redact(image)}, secret{strings.ReplaceAll(f, "/", `\/`), redact(image)})
		}
	}
	// The longest first: a URL before its path, one URL before another it starts.
	slices.SortStableFunc(secrets, func(a, b secret) int { return len(b.text) - len(a.text) })
	for _, s := range secrets {
		text = strings.ReplaceAll(text, s.text, s.shown)
	}
	return text
}

// scrubRedfish is a copy of a Redfish error with image URLs removed from every field, and
// without the raw body gofish keeps (and prints as its Error) for want of a way to clean it.
func scrubRedfish(e *common.Error, urls []string) *common.Error {
	cp := &common.Error{HTTPReturnedStatusCode: e.HTTPReturnedStatusCode,
		Code: scrubText(e.Code, urls), Message: scrubText(e.Message, urls)}
	for _, info := range e.ExtendedInfos {
		info.MessageID = scrubText(info.MessageID, urls)
		info.Message = scrubText(info.Message, urls)
		info.Severity = scrubText(info.Severity, urls)
		info.Resolution = scrubText(info.Resolution, urls)
		info.MessageArgs = slices.Clone(info.MessageArgs)
		for i := range info.MessageArgs {
			info.MessageArgs[i] = scrubText(info.MessageArgs[i], urls)
		}
		cp.ExtendedInfos = append(cp.ExtendedInfos, info)
	}
	return cp
}

// scrubbed is an error whose text had image URLs removed. It does not unwrap: the original, or
// any error it wraps, would print or hold in its fields what was removed (gofish's Error keeps
// the BMC's raw answer). errors.Is asks the original, which only compares (bmc.ErrUnsupported,
// context errors); errors.As finds a *bmc.Error with the original's reason and the scrubbed
// text (bmc.Reason), or a *common.Error cleaned by scrubRedfish; nothing else.
type scrubbed struct {
	msg  string
	orig error
	urls []string
}

func (s *scrubbed) Error() string { return s.msg }

func (s *scrubbed) Is(target error) bool { return errors.Is(s.orig, target) }

func (s *scrubbed) As(target any) bool {
	switch t := target.(type) {
	case **bmc.Error:
		var e *bmc.Error
		if !errors.As(s.orig, &e) {
			return false
		}
		*t = &bmc.Error{Reason: e.Reason, Err: &scrubbed{msg: s.msg, orig: e.Err, urls: s.urls}}
		return true
	case **common.Error:
		var e *common.Error
		if !errors.As(s.orig, &e) {
			return false
		}
		*t = scrubRedfish(e, s.urls)
		return true
	}
	return false
}
