package bmcsim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Firmware updates: UpdateService.SimpleUpdate (the BMC fetches the image from ImageURI) and a
// multipart push to MultipartHttpPushUri (the client sends it), each answered 202 with the Task
// that follows the update (tasks.go). The images are the simulator's own small text format
// (FirmwareImage); what an update does when its task ends is in settleUpdates and
// activateFirmware.

// DefaultUpdateDuration is how long an update's task runs when Options.UpdateDuration is 0.
const DefaultUpdateDuration = 3 * time.Second

// FirmwareImageMagic is the first line of a firmware image the simulator installs.
const FirmwareImageMagic = "IRONFLEET-FIRMWARE 1"

// The component classes an image may name besides an inventory member's Id.
const (
	componentBIOS = "BIOS"
	componentBMC  = "BMC"
	componentNIC  = "NIC"
)

const (
	simpleUpdateAction = "UpdateService.SimpleUpdate"
	simpleUpdatePath   = updateServicePath + "/Actions/" + simpleUpdateAction
	// maxImageHeader bounds what is read of an image: its header, up to the first blank line.
	maxImageHeader = 64 << 10
	// maxPushBytes bounds a multipart push (MaxImageSizeBytes); other requests are bounded by
	// maxBody.
	maxPushBytes = 64 << 20
	// maxVersionLength bounds the version an image names.
	maxVersionLength = 64
)

// The Update registry's messages of a failed update.
const (
	msgTransferFailed = "Update.1.0.TransferFailed"
	msgApplyFailed    = "Update.1.0.ApplyFailed"
)

// transferProtocols are the SimpleUpdate TransferProtocol values the simulator fetches.
var transferProtocols = []string{"HTTP", "HTTPS"}

// FirmwareImage is a firmware image the simulator installs: the line FirmwareImageMagic, then
// component=<component> (BIOS, BMC, NIC, or a FirmwareInventory member's Id) and
// version=<version>. Serve it over HTTP(S) for SimpleUpdate, or push it to the
// MultipartHttpPushUri.
func FirmwareImage(component, version string) []byte {
	return fmt.Appendf(nil, "%s\ncomponent=%s\nversion=%s\n", FirmwareImageMagic, component, version)
}

// firmwareImage is what an image says.
type firmwareImage struct{ component, version string }

// parseFirmwareImage reads an image's header: the magic line, then key=value lines up to a
// blank line or the end (what follows a blank line is a payload, ignored). Lines starting with
// # are comments, unknown keys are ignored; component and version must be there.
func parseFirmwareImage(r io.Reader) (firmwareImage, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxImageHeader))
	sc.Buffer(make([]byte, 0, 4096), maxImageHeader)
	if !sc.Scan() || strings.TrimSpace(sc.Text()) != FirmwareImageMagic {
		return firmwareImage{}, fmt.Errorf("its first line is not %q", FirmwareImageMagic)
	}
	var img firmwareImage
	ended := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			ended = true
			break
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return firmwareImage{}, fmt.Errorf("its header line %q is not key=value", truncateText(line, 40))
		}
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "component":
			img.component = strings.TrimSpace(value)
		case "version":
			img.version = strings.TrimSpace(value)
		}
	}
	if !ended && sc.Err() != nil {
		return firmwareImage{}, fmt.Errorf("its header is longer than %d bytes", maxImageHeader)
	}
	switch {
	case img.component == "":
		return firmwareImage{}, errors.New("it names no component")
	case img.version == "":
		return firmwareImage{}, errors.New("it names no version")
	case len(img.version) > maxVersionLength || strings.ContainsFunc(img.version, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return firmwareImage{}, fmt.Errorf("its version is not printable text of at most %d characters", maxVersionLength)
	}
	return img, nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// updateTarget is one piece of firmware an update changes: the BMC's own (sys nil), or a
// system's BIOS or NIC.
type updateTarget struct {
	kind string // componentBMC, componentBIOS or componentNIC
	sys  *system
}

func (t updateTarget) String() string {
	if t.sys == nil {
		return t.kind
	}
	return t.kind + " of system " + t.sys.spec.ID
}

// stagedFirmware is an image waiting on a system for its next reset, and the task that staged it.
type stagedFirmware struct {
	version string
	task    *updateTask
}

// componentTargets is what an image's component names: the class BMC, BIOS (every system's
// that has one) or NIC (every system's first NIC), or one FirmwareInventory member by Id. The
// caller holds m.mu.
func (m *model) componentTargets(component string) []updateTarget {
	var out []updateTarget
	switch strings.ToUpper(component) {
	case componentBMC:
		return []updateTarget{{kind: componentBMC}}
	case componentBIOS, componentNIC:
		kind := strings.ToUpper(component)
		for _, f := range m.firmwareMembers() {
			if f.kind == kind {
				out = append(out, updateTarget{kind: kind, sys: f.sys})
			}
		}
		return out
	}
	if f, ok := m.firmwareMember(component); ok {
		return []updateTarget{{kind: f.kind, sys: f.sys}}
	}
	return nil
}

// resolveTargets reads SimpleUpdate's (or UpdateParameters') Targets: each the @odata.id of a
// FirmwareInventory member, of a System (its BIOS and NIC) or of the Manager (its firmware),
// in any case and with or without a trailing slash or scheme and host. It returns the one
// that names nothing. The caller holds m.mu.
func (m *model) resolveTargets(targets []string) ([]updateTarget, string) {
	var out []updateTarget
	add := func(t updateTarget) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	members := m.firmwareMembers()
	for _, target := range targets {
		p := target
		if u, err := url.Parse(target); err == nil && u.Path != "" {
			p = u.Path
		}
		segs := splitPath(p)
		found := false
		if slices.Equal(segs, splitPath(m.managerPath())) {
			add(updateTarget{kind: componentBMC})
			found = true
		}
		for _, f := range members {
			if slices.Equal(segs, splitPath(firmwareInventoryPath+"/"+f.id)) {
				add(updateTarget{kind: f.kind, sys: f.sys})
				found = true
			}
		}
		for _, s := range m.systems {
			if slices.Equal(segs, splitPath(s.path)) {
				for _, f := range members {
					if f.sys == s {
						add(updateTarget{kind: f.kind, sys: s})
					}
				}
				found = true
			}
		}
		if !found {
			return nil, target
		}
	}
	return out, ""
}

// updateRequest is a validated update request: its Targets (nil: none given) and the image,
// fetched or pushed, or why it could not be had.
type updateRequest struct {
	targets  []updateTarget
	named    []string // the Targets as the client gave them, for messages
	image    firmwareImage
	imageErr string // why the image could not be had or read; "" when it was
	// imageErrID is the Update registry message of imageErr: TransferFailed or ApplyFailed.
	imageErrID string
}

// simpleUpdate serves #UpdateService.SimpleUpdate: the parameters are checked (400 on a wrong
// one, and on a Target that names nothing of this BMC), the image fetched synchronously (as a
// BMC's transfer would be, bounded by Options.MediaFetchTimeout), then a task is made whose
// outcome the image decides: one that cannot be fetched or read, or is for a component not
// among the Targets, ends in Exception.
func (b *BMC) simpleUpdate(w http.ResponseWriter, r *http.Request) {
	b.stats.updates.Add(1)
	body, ok := decodeObject(w, r)
	if !ok {
		return
	}
	fail := func(status int, id, msg string, args ...string) { writeError(w, r, status, id, msg, args...) }
	known := []string{"ImageURI", "TransferProtocol", "Targets", "Username", "Password", "ForceUpdate"}
	for _, k := range slices.Sorted(maps.Keys(body)) {
		if !slices.Contains(known, k) && !strings.HasPrefix(k, "@") {
			fail(http.StatusBadRequest, msgActionParamUnknown, fmt.Sprintf("The action %s was submitted with the invalid parameter %s.", simpleUpdateAction, k), simpleUpdateAction, k)
			return
		}
	}
	if !checkApplyTime(w, r, body["@Redfish.OperationApplyTime"]) {
		return
	}
	str := func(name string) (string, bool) {
		raw, present := body[name]
		if !present {
			return "", true
		}
		var v string
		if json.Unmarshal(raw, &v) != nil {
			fail(http.StatusBadRequest, msgActionParamFormat, fmt.Sprintf("The value for the parameter %s in the action %s is of a different format than the parameter can accept: it must be a string.", name, simpleUpdateAction), name, simpleUpdateAction)
			return "", false
		}
		return v, true
	}
	image, ok1 := str("ImageURI")
	protocol, ok2 := str("TransferProtocol")
	user, ok3 := str("Username")
	pass, ok4 := str("Password")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return
	}
	if image == "" {
		fail(http.StatusBadRequest, msgActionParamMissing, fmt.Sprintf("The action %s requires the parameter ImageURI to be present in the request body.", simpleUpdateAction), simpleUpdateAction, "ImageURI")
		return
	}
	if protocol != "" && !slices.Contains(transferProtocols, strings.ToUpper(protocol)) {
		fail(http.StatusBadRequest, msgActionParamValue, fmt.Sprintf("The value %q for the parameter TransferProtocol in the action %s is not in the list of acceptable values %v.", protocol, simpleUpdateAction, transferProtocols), protocol, "TransferProtocol", simpleUpdateAction)
		return
	}
	// A URI without a scheme is fetched with TransferProtocol (HTTP by default), as the schema says.
	if !strings.Contains(image, "://") {
		image = strings.ToLower(or(protocol, "HTTP")) + "://" + image
	}
	u, err := url.Parse(image)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URI is not echoed: it may carry a token.
		fail(http.StatusBadRequest, msgActionParamFormat, fmt.Sprintf("The value for the parameter ImageURI in the action %s is of a different format than the parameter can accept: it must be an http or https URL.", simpleUpdateAction), "ImageURI", simpleUpdateAction)
		return
	}
	req, ok := b.updateTargets(w, r, body["Targets"], simpleUpdateAction)
	if !ok {
		return
	}
	req.image, req.imageErr, req.imageErrID = b.fetchFirmware(r.Context(), u, user, pass)
	b.startUpdate(w, r, req)
}

// checkApplyTime accepts @Redfish.OperationApplyTime Immediate or OnReset (either way the
// simulator applies a BMC's firmware when the task ends and a host's at its next reset).
func checkApplyTime(w http.ResponseWriter, r *http.Request, raw json.RawMessage) bool {
	if raw == nil {
		return true
	}
	var v string
	if json.Unmarshal(raw, &v) != nil || (v != "Immediate" && v != "OnReset") {
		writeError(w, r, http.StatusBadRequest, msgActionParamValue,
			fmt.Sprintf("The value %s for the parameter @Redfish.OperationApplyTime is not in the list of acceptable values [Immediate OnReset].", truncateArg(raw)),
			truncateArg(raw), "@Redfish.OperationApplyTime")
		return false
	}
	return true
}

// updateTargets reads a Targets parameter (absent or null: none), answering 400 itself when it
// is not a list of strings or one names nothing of this BMC.
func (b *BMC) updateTargets(w http.ResponseWriter, r *http.Request, raw json.RawMessage, action string) (updateRequest, bool) {
	m := b.model
	var req updateRequest
	if raw == nil || string(raw) == "null" {
		return req, true
	}
	if json.Unmarshal(raw, &req.named) != nil {
		writeError(w, r, http.StatusBadRequest, msgActionParamFormat,
			fmt.Sprintf("The value for the parameter Targets in the action %s is of a different format than the parameter can accept: it must be a list of URIs.", action), "Targets", action)
		return req, false
	}
	if len(req.named) == 0 {
		req.named = nil // an empty list is none
		return req, true
	}
	m.mu.Lock()
	targets, unknown := m.resolveTargets(req.named)
	m.mu.Unlock()
	if unknown != "" {
		writeError(w, r, http.StatusBadRequest, msgActionParamFormat,
			fmt.Sprintf("The value %q for the parameter Targets in the action %s names no resource this service updates.", truncateText(unknown, 200), action), unknown, "Targets", action)
		return req, false
	}
	req.targets = targets
	return req, true
}

// fetchFirmware fetches an image as InsertMedia fetches one (media_fetch.go: no proxy,
// certificates not verified, bounded in time), with Basic auth when a user is given, and
// reads its header. What went wrong is returned as the task's message; it never holds the
// image's path or query, which may carry a token.
func (b *BMC) fetchFirmware(ctx context.Context, u *url.URL, user, pass string) (img firmwareImage, failure, failureID string) {
	shown := u.Scheme + "://" + u.Host + "/…"
	timeout := DefaultMediaFetchTimeout
	if b.media != nil {
		timeout = b.media.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: the URI is not valid.", shown), msgTransferFailed
	}
	req.Header.Set("User-Agent", "bmcsim-update-service")
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := (&http.Client{Transport: mediaTransport}).Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: %v.", shown, err), msgTransferFailed
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return firmwareImage{}, fmt.Sprintf("Transfer of the image from %s failed: HTTP %s.", shown, resp.Status), msgTransferFailed
	}
	img, err = parseFirmwareImage(resp.Body)
	if err != nil {
		return firmwareImage{}, "The image is not a firmware image this BMC can install: " + err.Error() + ".", msgApplyFailed
	}
	return img, "", ""
}

// multipartPush serves a POST to MultipartHttpPushUri: a multipart/form-data body with an
// UpdateParameters part (JSON: Targets, @Redfish.OperationApplyTime) and an UpdateFile part (the
// image); other parts (OemParameters) are ignored. A body that is not such a form is refused
// (415, 400); an image that cannot be read makes a task that ends in Exception, as on
// SimpleUpdate.
func (b *BMC) multipartPush(w http.ResponseWriter, r *http.Request) {
	const action = "MultipartHttpPush"
	b.stats.updates.Add(1)
	mediaType, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/form-data" || params["boundary"] == "" {
		writeError(w, r, http.StatusUnsupportedMediaType, msgUnsupportedMedia,
			"The request specified a Content-Type that is not supported: the MultipartHttpPushUri takes multipart/form-data.")
		return
	}
	mr := multipart.NewReader(r.Body, params["boundary"])
	var parameters map[string]json.RawMessage
	var image []byte
	var haveParams, haveFile bool
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			status := http.StatusBadRequest
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			writeError(w, r, status, msgMalformedJSON, "The multipart body could not be read: "+err.Error()+".")
			return
		}
		switch part.FormName() {
		case "UpdateParameters":
			haveParams = true
			if err := json.NewDecoder(io.LimitReader(part, maxBody)).Decode(&parameters); err != nil || parameters == nil {
				writeError(w, r, http.StatusBadRequest, msgMalformedJSON, "The UpdateParameters part is not a JSON object.")
				return
			}
		case "UpdateFile":
			haveFile = true
			// The header is all the simulator reads; the rest is drained below with the part.
			image, err = io.ReadAll(io.LimitReader(part, maxImageHeader))
			if err != nil {
				writeError(w, r, http.StatusBadRequest, msgMalformedJSON, "The UpdateFile part could not be read: "+err.Error()+".")
				return
			}
		}
		if _, err := io.Copy(io.Discard, part); err != nil {
			status := http.StatusBadRequest
			var tooLarge *http.MaxBytesError
			if errors.As(err, &tooLarge) {
				status = http.StatusRequestEntityTooLarge
			}
			writeError(w, r, status, msgMalformedJSON, "The multipart body could not be read: "+err.Error()+".")
			return
		}
	}
	for _, part := range []struct {
		name    string
		present bool
	}{{"UpdateParameters", haveParams}, {"UpdateFile", haveFile}} {
		if name := part.name; !part.present {
			writeError(w, r, http.StatusBadRequest, msgActionParamMissing,
				fmt.Sprintf("The multipart HTTP push requires the part %s to be present in the request body.", name), action, name)
			return
		}
	}
	for _, k := range slices.Sorted(maps.Keys(parameters)) {
		if k != "Targets" && k != "ForceUpdate" && k != "Oem" && !strings.HasPrefix(k, "@") {
			writeError(w, r, http.StatusBadRequest, msgActionParamUnknown,
				fmt.Sprintf("The UpdateParameters of the multipart HTTP push hold the invalid parameter %s.", k), action, k)
			return
		}
	}
	if !checkApplyTime(w, r, parameters["@Redfish.OperationApplyTime"]) {
		return
	}
	req, ok := b.updateTargets(w, r, parameters["Targets"], action)
	if !ok {
		return
	}
	img, err := parseFirmwareImage(bytes.NewReader(image))
	if err != nil {
		req.imageErr, req.imageErrID = "The image is not a firmware image this BMC can install: "+err.Error()+".", msgApplyFailed
	}
	req.image = img
	b.startUpdate(w, r, req)
}

// startUpdate makes the task of an update whose image is had (or not), answering 202 with its
// Location and body.
func (b *BMC) startUpdate(w http.ResponseWriter, r *http.Request, req updateRequest) {
	m := b.model
	now := time.Now()
	m.mu.Lock()
	t := m.newUpdateTask(req, now)
	body := m.taskBody(t, now)
	m.mu.Unlock()
	w.Header().Set("Location", m.uri(tasksPath+"/"+t.id))
	writeJSON(w, r, http.StatusAccepted, body)
}

// newUpdateTask decides an update's outcome and records its task; the caller holds m.mu. A
// failure (the image's, or FailNextUpdate's, which wins) shows at a quarter of the duration for
// an image that could not be had, at three quarters for anything else.
func (m *model) newUpdateTask(req updateRequest, now time.Time) *updateTask {
	d := m.updateDuration
	t := &updateTask{start: now, due: now.Add(d), component: req.image.component, version: req.image.version}
	if m.prof.dellJobs {
		m.jobs++
		t.num, t.id = m.jobs, fmt.Sprintf("JID_%012d", m.jobs)
	} else {
		m.taskSeq++
		t.num, t.id = m.taskSeq, fmt.Sprint(m.taskSeq)
	}
	t.name = "Firmware Update: " + or(t.component, "unknown component")
	failAt := func(fraction float64) time.Time { return now.Add(time.Duration(float64(d) * fraction)) }
	switch {
	case req.imageErr != "":
		t.failure, t.failureID, t.failAt = req.imageErr, req.imageErrID, failAt(0.25)
	default:
		t.targets = m.componentTargets(req.image.component)
		if len(t.targets) == 0 {
			t.failure = fmt.Sprintf("The image is for the component %s, which is not in this BMC's firmware inventory.", req.image.component)
		} else if req.named != nil {
			var both []updateTarget
			for _, tg := range t.targets {
				if slices.Contains(req.targets, tg) {
					both = append(both, tg)
				}
			}
			if len(both) == 0 {
				t.failure = fmt.Sprintf("The image is for the component %s, which is not among the Targets %s.", req.image.component, strings.Join(req.named, ", "))
			}
			t.targets = both
		}
		t.failureID, t.failAt = msgApplyFailed, failAt(0.25)
	}
	if m.failNext != nil {
		t.failure, t.failureID, t.failAt = *m.failNext, msgApplyFailed, failAt(0.75)
		m.failNext = nil
	}
	if t.failure != "" {
		t.targets = nil
	} else {
		m.unsettled.Add(1)
	}
	m.updates = append(m.updates, t)
	return t
}

// settleUpdates makes the updates whose task has ended take effect: a BMC's firmware at once
// (the BMC resets itself; the version it ran becomes its previous one), a host's BIOS or NIC
// firmware is staged for the system's next power-on or reset (activateFirmware), replacing what
// was staged there before. The caller holds m.mu.
func (m *model) settleUpdates(now time.Time) {
	if m.unsettled.Load() == 0 {
		return
	}
	for _, t := range m.updates {
		if t.settled || t.failure != "" || now.Before(t.due) {
			continue
		}
		t.settled = true
		m.unsettled.Add(-1)
		for _, tg := range t.targets {
			if tg.sys == nil {
				if m.bmcFirmware != t.version {
					m.bmcPreviousFirmware, m.bmcFirmware = m.bmcFirmware, t.version
				}
				continue
			}
			s := tg.sys
			if old, ok := s.staged[tg.kind]; ok && old.task != t {
				old.task.superseded(now)
			}
			if s.staged == nil {
				s.staged = map[string]stagedFirmware{}
			}
			s.staged[tg.kind] = stagedFirmware{version: t.version, task: t}
			t.awaiting++
		}
	}
}

// settle is settleUpdates for a caller that does not hold m.mu; cheap when nothing is due.
func (m *model) settle() {
	if m.unsettled.Load() == 0 {
		return
	}
	m.mu.Lock()
	m.settleUpdates(time.Now())
	m.mu.Unlock()
}

// activateFirmware is what a host does at power-on with firmware staged for it: it runs it
// from then on. The caller holds m.mu.
func (s *system) activateFirmware(now time.Time) {
	for kind, st := range s.staged {
		switch kind {
		case componentBIOS:
			s.biosVersion = st.version
		case componentNIC:
			s.nicFirmware = st.version
		}
		st.task.activated(now)
	}
	s.staged = nil
}

// FailNextUpdate makes the next firmware update (SimpleUpdate or multipart push) end in
// Exception with message as its task's last message, whatever its image; it changes nothing.
// An empty message is a generic one. Calling it again before an update replaces the message.
func (b *BMC) FailNextUpdate(message string) {
	m := b.model
	if m == nil {
		return
	}
	message = or(message, "The firmware update failed (injected by FailNextUpdate).")
	m.mu.Lock()
	m.failNext = &message
	m.mu.Unlock()
}

// BIOSVersion is the BIOS version a system runs now (a staged update not counted until the
// host resets); "" for an unknown system or a static mockup.
func (b *BMC) BIOSVersion(systemID string) string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleUpdates(time.Now())
	if s := m.findSystem(systemID); s != nil {
		return s.biosVersion
	}
	return ""
}

// FirmwareVersion is the firmware the BMC runs now (its Manager's FirmwareVersion): the
// options' or profile's, or the one an update installed; "" for a static mockup.
func (b *BMC) FirmwareVersion() string {
	m := b.model
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.settleUpdates(time.Now())
	return m.bmcFirmware
}
