package bmcsim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// BootCd is the boot target of a system's virtual CD/DVD (Redfish's "Cd").
const BootCd BootTarget = "Cd"

// MediaEvent is the state of one system's virtual CD/DVD after a change: an insert (the BMC
// has fetched the image, as real BMCs and sushy-tools do, into Path) or an eject.
type MediaEvent struct {
	SystemID string
	// Image is the URL the client inserted ("" once ejected).
	Image string
	// Path is the local file the BMC fetched Image into ("" once ejected): what a host behind
	// the system (a VM) attaches as its CD.
	Path     string
	Inserted bool
}

// Defaults of the media options.
const (
	// DefaultMediaMaxBytes caps an image InsertMedia fetches (Options.MediaMaxBytes).
	DefaultMediaMaxBytes int64 = 2 << 30
	// DefaultMediaFetchTimeout bounds one image fetch (Options.MediaFetchTimeout).
	DefaultMediaFetchTimeout = 2 * time.Minute
)

// slotDef is one VirtualMedia slot of a profile's layout.
type slotDef struct {
	id         string
	mediaTypes []string
	// cd marks the slot the system boots ISOs from: the one Media and OnMediaChange report
	// and a host attaches as its CD-ROM. Other slots take media too, which no host sees.
	cd bool
	// kvmOnly is a slot only a KVM console session can fill (OpenBMC's proxy mode): no
	// actions and no PATCH.
	kvmOnly bool
}

// mediaLayout is where a profile's BMC keeps VirtualMedia: under each System (DMTF's
// current model, iDRAC ≥ 6, sushy-tools) or under the Manager (iLO, XCC, Supermicro,
// OpenBMC). A Manager's slots belong to the BMC's first system; further systems of such a
// BMC get the same slots under their own System, as blade enclosures do.
type mediaLayout struct {
	underManager bool
	slots        []slotDef
}

var (
	cdDVD = []string{"CD", "DVD"}
	usb   = []string{"USBStick"}
)

// mediaLayouts are the profiles' VirtualMedia shapes (docs/bmc-virtual-media.md).
var mediaLayouts = map[Profile]mediaLayout{
	ProfileGeneric:    {slots: []slotDef{{id: "CD", mediaTypes: cdDVD, cd: true}}},
	ProfileDell:       {slots: []slotDef{{id: "1", mediaTypes: cdDVD, cd: true}, {id: "2", mediaTypes: usb}}},
	ProfileHPE:        {underManager: true, slots: []slotDef{{id: "1", mediaTypes: []string{"Floppy", "USBStick"}}, {id: "2", mediaTypes: cdDVD, cd: true}}},
	ProfileLenovo:     {underManager: true, slots: []slotDef{{id: "EXT1", mediaTypes: []string{"CD", "DVD", "USBStick"}, cd: true}, {id: "EXT2", mediaTypes: usb}}},
	ProfileSupermicro: {underManager: true, slots: []slotDef{{id: "CD1", mediaTypes: cdDVD, cd: true}, {id: "USB1", mediaTypes: usb}}},
	ProfileOpenBMC:    {underManager: true, slots: []slotDef{{id: "Slot_0", mediaTypes: []string{"CD", "USBStick"}, kvmOnly: true}, {id: "Slot_1", mediaTypes: []string{"CD", "USBStick"}, cd: true}}},
}

// mediaSlot is one VirtualMedia resource and what is inserted in it. Mutable fields are
// guarded by model.mu.
type mediaSlot struct {
	def   slotDef
	owner *system
	path  string // canonical @odata.id

	image, file string // the inserted URL and the local file it was fetched into
	inserted    bool
	protocol    string // TransferProtocolType the client sent, if any
	gen         uint64 // bumped on every change: the slot's ETag
	busy        bool   // an insert is fetching; other changes wait for it (409)

	// VirtualMediaInsertedLag: until lagUntil, GET shows shownImage/shownInserted.
	lagUntil      time.Time
	shownImage    string
	shownInserted bool
}

func (sl *mediaSlot) etag() string { return fmt.Sprintf(`W/"vm%d"`, sl.gen) }

// visible is what a GET shows: the state, or the lagging one under VirtualMediaInsertedLag.
func (sl *mediaSlot) visible(now time.Time) (image string, inserted bool) {
	if now.Before(sl.lagUntil) {
		return sl.shownImage, sl.shownInserted
	}
	return sl.image, sl.inserted
}

// mediaStore is a BMC's fetched images: the directory they go to and the files in use.
type mediaStore struct {
	mu      sync.Mutex
	dir     string // Options.MediaDir, or a temporary directory made on first use
	ownDir  bool   // dir was made by the BMC and is removed by Close
	closed  bool
	maxSize int64
	timeout time.Duration
}

// newMediaSlots lays out a system's slots; systems[0] of a Manager-media profile gets the
// Manager's slots.
func (m *model) newMediaSlots(s *system, first bool) {
	if m.q.NoVirtualMedia {
		return
	}
	layout := m.prof.media
	base := s.path + "/VirtualMedia/"
	if layout.underManager && first {
		base = m.managerPath() + "/VirtualMedia/"
		s.mediaUnderManager = true
	}
	for _, d := range layout.slots {
		s.media = append(s.media, &mediaSlot{def: d, owner: s, path: base + d.id})
	}
}

// cdSlot is the system's boot CD/DVD slot, or nil.
func (s *system) cdSlot() *mediaSlot {
	for _, sl := range s.media {
		if sl.def.cd {
			return sl
		}
	}
	return nil
}

// systemMedia is the slots listed under the System (none when they are the Manager's).
func (s *system) systemMedia() []*mediaSlot {
	if s.mediaUnderManager {
		return nil
	}
	return s.media
}

// managerMedia is the slots listed under the Manager.
func (m *model) managerMedia() []*mediaSlot {
	if len(m.systems) == 0 || !m.systems[0].mediaUnderManager {
		return nil
	}
	return m.systems[0].media
}

func findSlot(slots []*mediaSlot, id string) *mediaSlot {
	for _, sl := range slots {
		if strings.EqualFold(sl.def.id, id) {
			return sl
		}
	}
	return nil
}

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

// mediaEvent is the event a change of sl makes, and whether it is one to tell (the system's
// CD slot). The caller holds m.mu.
func (m *model) mediaEvent(sl *mediaSlot) (MediaEvent, bool) {
	return MediaEvent{SystemID: sl.owner.spec.ID, Image: sl.image, Path: sl.file, Inserted: sl.inserted}, sl.def.cd
}

// fireMedia calls the media hooks outside every lock.
func (m *model) fireMedia(ev MediaEvent) {
	m.mu.Lock()
	hooks := slices.Clone(m.mediaHooks)
	m.mu.Unlock()
	for _, h := range hooks {
		h(ev)
	}
}

// Media is a system's virtual CD/DVD now (the zero MediaEvent, with SystemID, when empty or
// when the system has none). It is the actual state, whatever VirtualMediaInsertedLag shows.
func (b *BMC) Media(systemID string) MediaEvent {
	m := b.model
	if m == nil {
		return MediaEvent{SystemID: systemID}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.findSystem(systemID)
	if s == nil {
		return MediaEvent{SystemID: systemID}
	}
	sl := s.cdSlot()
	if sl == nil {
		return MediaEvent{SystemID: s.spec.ID}
	}
	ev, _ := m.mediaEvent(sl)
	return ev
}

// OnMediaChange adds a hook called after every insert and eject of a system's virtual media,
// outside the BMC's locks, before the request that caused it is answered.
func (b *BMC) OnMediaChange(hook func(MediaEvent)) {
	m := b.model
	if m == nil || hook == nil {
		return
	}
	m.mu.Lock()
	m.mediaHooks = append(m.mediaHooks, hook)
	m.mu.Unlock()
}

// MediaDir is the directory fetched images go to: Options.MediaDir, or the temporary
// directory the BMC made on its first insert ("" until then). Close removes the files and a
// directory the BMC made.
func (b *BMC) MediaDir() string {
	if b.media == nil {
		return ""
	}
	b.media.mu.Lock()
	defer b.media.mu.Unlock()
	return b.media.dir
}

func newMediaStore(opts Options) *mediaStore {
	st := &mediaStore{dir: opts.MediaDir, maxSize: opts.MediaMaxBytes, timeout: opts.MediaFetchTimeout}
	if st.maxSize <= 0 {
		st.maxSize = DefaultMediaMaxBytes
	}
	if st.timeout <= 0 {
		st.timeout = DefaultMediaFetchTimeout
	}
	return st
}

// directory is where a fetch writes, made on first use.
func (st *mediaStore) directory() (string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return "", errors.New("the BMC is closed")
	}
	if st.dir == "" {
		dir, err := os.MkdirTemp("", "bmcsim-media-")
		if err != nil {
			return "", err
		}
		st.dir, st.ownDir = dir, true
		return dir, nil
	}
	return st.dir, os.MkdirAll(st.dir, 0o755)
}

// close removes the given files and the directory the store made.
func (st *mediaStore) close(files []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	for _, f := range files {
		_ = os.Remove(f)
	}
	if st.ownDir && st.dir != "" {
		_ = os.RemoveAll(st.dir)
	}
}

// fetchError is a fetch failure as the BMC answers it.
type fetchError struct {
	status             int
	messageID, message string
}

func (e *fetchError) Error() string { return e.message }

// mediaTransport fetches images as a BMC does: no proxies (the image server is on the
// BMC's network), certificates not verified (VerifyCertificate defaults to false).
var mediaTransport = &http.Transport{
	Proxy:                 nil,
	DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
	TLSClientConfig:       &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // as BMCs with VerifyCertificate false
	TLSHandshakeTimeout:   10 * time.Second,
	ResponseHeaderTimeout: 30 * time.Second,
	MaxIdleConnsPerHost:   2,
	IdleConnTimeout:       30 * time.Second,
}

// fetch downloads image into a new file of the store, synchronously (as iDRAC and
// sushy-tools do), bounded in size and time; on failure nothing is left behind.
func (st *mediaStore) fetch(ctx context.Context, image, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	unreachable := func(err error) error {
		return &fetchError{status: http.StatusBadRequest, messageID: msgCouldNotConnect,
			message: fmt.Sprintf("The image at %s could not be fetched: %v.", image, errors.Unwrap(err))}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, image, nil)
	if err != nil {
		return "", unreachable(err)
	}
	req.Header.Set("User-Agent", "bmcsim-virtual-media")
	resp, err := (&http.Client{Transport: mediaTransport}).Do(req)
	if err != nil {
		return "", unreachable(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		id := msgResourceAtURIMissing
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			id = msgResourceAtURIUnauth
		}
		return "", &fetchError{status: http.StatusBadRequest, messageID: id,
			message: fmt.Sprintf("The image at %s could not be fetched: HTTP %s.", image, resp.Status)}
	}
	if resp.ContentLength > st.maxSize {
		return "", tooLarge(image, st.maxSize)
	}
	dir, err := st.directory()
	if err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, sanitize(name)+"-*.iso")
	if err != nil {
		return "", err
	}
	n, err := io.Copy(f, io.LimitReader(resp.Body, st.maxSize+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		_ = os.Remove(f.Name())
		return "", unreachable(fmt.Errorf("reading: %w", err))
	case n > st.maxSize:
		_ = os.Remove(f.Name())
		return "", tooLarge(image, st.maxSize)
	}
	return f.Name(), nil
}

func tooLarge(image string, limit int64) error {
	return &fetchError{status: http.StatusBadRequest, messageID: msgActionParamFormat,
		message: fmt.Sprintf("The image at %s is larger than the %d bytes this device takes.", image, limit)}
}

// sanitize keeps a file name to letters, digits, '.', '_' and '-'.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, name)
}

// mediaFiles lists the files the BMC's slots hold, for Close.
func (m *model) mediaFiles() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var files []string
	for _, s := range m.systems {
		for _, sl := range s.media {
			if sl.file != "" {
				files = append(files, sl.file)
			}
		}
	}
	return files
}
