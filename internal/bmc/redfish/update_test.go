package redfish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// recorder keeps the bodies of the requests a client sends with one method.
type recorder struct {
	next   http.RoundTripper
	method string
	mu     sync.Mutex
	bodies []map[string]any
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == r.method && req.Body != nil {
		data, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		var body map[string]any
		_ = json.Unmarshal(data, &body)
		r.mu.Lock()
		r.bodies = append(r.bodies, body)
		r.mu.Unlock()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(data))
	}
	return r.next.RoundTrip(req)
}

func (r *recorder) sent() []map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]map[string]any(nil), r.bodies...)
}

func record(c *redfish.Client, method string) *recorder {
	r := &recorder{method: method}
	redfish.WrapTransport(c, func(next http.RoundTripper) http.RoundTripper { r.next = next; return r })
	return r
}

// simSystem is the simulator's first system as the client lists it.
func simSystem(t *testing.T, c *redfish.Client, sim *bmcsim.BMC) bmc.SystemInfo {
	t.Helper()
	systems, err := c.Systems(context.Background())
	require.NoError(t, err)
	for _, s := range systems {
		if s.ID == sim.SystemIDs()[0] {
			return s
		}
	}
	require.FailNow(t, "no system", "%s among %v", sim.SystemIDs()[0], systems)
	return bmc.SystemInfo{}
}

func TestStageBIOSSettingsApplyAtTheNextReset(t *testing.T) {
	for name, opts := range map[string]bmcsim.Options{
		"generic":                          {},
		"dell":                             {Profile: bmcsim.ProfileDell},
		"supermicro":                       {Profile: bmcsim.ProfileSupermicro},
		"links in lower case with a slash": {Quirks: &bmcsim.Quirks{LowercaseIDs: true, TrailingSlashIDs: true}},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sim := startSim(t, opts)
			c := connect(t, sim)
			sys := simSystem(t, c, sim)
			patches := record(c, http.MethodPatch)

			require.NoError(t, c.StageBIOSSettings(ctx, sys.URI, map[string]string{
				"ProcVirtualization": "Disabled", "ProcCoreDisable": "4", "AssetTag": "rack 7",
			}))
			sent := patches.sent()
			require.Len(t, sent, 1)
			assert.Equal(t, map[string]any{"ApplyTime": "OnReset"}, sent[0]["@Redfish.SettingsApplyTime"], "the Bios lists OnReset")
			assert.Equal(t, map[string]any{"ProcVirtualization": "Disabled", "ProcCoreDisable": float64(4), "AssetTag": "rack 7"},
				sent[0]["Attributes"], "an Integer attribute is sent as a number")

			settings, err := c.BIOSSettings(ctx, sys.URI)
			require.NoError(t, err)
			assert.Equal(t, map[string]string{"ProcVirtualization": "Disabled", "ProcCoreDisable": "4", "AssetTag": "rack 7"}, settings.Pending)
			assert.Equal(t, "Enabled", settings.Current["ProcVirtualization"], "staged, not applied")

			require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
			settings, err = c.BIOSSettings(ctx, sys.URI)
			require.NoError(t, err)
			assert.Nil(t, settings.Pending)
			assert.Equal(t, "Disabled", settings.Current["ProcVirtualization"])
			assert.Equal(t, "4", settings.Current["ProcCoreDisable"])
			assert.Equal(t, "rack 7", settings.Current["AssetTag"])

			// Nothing to stage is nothing sent.
			require.NoError(t, c.StageBIOSSettings(ctx, sys.URI, nil))
			assert.Len(t, patches.sent(), 1)
		})
	}
}

func TestStageBIOSSettingsTheBMCRefuses(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{})
	c := connect(t, sim)
	sys := simSystem(t, c, sim)
	patches := record(c, http.MethodPatch)

	// Out of the registry's bounds: the BMC judges, and says why.
	err := c.StageBIOSSettings(ctx, sys.URI, map[string]string{"ProcCoreDisable": "99", "ProcVirtualization": "Disabled"})
	require.Error(t, err)
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
	assert.Contains(t, err.Error(), "HTTP 400")
	assert.Contains(t, err.Error(), "ProcCoreDisable is of a different format than the property can accept: it must be from 0 to 63")
	assert.Len(t, patches.sent(), 1)
	settings, err := c.BIOSSettings(ctx, sys.URI)
	require.NoError(t, err)
	assert.Nil(t, settings.Pending, "nothing was staged")

	// An attribute the registry does not have, sent as text for the BMC to refuse.
	err = c.StageBIOSSettings(ctx, sys.URI, map[string]string{"TurboBoost": "On"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "TurboBoost is not in the list of valid properties")

	// A text that is not an integer is not sent at all.
	err = c.StageBIOSSettings(ctx, sys.URI, map[string]string{"ProcCoreDisable": "four"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `attribute ProcCoreDisable is an integer, and "four" is not one`)
	assert.Len(t, patches.sent(), 2)

	// A BMC that echoes a password in its refusal: the password stays out of the error.
	redfish.WrapTransport(c, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method != http.MethodPatch {
				return next.RoundTrip(req)
			}
			body := `{"error": {"code": "Base.1.8.GeneralError", "message": "A general error has occurred.", "@Message.ExtendedInfo": [{"MessageId": "Base.1.8.PropertyValueFormatError",
				"Message": "The value hunter2-Secret for the property AdminPassword is of a different format than the property can accept.", "MessageArgs": ["hunter2-Secret", "AdminPassword"]}]}}`
			return &http.Response{StatusCode: http.StatusBadRequest, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
		})
	})
	err = c.StageBIOSSettings(ctx, sys.URI, map[string]string{"AdminPassword": "hunter2-Secret"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(redacted) for the property AdminPassword")
	assert.Empty(t, redfish.Leaks(err, "hunter2-Secret"))
	assert.Equal(t, m.BMCReasonProtocolError, bmc.Reason(err))
}

// imageServer serves firmware images at /fw/<name>, behind Basic auth.
type imageServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	files map[string][]byte
}

const imageUser, imagePassword = "fw-reader", "fw-Passw0rd"

func serveImages(t *testing.T) *imageServer {
	t.Helper()
	s := &imageServer{files: map[string][]byte{}}
	s.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != imageUser || p != imagePassword {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		s.mu.Lock()
		data, ok := s.files[strings.TrimPrefix(r.URL.Path, "/fw/")]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

// add serves an image and returns its URL, whose path and query stand for a bearer token.
func (s *imageServer) add(name string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[name] = data
	return s.srv.URL + "/fw/" + name + "?token=Tok3n-" + name
}

// waitTask follows a task until it is done, with a deadline, and returns its last status and
// every percentage seen.
func waitTask(t *testing.T, c *redfish.Client, uri string) (bmc.TaskStatus, []int) {
	t.Helper()
	var st bmc.TaskStatus
	var percents []int
	var err error
	require.Eventually(t, func() bool {
		if st, err = c.TaskStatus(context.Background(), uri); err != nil {
			return true // reported below, from the test's goroutine
		}
		percents = append(percents, st.Percent)
		return st.Done()
	}, 10*time.Second, 10*time.Millisecond, "task %s ends", uri)
	require.NoError(t, err)
	return st, percents
}

// componentOf is the system's firmware component of a class.
func componentOf(t *testing.T, c *redfish.Client, systemURI string, class bmc.ComponentClass) bmc.FirmwareComponent {
	t.Helper()
	inv, err := c.FirmwareInventory(context.Background(), systemURI)
	require.NoError(t, err)
	for _, f := range inv {
		if f.Class == class && f.Installed {
			return f
		}
	}
	require.FailNow(t, "no component", "no %s in %+v", class, inv)
	return bmc.FirmwareComponent{}
}

func TestStartUpdateAndFollowItsTask(t *testing.T) {
	ctx := context.Background()
	images := serveImages(t)
	sim := startSim(t, bmcsim.Options{UpdateDuration: 300 * time.Millisecond})
	c := connect(t, sim)
	sys := simSystem(t, c, sim)
	posts := record(c, http.MethodPost)

	bios := componentOf(t, c, sys.URI, bmc.ComponentBIOS)
	image := images.add("bios", bmcsim.FirmwareImage("BIOS", "3.0.0"))
	task, err := c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image, Targets: []string{bios.URI},
		Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	assert.Equal(t, "/redfish/v1/TaskService/Tasks/1", task)
	sent := posts.sent()
	require.Len(t, sent, 1)
	assert.Equal(t, map[string]any{"ImageURI": image, "TransferProtocol": "HTTPS", "Targets": []any{bios.URI},
		"Username": imageUser, "Password": imagePassword}, sent[0])

	st, percents := waitTask(t, c, task)
	require.Equal(t, bmc.TaskCompleted, st.State, "%+v", st)
	assert.True(t, st.Succeeded())
	assert.Equal(t, 100, st.Percent)
	assert.Contains(t, st.Message, "next reset of the host")
	for i := 1; i < len(percents); i++ {
		assert.LessOrEqual(t, percents[i-1], percents[i], "the task only moves forward: %v", percents)
	}
	assert.Equal(t, sys.BIOSVersion, componentOf(t, c, sys.URI, bmc.ComponentBIOS).Version, "the host has not reset")

	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	assert.Equal(t, "3.0.0", componentOf(t, c, sys.URI, bmc.ComponentBIOS).Version)
	assert.Equal(t, "3.0.0", simSystem(t, c, sim).BIOSVersion)

	// A failure the BMC reports ends the task in Exception with its message.
	sim.FailNextUpdate("The image's signature did not verify.")
	task, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image, Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	st, _ = waitTask(t, c, task)
	assert.Equal(t, bmc.TaskException, st.State)
	assert.False(t, st.Succeeded())
	assert.Equal(t, "The image's signature did not verify.", st.Message)

	// So does an image the BMC cannot read; the message shows no URL's path.
	task, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: images.add("junk", []byte("junk\n")), Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	st, _ = waitTask(t, c, task)
	assert.Equal(t, bmc.TaskException, st.State)
	assert.Contains(t, st.Message, "is not a firmware image")
	task, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image}) // no credentials
	require.NoError(t, err)
	st, _ = waitTask(t, c, task)
	assert.Equal(t, bmc.TaskException, st.State)
	assert.Contains(t, st.Message, "401")
	assert.NotContains(t, st.Message, "Tok3n")

	// What the BMC refuses at once comes back with its message, without the image's URL or the
	// password.
	_, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image, Targets: []string{"/redfish/v1/Chassis/1"},
		Username: imageUser, Password: imagePassword})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "names no resource this service updates")
	assert.Empty(t, redfish.Leaks(err, "Tok3n", "/fw/bios", imagePassword))

	// A scheme the BMC does not fetch by is refused before anything is sent.
	n := len(posts.sent())
	_, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: "ftp://images.example/fw/bios.bin?token=Tok3n"})
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Contains(t, err.Error(), "by HTTP, HTTPS only, not FTP")
	assert.Empty(t, redfish.Leaks(err, "Tok3n", "bios.bin"))
	assert.Len(t, posts.sent(), n)
}

func TestStartUpdateOfTheBMCFirmware(t *testing.T) {
	ctx := context.Background()
	images := serveImages(t)
	sim := startSim(t, bmcsim.Options{UpdateDuration: 200 * time.Millisecond, FirmwareVersion: "1.0.0"})
	c := connect(t, sim)
	sys := simSystem(t, c, sim)
	fw := componentOf(t, c, sys.URI, bmc.ComponentBMC)
	task, err := c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: images.add("bmc", bmcsim.FirmwareImage("BMC", "1.1.0")),
		Targets: []string{fw.URI}, Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	st, _ := waitTask(t, c, task)
	require.Equal(t, bmc.TaskCompleted, st.State, "%+v", st)
	mgr, err := c.Manager(ctx)
	require.NoError(t, err)
	assert.Equal(t, "1.1.0", mgr.FirmwareVersion, "in effect when the task ends: no host reset")
}

// TestStartUpdateByMultipartPush: an HPE BMC has no SimpleUpdate; the client pushes the image.
func TestStartUpdateByMultipartPush(t *testing.T) {
	ctx := context.Background()
	sim := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileHPE, UpdateDuration: 200 * time.Millisecond})
	c := connect(t, sim)
	sys := simSystem(t, c, sim)
	bios := componentOf(t, c, sys.URI, bmc.ComponentBIOS)
	opened := 0
	req := bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: "https://images.example/fw/bios?token=Tok3n", Targets: []string{bios.URI},
		Image: func(context.Context) (io.ReadCloser, error) {
			opened++
			return io.NopCloser(bytes.NewReader(bmcsim.FirmwareImage("BIOS", "U30 v3.10"))), nil
		}}

	task, err := c.StartUpdate(ctx, req)
	require.NoError(t, err)
	assert.Equal(t, "/redfish/v1/TaskService/Tasks/1/", task)
	assert.Equal(t, 2, opened, "once to learn its size, once to send it")
	st, _ := waitTask(t, c, task)
	require.Equal(t, bmc.TaskCompleted, st.State, "%+v", st)
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	assert.Equal(t, "U30 v3.10", sim.BIOSVersion(sys.ID))

	// A request without the image to push cannot be done here.
	req.Image = nil
	_, err = c.StartUpdate(ctx, req)
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Contains(t, err.Error(), "only by a multipart push")
	assert.Empty(t, redfish.Leaks(err, "Tok3n"))
}

// TestTaskStatusOfDellJobs: an iDRAC's BIOS update is Pending (its job Scheduled) until the
// host resets; the client reads it as Completed, saying the reset applies it, by its Task or
// its job. A failed job is an Exception.
func TestTaskStatusOfDellJobs(t *testing.T) {
	ctx := context.Background()
	images := serveImages(t)
	sim := startSim(t, bmcsim.Options{Profile: bmcsim.ProfileDell, UpdateDuration: 200 * time.Millisecond, Systems: []bmcsim.SystemSpec{testSystem(0)}})
	c := connect(t, sim)
	sys := simSystem(t, c, sim)
	image := images.add("bios", bmcsim.FirmwareImage("BIOS", "2.9.9"))
	task, err := c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image, Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(task, "/redfish/v1/TaskService/Tasks/JID_"), task)
	st, _ := waitTask(t, c, task)
	require.Equal(t, bmc.TaskCompleted, st.State, "%+v", st)
	assert.Contains(t, st.Message, "Task successfully scheduled.")
	assert.Contains(t, st.Message, "applies at the host's next reset")
	job := "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/" + strings.TrimPrefix(task, "/redfish/v1/TaskService/Tasks/")
	js, err := c.TaskStatus(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, bmc.TaskCompleted, js.State)
	assert.Equal(t, 100, js.Percent)
	assert.Equal(t, "2.1.0", sim.BIOSVersion(sys.ID))

	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	assert.Equal(t, "2.9.9", sim.BIOSVersion(sys.ID))
	st, err = c.TaskStatus(ctx, task)
	require.NoError(t, err)
	assert.Equal(t, bmc.TaskCompleted, st.State)
	assert.NotContains(t, st.Message, "Scheduled", "done now")

	sim.FailNextUpdate("Unable to verify Update Package signature.")
	task, err = c.StartUpdate(ctx, bmc.UpdateRequest{SystemURI: sys.URI, ImageURL: image, Username: imageUser, Password: imagePassword})
	require.NoError(t, err)
	st, _ = waitTask(t, c, task)
	assert.Equal(t, bmc.TaskException, st.State)
	assert.Equal(t, "Unable to verify Update Package signature.", st.Message)
	js, err = c.TaskStatus(ctx, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/"+strings.TrimPrefix(task, "/redfish/v1/TaskService/Tasks/"))
	require.NoError(t, err)
	assert.Equal(t, bmc.TaskException, js.State, "JobState Failed")
}

// TestTaskStatusOfTheDMTFMockup reads the mockup's task, which has no PercentComplete.
func TestTaskStatusOfTheDMTFMockup(t *testing.T) {
	c := startMockup(t, mockupDir(t))
	st, err := c.TaskStatus(context.Background(), "/redfish/v1/TaskService/Tasks/545")
	require.NoError(t, err)
	assert.Equal(t, bmc.TaskStatus{State: bmc.TaskCompleted, Percent: -1,
		Message: "The property SKU is a read only property and cannot be assigned a value"}, st)

	_, err = c.TaskStatus(context.Background(), "/redfish/v1/TaskService/Tasks/546")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "HTTP 404")
}

func TestStartUpdateWithoutAnUpdateService(t *testing.T) {
	dir := mockupCopy(t)
	editJSON(t, dir, ".", func(root map[string]any) { delete(root, "UpdateService") })
	_, err := startMockup(t, dir).StartUpdate(context.Background(), bmc.UpdateRequest{SystemURI: "/redfish/v1/Systems/437XR1138R2", ImageURL: "https://x/fw"})
	require.ErrorIs(t, err, bmc.ErrUnsupported)
	assert.Contains(t, err.Error(), "no UpdateService")
}
