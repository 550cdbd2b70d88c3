package redfish

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/stmcginnis/gofish/common"

	"github.com/ironfleet/ironfleet/internal/bmc"
)

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
