package bmcsim

import (
	"bytes"
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
// (FirmwareImage, firmware_image.go); what an update does when its task ends is in
// settleUpdates and activateFirmware (update_model.go).

// DefaultUpdateDuration is how long an update's task runs when Options.UpdateDuration is 0.
const DefaultUpdateDuration = 3 * time.Second

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

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
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
