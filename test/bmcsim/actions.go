package bmcsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// getSystem answers the ComputerSystem with its ETag, which a later PATCH may send back.
func (b *BMC) getSystem(s *system) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		body, etag := m.computerSystem(s, time.Now()), s.etag()
		m.mu.Unlock()
		w.Header().Set("ETag", etag)
		writeJSON(w, r, http.StatusOK, body)
	}
}

// decodeObject reads a JSON object body, answering 400 itself when it is not one.
func decodeObject(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	var body map[string]json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body == nil {
		writeError(w, r, http.StatusBadRequest, msgMalformedJSON,
			"The request body submitted was malformed JSON and could not be parsed by the receiving service.")
		return nil, false
	}
	return body, true
}

// resetSystem serves ComputerSystem.Reset: only the types the profile lists are accepted.
func (b *BMC) resetSystem(s *system) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := decodeObject(w, r)
		if !ok {
			return
		}
		raw, present := body["ResetType"]
		if !present {
			writeError(w, r, http.StatusBadRequest, msgActionParamMissing,
				"The action ComputerSystem.Reset requires the parameter ResetType to be present in the request body.",
				"ComputerSystem.Reset", "ResetType")
			return
		}
		var resetType string
		if err := json.Unmarshal(raw, &resetType); err != nil || !m.prof.supportsReset(resetType) {
			writeError(w, r, http.StatusBadRequest, msgActionParamValue,
				fmt.Sprintf("The value %s for the parameter ResetType in the action ComputerSystem.Reset is not in the list of acceptable values %v.",
					raw, m.prof.resetTypes), string(raw), "ResetType", "ComputerSystem.Reset")
			return
		}
		m.mu.Lock()
		if m.q.ResetConflictInState && alreadyIn(s.visiblePower(time.Now()), resetType) {
			m.mu.Unlock()
			// iDRAC's way: the request is refused, not taken as done.
			writeError(w, r, http.StatusConflict, msgOperationNotAllow,
				fmt.Sprintf("The operation %s cannot be performed because the server is already powered %s.", resetType, strings.ToLower(s.visiblePower(time.Now()))))
			return
		}
		var change powerChange
		if !m.ignoreResets {
			change = m.reset(s, resetType, time.Now())
		}
		m.mu.Unlock()
		b.stats.resets.Add(1)
		m.fireChange(change)
		writeNoContent(w)
	}
}

// alreadyIn says whether a reset type asks for the power state the system shows already.
func alreadyIn(power, resetType string) bool {
	switch resetType {
	case "On", "ForceOn":
		return power == "On"
	case "ForceOff", "GracefulShutdown":
		return power == "Off"
	}
	return false
}

// bootPatch is a validated change to the Boot object; nil fields are left as they are.
type bootPatch struct {
	target, enabled, mode, httpBootURI *string
}

// patchSystem serves PATCH {"Boot": {...}}, the only writable part of the simulated system.
func (b *BMC) patchSystem(s *system) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := decodeObject(w, r)
		if !ok {
			return
		}
		patch, ok := m.parseSystemPatch(w, r, body)
		if !ok {
			return
		}
		m.mu.Lock()
		if !etagMatches(r.Header.Get("If-Match"), s.etag()) {
			m.mu.Unlock()
			writeError(w, r, http.StatusPreconditionFailed, msgPreconditionFailed,
				"The ETag supplied did not match the ETag required to change this resource.")
			return
		}
		if patch != nil {
			if patch.target != nil {
				s.bootTarget, s.virtualCd = BootTarget(*patch.target), false
			}
			if patch.enabled != nil {
				s.bootOnce = *patch.enabled
			}
			if patch.mode != nil {
				s.bootMode = *patch.mode
			}
			if patch.httpBootURI != nil {
				s.httpBootURI = *patch.httpBootURI
			}
			s.bootGen++
		}
		etag := s.etag()
		m.mu.Unlock()
		if patch != nil {
			b.stats.bootPatches.Add(1)
		}
		w.Header().Set("ETag", etag)
		writeNoContent(w)
	}
}

// parseSystemPatch validates a PATCH body against what the BMC allows and answers 400 with
// the matching Base message when it does not. It returns nil for a body with no Boot.
func (m *model) parseSystemPatch(w http.ResponseWriter, r *http.Request, body map[string]json.RawMessage) (*bootPatch, bool) {
	fail := func(id, msg string, args ...string) (*bootPatch, bool) {
		writeError(w, r, http.StatusBadRequest, id, msg, args...)
		return nil, false
	}
	for k := range body {
		if k != "Boot" && !strings.HasPrefix(k, "@") {
			return fail(msgPropertyNotWritten, fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), k)
		}
	}
	raw, present := body["Boot"]
	if !present {
		return nil, true
	}
	if m.q.NoBootObject {
		return fail(msgPropertyUnknown, "The property Boot is not in the list of valid properties for the resource.", "Boot")
	}
	var boot map[string]json.RawMessage
	if err := json.Unmarshal(raw, &boot); err != nil {
		return fail(msgMalformedJSON, "The value of the property Boot is not a JSON object.")
	}
	allowed := map[string][]string{
		"BootSourceOverrideTarget":  m.bootTargetValues(),
		"BootSourceOverrideEnabled": m.bootEnabledValues(),
		"BootSourceOverrideMode":    {"Legacy", "UEFI"},
	}
	var p bootPatch
	for k, rawValue := range boot {
		if k == "HttpBootUri" && !m.q.NoHTTPBootURI {
			v, ok := parseHTTPBootURI(rawValue)
			if !ok {
				// The value is not echoed: a boot URI is a bearer secret, and this answer may
				// end up in a client's log.
				return fail(msgPropertyValueFormat, "The value for the property HttpBootUri is of a different format than the property can accept: "+
					"it must be empty or an absolute http or https URL.", "(redacted)", k)
			}
			p.httpBootURI = &v
			continue
		}
		values, known := allowed[k]
		if !known {
			return fail(msgPropertyUnknown, fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", k), k)
		}
		if k == "BootSourceOverrideMode" && m.q.RejectBootModePatch {
			return fail(msgPropertyNotWritten, "The property BootSourceOverrideMode is a read only property and cannot be assigned a value.", k)
		}
		var v string
		if err := json.Unmarshal(rawValue, &v); err != nil || !slices.Contains(values, v) {
			return fail(msgPropertyValue, fmt.Sprintf("The value %s for the property %s is not in the list of acceptable values %v.", rawValue, k, values),
				string(rawValue), k)
		}
		switch k {
		case "BootSourceOverrideTarget":
			p.target = &v
		case "BootSourceOverrideEnabled":
			p.enabled = &v
		case "BootSourceOverrideMode":
			p.mode = &v
		}
	}
	return &p, true
}

// parseHTTPBootURI accepts a JSON string that is empty (no URI: DHCP's) or an absolute http
// or https URL with a host.
func parseHTTPBootURI(raw json.RawMessage) (string, bool) {
	var v *string
	if err := json.Unmarshal(raw, &v); err != nil || v == nil { // null too: "" clears it
		return "", false
	}
	if *v == "" {
		return "", true
	}
	u, err := url.Parse(*v)
	if err != nil || (!strings.EqualFold(u.Scheme, "http") && !strings.EqualFold(u.Scheme, "https")) || u.Host == "" {
		return "", false
	}
	return *v, true
}

// etagMatches implements If-Match: absent or "*" always matches; otherwise the tag must be
// the current one, compared without the weak prefix and quotes that clients often strip.
func etagMatches(ifMatch, current string) bool {
	if ifMatch == "" || ifMatch == "*" {
		return true
	}
	norm := func(t string) string { return strings.Trim(strings.TrimPrefix(strings.TrimSpace(t), "W/"), `"`) }
	for tag := range strings.SplitSeq(ifMatch, ",") {
		if norm(tag) == norm(current) {
			return true
		}
	}
	return false
}
