package bmcsim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

func (m *model) mediaCollection(collPath string, slots []*mediaSlot) obj {
	paths := make([]string, len(slots))
	for i, sl := range slots {
		paths[i] = sl.path
	}
	return m.collection(collPath, "VirtualMediaCollection", "Virtual Media Services", paths)
}

// mediaResource renders a slot; the caller holds m.mu.
func (m *model) mediaResource(sl *mediaSlot, now time.Time) obj {
	r := m.resource(sl.path, "#VirtualMedia.v1_6_0.VirtualMedia", sl.def.id, "Virtual Media "+sl.def.id)
	image, inserted := sl.visible(now)
	r["MediaTypes"] = sl.def.mediaTypes
	r["Image"] = nullable(image)
	r["ImageName"] = nil
	if u, err := url.Parse(image); err == nil && image != "" {
		r["ImageName"] = nullable(path.Base(u.Path))
	}
	r["Inserted"] = inserted
	r["WriteProtected"] = true
	r["ConnectedVia"] = "NotConnected"
	if inserted {
		r["ConnectedVia"] = "URI"
	}
	r["TransferMethod"] = "Stream"
	r["TransferProtocolType"] = nullable(sl.protocol)
	if sl.def.kvmOnly {
		r["ConnectedVia"] = "Applet"
	}
	if !sl.def.kvmOnly && !m.q.VirtualMediaPatchOnly {
		r["Actions"] = obj{
			"#VirtualMedia.InsertMedia": obj{"target": m.uri(sl.path + "/Actions/VirtualMedia.InsertMedia")},
			"#VirtualMedia.EjectMedia":  obj{"target": m.uri(sl.path + "/Actions/VirtualMedia.EjectMedia")},
		}
	}
	return r
}

// mediaEndpoint is what a slot's URL offers: GET always, PATCH under VirtualMediaPatchOnly.
func (b *BMC) mediaEndpoint(sl *mediaSlot) endpoint {
	m := b.model
	ep := endpoint{get: func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		body, etag := m.mediaResource(sl, time.Now()), sl.etag()
		m.mu.Unlock()
		w.Header().Set("ETag", etag)
		writeJSON(w, r, http.StatusOK, body)
	}}
	if m.q.VirtualMediaPatchOnly && !sl.def.kvmOnly {
		ep.patch = b.patchMedia(sl)
	}
	return ep
}

// routeMedia resolves "VirtualMedia[/<slot>[/Actions/<action>]]" under a System or Manager.
func (b *BMC) routeMedia(collPath string, slots []*mediaSlot, rest []string) (endpoint, bool) {
	if len(slots) == 0 {
		return endpoint{}, false
	}
	m := b.model
	if len(rest) == 0 {
		return get(func() any { return m.mediaCollection(collPath, slots) }), true
	}
	sl := findSlot(slots, rest[0])
	if sl == nil {
		return endpoint{}, false
	}
	switch {
	case len(rest) == 1:
		return b.mediaEndpoint(sl), true
	case len(rest) == 3 && rest[1] == "actions" && !sl.def.kvmOnly && !m.q.VirtualMediaPatchOnly:
		switch rest[2] {
		case "virtualmedia.insertmedia":
			return endpoint{post: b.insertMediaAction(sl)}, true
		case "virtualmedia.ejectmedia":
			return endpoint{post: b.ejectMediaAction(sl)}, true
		}
	}
	return endpoint{}, false
}

// insertParams is a validated InsertMedia (or PATCH) request.
type insertParams struct {
	image, protocol string
}

// insertMediaAction serves #VirtualMedia.InsertMedia.
func (b *BMC) insertMediaAction(sl *mediaSlot) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := decodeObject(w, r)
		if !ok {
			return
		}
		fail := func(status int, id, msg string, args ...string) { writeError(w, r, status, id, msg, args...) }
		known := []string{"Image", "Inserted", "WriteProtected", "TransferProtocolType", "TransferMethod", "UserName", "Password", "MediaType"}
		for k := range body {
			if !slices.Contains(known, k) && !strings.HasPrefix(k, "@") {
				fail(http.StatusBadRequest, msgActionParamUnknown, fmt.Sprintf("The action VirtualMedia.InsertMedia was submitted with the invalid parameter %s.", k), "VirtualMedia.InsertMedia", k)
				return
			}
		}
		if m.q.VirtualMediaRejectsInsertParams {
			for _, k := range []string{"Inserted", "WriteProtected"} {
				if _, present := body[k]; present {
					fail(http.StatusBadRequest, msgActionParamNotSupported, fmt.Sprintf("The parameter %s for the action VirtualMedia.InsertMedia is not supported on the target resource.", k), k, "VirtualMedia.InsertMedia")
					return
				}
			}
		}
		p, ok := parseInsert(body, fail)
		if !ok {
			return
		}
		if raw, present := body["Inserted"]; present && string(raw) != "true" {
			fail(http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("The value %s for the parameter Inserted in the action VirtualMedia.InsertMedia is not in the list of acceptable values [true].", raw), string(raw), "Inserted", "VirtualMedia.InsertMedia")
			return
		}
		if raw, present := body["TransferMethod"]; present && string(raw) != `"Stream"` {
			fail(http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("The value %s for the parameter TransferMethod in the action VirtualMedia.InsertMedia is not in the list of acceptable values [Stream].", raw), string(raw), "TransferMethod", "VirtualMedia.InsertMedia")
			return
		}
		if m.q.VirtualMediaNeedsTransferProtocol && p.protocol == "" {
			fail(http.StatusBadRequest, msgActionParamMissing, "The action VirtualMedia.InsertMedia requires the parameter TransferProtocolType to be present in the request body.", "VirtualMedia.InsertMedia", "TransferProtocolType")
			return
		}
		b.insert(w, r, sl, p)
	}
}

// parseInsert reads Image and TransferProtocolType, answering 400 itself when they are wrong.
func parseInsert(body map[string]json.RawMessage, fail func(int, string, string, ...string)) (insertParams, bool) {
	var p insertParams
	raw, present := body["Image"]
	if !present {
		fail(http.StatusBadRequest, msgActionParamMissing, "The action VirtualMedia.InsertMedia requires the parameter Image to be present in the request body.", "VirtualMedia.InsertMedia", "Image")
		return p, false
	}
	u, err := imageURL(raw)
	if err != nil {
		fail(http.StatusBadRequest, msgActionParamFormat, fmt.Sprintf("The value for the parameter Image in the action VirtualMedia.InsertMedia is of a different format than the parameter can accept: %v.", err), "Image", "VirtualMedia.InsertMedia")
		return p, false
	}
	p.image = u.String()
	if raw, present := body["TransferProtocolType"]; present {
		var proto string
		if json.Unmarshal(raw, &proto) != nil || !strings.EqualFold(proto, u.Scheme) {
			fail(http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("The value %s for the parameter TransferProtocolType in the action VirtualMedia.InsertMedia is not in the list of acceptable values [%s].", raw, strings.ToUpper(u.Scheme)), string(raw), "TransferProtocolType", "VirtualMedia.InsertMedia")
			return p, false
		}
		p.protocol = strings.ToUpper(proto)
	}
	return p, true
}

// imageURL accepts an absolute http or https URL: the protocols the simulator fetches.
func imageURL(raw json.RawMessage) (*url.URL, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, errors.New("not a string")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("not an http or https URL")
	}
	return u, nil
}

// ejectMediaAction serves #VirtualMedia.EjectMedia. The body may be absent (as the schema
// allows) unless VirtualMediaEjectNeedsBody, or an empty object.
func (b *BMC) ejectMediaAction(sl *mediaSlot) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			writeError(w, r, http.StatusBadRequest, msgMalformedJSON, "The request body could not be read.")
			return
		}
		if len(strings.TrimSpace(string(data))) == 0 {
			if m.q.VirtualMediaEjectNeedsBody {
				// iLO: an action without a JSON body is not JSON.
				writeError(w, r, http.StatusUnsupportedMediaType, msgUnsupportedMedia,
					"The request specified a Content-Type that is not supported or has no body.")
				return
			}
		} else {
			var body map[string]json.RawMessage
			if json.Unmarshal(data, &body) != nil || body == nil {
				writeError(w, r, http.StatusBadRequest, msgMalformedJSON,
					"The request body submitted was malformed JSON and could not be parsed by the receiving service.")
				return
			}
			for k := range body {
				if !strings.HasPrefix(k, "@") {
					writeError(w, r, http.StatusBadRequest, msgActionParamUnknown, fmt.Sprintf("The action VirtualMedia.EjectMedia was submitted with the invalid parameter %s.", k), "VirtualMedia.EjectMedia", k)
					return
				}
			}
		}
		b.eject(w, r, sl)
	}
}

// patchMedia serves PATCH of a slot under VirtualMediaPatchOnly (older iDRAC and iLO, and
// XCC): {"Image": url, "Inserted": true} inserts, {"Image": null} or {"Inserted": false}
// ejects. If-Match, when sent, must carry the slot's ETag.
func (b *BMC) patchMedia(sl *mediaSlot) http.HandlerFunc {
	m := b.model
	return func(w http.ResponseWriter, r *http.Request) {
		body, ok := decodeObject(w, r)
		if !ok {
			return
		}
		fail := func(status int, id, msg string, args ...string) { writeError(w, r, status, id, msg, args...) }
		writable := []string{"Image", "Inserted", "WriteProtected", "TransferProtocolType", "TransferMethod", "UserName", "Password"}
		for k := range body {
			if !slices.Contains(writable, k) && !strings.HasPrefix(k, "@") {
				fail(http.StatusBadRequest, msgPropertyNotWritten, fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k), k)
				return
			}
		}
		m.mu.Lock()
		match := etagMatches(r.Header.Get("If-Match"), sl.etag())
		m.mu.Unlock()
		if !match {
			fail(http.StatusPreconditionFailed, msgPreconditionFailed, "The ETag supplied did not match the ETag required to change this resource.")
			return
		}
		image, hasImage := body["Image"]
		inserted, hasInserted := body["Inserted"]
		switch {
		case (hasImage && string(image) == "null") || (hasInserted && string(inserted) == "false"):
			b.eject(w, r, sl)
		case hasImage:
			if hasInserted && string(inserted) != "true" {
				fail(http.StatusBadRequest, msgPropertyValue, fmt.Sprintf("The value %s for the property Inserted is not in the list of acceptable values.", inserted), string(inserted), "Inserted")
				return
			}
			p, ok := parseInsert(body, fail)
			if ok {
				b.insert(w, r, sl, p)
			}
		default:
			fail(http.StatusBadRequest, msgPropertyMissing, "The property Image is a required property and must be included in the request.", "Image")
		}
	}
}

// insert fetches the image (outside the lock, the slot marked busy meanwhile), then makes
// it the slot's media and tells the hooks.
func (b *BMC) insert(w http.ResponseWriter, r *http.Request, sl *mediaSlot, p insertParams) {
	m := b.model
	m.mu.Lock()
	if sl.busy {
		m.mu.Unlock()
		writeError(w, r, http.StatusConflict, msgOperationNotAllow, "Another virtual media operation is in progress on this device; retry later.")
		return
	}
	if sl.inserted && m.q.VirtualMediaConflictWhenInserted {
		m.mu.Unlock()
		// iDRAC's VRM0012: the client must eject first.
		writeError(w, r, http.StatusConflict, msgResourceInUse,
			"The virtual media device is already connected to an image; eject it before inserting another.")
		return
	}
	sl.busy = true
	m.mu.Unlock()

	file, err := b.media.fetch(r.Context(), p.image, sl.owner.spec.ID+"-"+sl.def.id)

	m.mu.Lock()
	sl.busy = false
	if err != nil {
		m.mu.Unlock()
		var fe *fetchError
		if errors.As(err, &fe) {
			writeError(w, r, fe.status, fe.messageID, fe.message, p.image)
		} else {
			writeError(w, r, http.StatusInternalServerError, msgInternalError, "The image could not be stored: "+err.Error())
		}
		return
	}
	now := time.Now()
	old := sl.file
	if lag := m.q.VirtualMediaInsertedLag; lag > 0 {
		sl.lagUntil, sl.shownImage, sl.shownInserted = now.Add(lag), p.image, false
	}
	sl.image, sl.file, sl.inserted, sl.protocol = p.image, file, true, p.protocol
	sl.gen++
	ev, fire := m.mediaEvent(sl)
	etag := sl.etag()
	m.mu.Unlock()

	if old != "" && old != file {
		_ = os.Remove(old)
	}
	b.stats.mediaInserts.Add(1)
	if fire {
		m.fireMedia(ev)
	}
	w.Header().Set("ETag", etag)
	writeNoContent(w)
}

// eject removes the slot's media (an empty slot is ejected again without complaint, unless
// VirtualMediaEjectWhenEmptyFails) and tells the hooks.
func (b *BMC) eject(w http.ResponseWriter, r *http.Request, sl *mediaSlot) {
	m := b.model
	m.mu.Lock()
	if sl.busy {
		m.mu.Unlock()
		writeError(w, r, http.StatusConflict, msgOperationNotAllow, "Another virtual media operation is in progress on this device; retry later.")
		return
	}
	if !sl.inserted && m.q.VirtualMediaEjectWhenEmptyFails {
		m.mu.Unlock()
		writeError(w, r, http.StatusBadRequest, msgOperationNotAllow, "The virtual media device has no media to eject.")
		return
	}
	now, old, wasInserted := time.Now(), sl.file, sl.inserted
	if lag := m.q.VirtualMediaInsertedLag; lag > 0 && wasInserted {
		sl.lagUntil, sl.shownImage, sl.shownInserted = now.Add(lag), sl.image, true
	}
	sl.image, sl.file, sl.inserted, sl.protocol = "", "", false, ""
	sl.gen++
	ev, fire := m.mediaEvent(sl)
	etag := sl.etag()
	m.mu.Unlock()

	if old != "" {
		_ = os.Remove(old)
	}
	b.stats.mediaEjects.Add(1)
	if fire && wasInserted {
		m.fireMedia(ev)
	}
	w.Header().Set("ETag", etag)
	writeNoContent(w)
}
