package redfish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/redfish"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

var _ bmc.FirmwareUpdater = (*Client)(nil)

// DefaultUpdatePushTimeout bounds a multipart push of a firmware image (Options.UpdatePushTimeout):
// an image of a few hundred MiB over a BMC's slow management port takes minutes.
const DefaultUpdatePushTimeout = 30 * time.Minute

// StageBIOSSettings writes attributes to the system's Bios settings object (the Bios's
// @Redfish.Settings SettingsObject; the Bios itself when it names none), for the next reset of
// the host (stageAttributes, with OnReset). A system that links no Bios answers ErrUnsupported.
func (c *Client) StageBIOSSettings(ctx context.Context, systemURI string, attributes map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(attributes) == 0 {
		return nil
	}
	biosURI, err := c.biosOf(systemURI)
	if err != nil {
		return err
	}
	return c.stageAttributes(biosURI, "staging BIOS settings", "OnReset", attributes)
}

// SetManagerSettings writes attributes to the attributes of the system's Manager
// (managerAttributesOf), applied at once (stageAttributes, with Immediate): a Manager's settings
// need no reset of the host. A Manager that exposes none answers ErrUnsupported.
func (c *Client) SetManagerSettings(ctx context.Context, systemURI string, attributes map[string]string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(attributes) == 0 {
		return nil
	}
	uri, err := c.managerAttributesOf(systemURI)
	if err != nil {
		return err
	}
	return c.stageAttributes(uri, "setting the Manager's attributes", "Immediate", attributes)
}

// stageAttributes PATCHes attributes to an attributes resource's settings object (its
// @Redfish.Settings SettingsObject; the resource itself when it names none). Each value, given
// as text, is sent as the JSON type the registry the resource names gives it (Integer a number,
// Boolean true or false, anything else a string), or, for an attribute the registry does not
// list or a BMC without one, as the type of its current value; a text that is not of that type
// is refused before anything is sent. Values are not checked against the registry's bounds or
// lists: the BMC judges, and its refusal is returned with its message, without the value of any
// attribute that is a password. @Redfish.SettingsApplyTime applyTime is sent when the resource
// lists it among its SupportedApplyTimes, and nothing otherwise (it is the default; a BMC that
// lists no apply times may refuse the annotation). The settings object's ETag, when it has one,
// is sent as If-Match (some BMCs, AMI's among them, require it).
func (c *Client) stageAttributes(uri, doing, applyTime string, attributes map[string]string) error {
	res, err := redfish.GetBios(c.api, uri)
	if err != nil {
		return classify(doing+": reading "+uri, err)
	}
	registry, err := c.attributeRegistry(res.AttributeRegistry)
	if err != nil {
		return err
	}
	values := make(map[string]any, len(attributes))
	var secrets []string
	for _, name := range slices.Sorted(maps.Keys(attributes)) {
		text := attributes[name]
		var def *bmc.AttributeDefinition
		if registry != nil {
			if d, ok := registry.Attributes[name]; ok {
				def = &d
			}
		}
		v, err := attributeValue(name, text, def, res.Attributes[name])
		if err != nil {
			return bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s on %s: %v", doing, uri, err)
		}
		values[name] = v
		if isSecretAttribute(name, def) && text != "" {
			secrets = append(secrets, text)
		}
	}
	// gofish takes the resource's own URI as its settings target when it names no settings object.
	target := privateLink(res, "settingsTarget")
	if target == "" {
		target = res.ODataID
	}
	body := map[string]any{"Attributes": values}
	if slices.Contains(privateLinks(res, "settingsApplyTimes"), applyTime) {
		body["@Redfish.SettingsApplyTime"] = map[string]string{"ApplyTime": applyTime}
	}
	headers := map[string]string{}
	if resp, err := c.api.Get(target); err == nil {
		if tag := resp.Header.Get("ETag"); tag != "" {
			headers["If-Match"] = tag
		}
		drain(resp.Body)
	} else if !isNotFound(err) {
		return hideSecrets(classify("reading the settings object "+target, err), secrets)
	}
	resp, err := c.api.PatchWithHeaders(target, body, headers)
	if err != nil {
		return hideSecrets(classify(doing+" on "+target, err), secrets)
	}
	drain(resp.Body)
	return nil
}

// attributeValue converts an attribute's text to the JSON value sent: by its registry type
// when it has one, else by the type of its current value (a number, a boolean; a string, or no
// current value, is sent as a string).
func attributeValue(name, text string, def *bmc.AttributeDefinition, current any) (any, error) {
	kind := ""
	if def != nil {
		switch def.Type {
		case bmc.AttributeInteger:
			kind = "integer"
		case bmc.AttributeBoolean:
			kind = "boolean"
		default:
			kind = "string"
		}
	} else {
		switch current.(type) {
		case float64, json.Number:
			kind = "number"
		case bool:
			kind = "boolean"
		default:
			kind = "string"
		}
	}
	switch kind {
	case "integer":
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("attribute %s is an integer, and %q is not one", name, shownValue(name, text, def))
		}
		return n, nil
	case "number":
		t := strings.TrimSpace(text)
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return nil, fmt.Errorf("attribute %s is a number, and %q is not one", name, shownValue(name, text, def))
		}
		return f, nil
	case "boolean":
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return nil, fmt.Errorf("attribute %s is a boolean (true or false), and %q is not one", name, shownValue(name, text, def))
		}
		return b, nil
	}
	return text, nil
}

// isSecretAttribute says whether an attribute's value must not show in an error: the registry
// types it Password, or its name says it is one (as BIOSSettings blanks them).
func isSecretAttribute(name string, def *bmc.AttributeDefinition) bool {
	if def != nil && def.Type == bmc.AttributePassword {
		return true
	}
	lower := strings.ToLower(name)
	return strings.Contains(lower, "password") || strings.Contains(lower, "passwd")
}

func shownValue(name, text string, def *bmc.AttributeDefinition) string {
	if isSecretAttribute(name, def) {
		return "(redacted)"
	}
	return truncate(text, 64)
}

// hideSecrets replaces secrets (passwords the request carried, which a BMC may echo in its
// message) in an error's text; the error returned keeps the reason and wraps nothing that
// holds them. Without secrets, or when none shows, err is returned as it is.
func hideSecrets(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	text := err.Error()
	leaked := false
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			text, leaked = strings.ReplaceAll(text, s, "(redacted)"), true
		}
	}
	if !leaked {
		return err
	}
	wrapped := errors.New(text)
	if errors.Is(err, bmc.ErrUnsupported) {
		wrapped = fmt.Errorf("%s: %w", text, bmc.ErrUnsupported)
	}
	return &bmc.Error{Reason: bmc.Reason(err), Err: wrapped}
}

// transferProtocols maps an image URL's scheme to SimpleUpdate's TransferProtocol.
var transferProtocols = map[string]string{
	"http": "HTTP", "https": "HTTPS", "ftp": "FTP", "sftp": "SFTP", "tftp": "TFTP",
	"scp": "SCP", "nfs": "NFS", "cifs": "CIFS", "smb": "CIFS", "oem": "OEM",
}

// StartUpdate asks the BMC's UpdateService to install an image. Where it offers
// UpdateService.SimpleUpdate (gofish reads its target and TransferProtocol allowable values),
// the BMC fetches req.ImageURL itself: ImageURI, TransferProtocol from the URL's scheme (refused
// here, ErrUnsupported, when the BMC lists allowable protocols without it), Targets,
// Username and Password when set. gofish's own SimpleUpdate is not used: it drops the answer's
// Location, which names the task, and v0.20 sends the password as "Passord". Otherwise, where it
// offers a MultipartHttpPushUri, the client pushes req.Image itself: a multipart/form-data POST
// with an UpdateParameters part (JSON: Targets) and an UpdateFile part, streamed (the image is
// opened twice, once to learn its size, as a BMC may not take a chunked body) and bounded by
// Options.UpdatePushTimeout and the BMC's MaxImageSizeBytes. Neither, or a push without
// req.Image, is ErrUnsupported. The task's URI is the answer's Location, else the @odata.id of
// the Task it answered with; "" when the BMC answered without one (done at once). The image's
// URL and the password never show in an error.
func (c *Client) StartUpdate(ctx context.Context, req bmc.UpdateRequest) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if c.root.updateService == "" {
		return "", unsupported("the BMC links no UpdateService: it cannot update firmware")
	}
	us, err := redfish.GetUpdateService(c.api, c.root.updateService)
	if err != nil {
		return "", classify("reading the UpdateService "+c.root.updateService, err)
	}
	targets := req.Targets
	if targets == nil {
		targets = []string{}
	}
	if simple := privateLink(us, "simpleUpdateTarget"); simple != "" {
		return c.simpleUpdate(ctx, simple, us, req, targets)
	}
	if push := strings.TrimSpace(us.MultipartHTTPPushURI); push != "" {
		return c.multipartPush(ctx, push, int64(us.MaxImageSizeBytes), req, targets)
	}
	return "", unsupported("the BMC's UpdateService offers neither SimpleUpdate nor a MultipartHttpPushUri")
}

func (c *Client) simpleUpdate(ctx context.Context, target string, us *redfish.UpdateService, req bmc.UpdateRequest, targets []string) (string, error) {
	doing := "starting a firmware update (SimpleUpdate of " + redact(req.ImageURL) + ")"
	u, err := url.Parse(req.ImageURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "", bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: the image URL is not an absolute URL", doing)
	}
	params := map[string]any{"ImageURI": req.ImageURL}
	if len(targets) > 0 {
		params["Targets"] = targets
	}
	protocol, known := transferProtocols[strings.ToLower(u.Scheme)]
	allowed := make([]string, 0, len(us.TransferProtocol))
	for _, p := range us.TransferProtocol {
		allowed = append(allowed, string(p))
	}
	switch {
	case known && (len(allowed) == 0 || slices.ContainsFunc(allowed, func(p string) bool { return strings.EqualFold(p, protocol) })):
		params["TransferProtocol"] = protocol
	case len(allowed) > 0:
		return "", unsupported("%s: the BMC fetches images by %s only, not %s", doing, strings.Join(allowed, ", "), strings.ToUpper(u.Scheme))
	}
	if req.Username != "" {
		params["Username"] = req.Username
	}
	if req.Password != "" {
		params["Password"] = req.Password
	}
	resp, err := c.api.Post(target, params)
	if err != nil {
		return "", hideSecrets(classifyMedia(doing, err, req.ImageURL), []string{req.Password})
	}
	return taskOf(resp)
}

// taskOf reads the task an update's answer names: its Location, else the @odata.id of the Task
// in its body; "" for none. An absolute URL is reduced to its path, which the client follows.
func taskOf(resp *http.Response) (string, error) {
	defer drain(resp.Body)
	loc := resp.Header.Get("Location")
	if loc == "" {
		var body struct {
			ID   string `json:"@odata.id"`
			Type string `json:"@odata.type"`
		}
		if json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body) == nil && strings.Contains(body.Type, "Task") {
			loc = body.ID
		}
	}
	if loc == "" {
		return "", nil
	}
	if u, err := url.Parse(loc); err == nil && u.Host != "" {
		loc = u.RequestURI()
	}
	return loc, nil
}

// multipartPush pushes req.Image to the BMC's MultipartHttpPushUri.
func (c *Client) multipartPush(ctx context.Context, uri string, maxSize int64, req bmc.UpdateRequest, targets []string) (string, error) {
	doing := "pushing a firmware image to " + uri
	if req.Image == nil {
		return "", unsupported("%s: the BMC takes images only by a multipart push, and the request has none to push", doing)
	}
	size, err := imageSize(ctx, req.Image)
	if err != nil {
		return "", scrub(bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: reading the image: %v", doing, err), []string{req.ImageURL})
	}
	if maxSize > 0 && size > maxSize {
		return "", bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: the image is %s, more than the %s the BMC takes (MaxImageSizeBytes)", doing, byteSize(size), byteSize(maxSize))
	}
	params, err := json.Marshal(map[string]any{"Targets": targets})
	if err != nil {
		return "", err
	}
	// The form is written around the image as it streams: its parts' headers and the image's
	// size give the body's length before a byte of it is sent.
	var head, tail strings.Builder
	mw := multipart.NewWriter(&head)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="UpdateParameters"`)
	h.Set("Content-Type", "application/json")
	pw, err := mw.CreatePart(h)
	if err != nil {
		return "", err
	}
	_, _ = pw.Write(params)
	h = textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="UpdateFile"; filename="firmware.bin"`)
	h.Set("Content-Type", "application/octet-stream")
	if _, err := mw.CreatePart(h); err != nil {
		return "", err
	}
	tail.WriteString("\r\n--" + mw.Boundary() + "--\r\n")
	image, err := req.Image(ctx)
	if err != nil {
		return "", scrub(bmc.Errorf(metalv1alpha1.BMCReasonProtocolError, "%s: opening the image: %v", doing, err), []string{req.ImageURL})
	}
	defer image.Close()
	body := &streamBody{ctx: ctx, r: io.MultiReader(strings.NewReader(head.String()), io.LimitReader(image, size), strings.NewReader(tail.String()))}
	length := int64(head.Len()) + size + int64(tail.Len())

	// A client of its own for the push: the one for reads gives up after Options.Timeout.
	api := *c.api
	api.HTTPClient = &http.Client{Transport: c.api.HTTPClient.Transport, Timeout: c.pushTimeout}
	resp, err := api.RunRawRequestWithHeaders(http.MethodPost, uri, body, mw.FormDataContentType(),
		map[string]string{"Content-Length": strconv.FormatInt(length, 10)})
	if err != nil {
		return "", hideSecrets(classifyMedia(doing, err, req.ImageURL), []string{req.Password})
	}
	return taskOf(resp)
}

// imageSize learns an image's size: from the file it is, or by reading it through.
func imageSize(ctx context.Context, open func(context.Context) (io.ReadCloser, error)) (int64, error) {
	rc, err := open(ctx)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	if f, ok := rc.(interface{ Stat() (os.FileInfo, error) }); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			return fi.Size(), nil
		}
	}
	return io.Copy(io.Discard, &streamBody{ctx: ctx, r: rc})
}

// streamBody is a request body read as it is sent, which ends with ctx. gofish takes an
// io.ReadSeeker; nothing seeks it.
type streamBody struct {
	ctx context.Context
	r   io.Reader
}

func (s *streamBody) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		return 0, err
	}
	return s.r.Read(p)
}

func (s *streamBody) Seek(offset int64, whence int) (int64, error) {
	return 0, errors.New("a streamed request body cannot seek")
}

// urlInText is a URL in a BMC's message: it is shown without its path and query, which may
// hold a token (the task knows nothing of the image URL to scrub it by).
var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s'"<>]+`)

// TaskStatus reads a task StartUpdate returned: a Redfish Task (TaskState, PercentComplete,
// its last message), a Task Monitor answering 202 with the Task, or a Dell job (JID_…, under
// TaskService/Tasks as a Task with Oem.Dell, or under Managers/<iDRAC>/Jobs with JobState).
// The body is decoded here, not by gofish's Task, which reads an absent PercentComplete as 0
// (Percent is -1 then) and does not know Dell's jobs. A Dell job Scheduled (its Task Pending)
// waits for the host's reset to apply an image it has staged: it reads as Completed, as the
// task of a staged update reads on other BMCs, with a message saying so; the reset is the
// caller's to do. Failed and CompletedWithErrors read as Exception. URLs in the message are
// shown without their path.
func (c *Client) TaskStatus(ctx context.Context, taskURI string) (bmc.TaskStatus, error) {
	if err := ctx.Err(); err != nil {
		return bmc.TaskStatus{}, err
	}
	resp, err := c.api.Get(taskURI)
	if err != nil {
		return bmc.TaskStatus{}, classify("reading the task "+taskURI, err)
	}
	defer drain(resp.Body)
	var task struct {
		TaskState       string
		PercentComplete *float64
		Messages        []struct{ Message string }
		// A Dell job resource (Managers/<iDRAC>/Jobs/JID_…).
		JobState string
		Message  string
		Oem      struct {
			Dell struct {
				JobState        string
				Message         string
				PercentComplete *float64
			}
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&task); err != nil {
		return bmc.TaskStatus{}, classify("reading the task "+taskURI, fmt.Errorf("decoding it: %w", err))
	}
	st := bmc.TaskStatus{State: bmc.TaskState(task.TaskState), Percent: -1}
	for i := len(task.Messages) - 1; i >= 0 && st.Message == ""; i-- {
		st.Message = task.Messages[i].Message
	}
	jobState, jobMessage, jobPercent := task.Oem.Dell.JobState, task.Oem.Dell.Message, task.Oem.Dell.PercentComplete
	if jobState == "" {
		jobState, jobMessage = task.JobState, task.Message
		jobPercent = task.PercentComplete
	}
	if st.Message == "" {
		st.Message = jobMessage
	}
	switch {
	case task.PercentComplete != nil:
		st.Percent = int(*task.PercentComplete)
	case jobPercent != nil:
		st.Percent = int(*jobPercent)
	}
	if st.State == "" {
		st.State = dellJobTaskState(jobState)
	}
	switch {
	case strings.EqualFold(jobState, "Scheduled") && (st.State == bmc.TaskPending || task.TaskState == ""):
		st.State, st.Percent = bmc.TaskCompleted, 100
		st.Message = strings.TrimSpace(strings.TrimSpace(st.Message) + " (Dell job Scheduled: the image applies at the host's next reset)")
	case strings.EqualFold(jobState, "Failed") || strings.EqualFold(jobState, "CompletedWithErrors"):
		st.State = bmc.TaskException
	}
	st.Message = truncate(strings.TrimSpace(urlInText.ReplaceAllStringFunc(st.Message, redact)), 300)
	return st, nil
}

// dellJobTaskState is a Dell job's JobState as a TaskState, for a job resource that has none.
func dellJobTaskState(jobState string) bmc.TaskState {
	switch strings.ToLower(jobState) {
	case "":
		return ""
	case "new", "scheduling", "downloading", "downloaded", "waiting", "readyforexecution", "scheduled":
		return bmc.TaskPending
	case "running":
		return bmc.TaskRunning
	case "completed":
		return bmc.TaskCompleted
	case "failed", "completedwitherrors":
		return bmc.TaskException
	case "paused":
		return bmc.TaskInterrupted
	}
	return bmc.TaskState(jobState)
}
