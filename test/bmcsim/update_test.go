package bmcsim_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// testUpdateDuration is how long the tests' updates run: long enough to see them run, short
// enough for a fast test.
const testUpdateDuration = 300 * time.Millisecond

const simpleUpdate = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"

// firmwareServer serves firmware images at /fw/<name>, each needing Basic auth when user is
// set; every other path is 404. It counts the fetches.
type firmwareServer struct {
	srv        *httptest.Server
	mu         sync.Mutex
	files      map[string][]byte
	user, pass string
	fetches    int
}

func serveFirmware(t *testing.T, tls bool) *firmwareServer {
	t.Helper()
	fs := &firmwareServer{files: map[string][]byte{}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		defer fs.mu.Unlock()
		fs.fetches++
		if fs.user != "" {
			if u, p, ok := r.BasicAuth(); !ok || u != fs.user || p != fs.pass {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
		}
		data, ok := fs.files[strings.TrimPrefix(r.URL.Path, "/fw/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(data)
	})
	if tls {
		fs.srv = httptest.NewTLSServer(h)
	} else {
		fs.srv = httptest.NewServer(h)
	}
	t.Cleanup(fs.srv.Close)
	return fs
}

// add serves data as name and returns its URL, with a query that stands for a token.
func (fs *firmwareServer) add(name string, data []byte) string {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.files[name] = data
	return fs.srv.URL + "/fw/" + name + "?token=s3cr3t-t0ken"
}

// observation is one read of a task.
type observation struct {
	state   string
	percent int
}

// followTask reads a task until it is in one of the states, with a deadline; it returns the
// last body and every state and percentage seen on the way.
func followTask(t *testing.T, b *bmcsim.BMC, path string, until ...string) (map[string]any, []observation) {
	t.Helper()
	var seen []observation
	var body map[string]any
	client := httpClient(t, b)
	status := 0
	eventually(t, func() bool {
		// Not getOK: a condition runs outside the test's goroutine, where it must not fail the test.
		req, err := http.NewRequest(http.MethodGet, b.URL()+path, nil)
		if err != nil {
			return true
		}
		req.SetBasicAuth(testUser, testPass)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		body = nil
		if status = resp.StatusCode; status != http.StatusOK || json.NewDecoder(resp.Body).Decode(&body) != nil {
			return true // reported below
		}
		state, _ := body["TaskState"].(string)
		pct, _ := body["PercentComplete"].(float64)
		seen = append(seen, observation{state, int(pct)})
		for _, s := range until {
			if state == s {
				return true
			}
		}
		return false
	}, "task "+path+" reaches "+strings.Join(until, " or "))
	require.Equal(t, http.StatusOK, status, "GET %s: %v", path, body)
	require.NotNil(t, body, "GET %s answers a task", path)
	return body, seen
}

// lastMessage is a task's last message's text.
func lastMessage(t *testing.T, task map[string]any) string {
	t.Helper()
	msgs, _ := task["Messages"].([]any)
	require.NotEmpty(t, msgs, "task %v has messages", task["Id"])
	text, _ := msgs[len(msgs)-1].(map[string]any)["Message"].(string)
	return text
}

// startUpdate posts a SimpleUpdate that must be accepted and returns its task's path.
func startUpdate(t *testing.T, b *bmcsim.BMC, params map[string]any) string {
	t.Helper()
	status, header, body := call(t, b, http.MethodPost, simpleUpdate, params)
	require.Equal(t, http.StatusAccepted, status, "%v", body)
	loc := header.Get("Location")
	require.NotEmpty(t, loc)
	assert.Equal(t, loc, body["@odata.id"], "the body is the task the Location names")
	return loc
}

func TestSimpleUpdateOfTheBMCCompletesAndChangesItsVersion(t *testing.T) {
	fw := serveFirmware(t, true) // HTTPS with a certificate the BMC does not verify
	fw.user, fw.pass = "fwuser", "fw-pass"
	b := start(t, bmcsim.Options{TLS: true, UpdateDuration: 2 * testUpdateDuration, Systems: firmwareSystems(), FirmwareVersion: "1.0.0"})
	var rec actionRecorder
	b.OnPowerAction(rec.record)

	root := getOK(t, b, "/redfish/v1/")
	assert.Equal(t, "/redfish/v1/TaskService", root["Tasks"].(map[string]any)["@odata.id"])
	us := getOK(t, b, "/redfish/v1/UpdateService")
	action := us["Actions"].(map[string]any)["#UpdateService.SimpleUpdate"].(map[string]any)
	assert.Equal(t, simpleUpdate, action["target"])
	assert.Equal(t, []any{"HTTP", "HTTPS"}, action["TransferProtocol@Redfish.AllowableValues"])
	assert.Equal(t, "/redfish/v1/UpdateService/upload", us["MultipartHttpPushUri"])

	image := fw.add("bmc.bin", bmcsim.FirmwareImage("BMC", "2.0.0"))
	loc := startUpdate(t, b, map[string]any{
		"ImageURI": image, "Targets": []string{"/redfish/v1/Managers/BMC"}, "TransferProtocol": "HTTPS",
		"Username": fw.user, "Password": fw.pass, "@Redfish.OperationApplyTime": "Immediate",
	})
	assert.Equal(t, "/redfish/v1/TaskService/Tasks/1", loc)
	assert.Equal(t, 1, fw.fetches, "the BMC fetched the image before it answered")
	assert.Equal(t, []string{loc}, memberIDs(t, getOK(t, b, "/redfish/v1/TaskService/Tasks")))
	assert.Equal(t, "/redfish/v1/TaskService/Tasks", getOK(t, b, "/redfish/v1/TaskService")["Tasks"].(map[string]any)["@odata.id"])

	task, seen := followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	assert.Equal(t, "OK", task["TaskStatus"])
	assert.InDelta(t, 100, task["PercentComplete"], 0)
	assert.NotEmpty(t, task["EndTime"])
	assert.Contains(t, lastMessage(t, task), "successfully updated")
	order := map[string]int{"New": 0, "Running": 1, "Completed": 2}
	sawRunning := false
	for i := 1; i < len(seen); i++ {
		assert.LessOrEqual(t, order[seen[i-1].state], order[seen[i].state], "states only move forward: %v", seen)
		assert.LessOrEqual(t, seen[i-1].percent, seen[i].percent, "PercentComplete only rises: %v", seen)
		if seen[i].state == "Running" {
			sawRunning = true
			assert.True(t, seen[i].percent > 0 && seen[i].percent < 100, "%v", seen)
		}
	}
	assert.True(t, sawRunning, "the task was seen running: %v", seen)

	// The BMC runs the new firmware as soon as the task says so: no host reset needed.
	assert.Equal(t, "2.0.0", getOK(t, b, "/redfish/v1/Managers/BMC")["FirmwareVersion"])
	assert.Equal(t, "2.0.0", b.FirmwareVersion())
	assert.Equal(t, "2.0.0", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/1")["Version"])
	assert.Empty(t, rec.summary(), "the hosts were not touched")

	// gofish reads the task too.
	c := connect(t, b, false)
	gt, err := redfish.GetTask(c, loc)
	require.NoError(t, err)
	assert.Equal(t, redfish.CompletedTaskState, gt.TaskState)
	assert.Equal(t, 100, gt.PercentComplete)
	require.NotEmpty(t, gt.Messages)

	// Without the image server's credentials the transfer fails, and says so without the
	// image's path or token.
	loc = startUpdate(t, b, map[string]any{"ImageURI": image})
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Exception", task["TaskState"])
	assert.Equal(t, "Critical", task["TaskStatus"])
	msg := lastMessage(t, task)
	assert.Contains(t, msg, "401")
	assert.NotContains(t, msg, "bmc.bin")
	assert.NotContains(t, msg, "s3cr3t")
	assert.Equal(t, "2.0.0", b.FirmwareVersion())
}

func TestABIOSUpdateTakesEffectAtTheNextPowerOn(t *testing.T) {
	fw := serveFirmware(t, false)
	specs := firmwareSystems()
	b := start(t, bmcsim.Options{UpdateDuration: testUpdateDuration, Systems: specs})
	var rec actionRecorder
	b.OnPowerAction(rec.record)
	actions := func() []bmcsim.PowerAction {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return append([]bmcsim.PowerAction(nil), rec.actions...)
	}

	// The first system's BIOS, named by its inventory member; the second's stays as it is.
	loc := startUpdate(t, b, map[string]any{"ImageURI": fw.add("bios", bmcsim.FirmwareImage("BIOS", "2.5.0")),
		"Targets": []string{"/redfish/v1/UpdateService/FirmwareInventory/2"}})
	task, _ := followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	assert.Contains(t, lastMessage(t, task), "next reset", "the task says the host must reset")

	// Completed, but the host still runs the old BIOS until it boots.
	assert.Equal(t, "2.1.0", getOK(t, b, "/redfish/v1/Systems/1")["BiosVersion"])
	assert.Equal(t, "2.1.0", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/2")["Version"])
	assert.Equal(t, "2.1.0", b.BIOSVersion("1"))

	b.SetPowerState("1", "On")
	got := actions()
	require.Len(t, got, 1)
	assert.Equal(t, "2.5.0", got[0].BIOSVersion, "the boot that activates it carries it")
	assert.Equal(t, "2.5.0", getOK(t, b, "/redfish/v1/Systems/1")["BiosVersion"])
	assert.Equal(t, "2.5.0", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/2")["Version"])
	assert.Equal(t, "2.5.0", getOK(t, b, "/redfish/v1/Systems/1/Bios")["Attributes"].(map[string]any)["SystemBiosVersion"])
	assert.Equal(t, "2.1.1", b.BIOSVersion("2"), "the other system's BIOS was not a target")

	// Every booting action says which BIOS the host boots; the others say nothing.
	sys, err := redfish.GetComputerSystem(connect(t, b, true), "/redfish/v1/Systems/1")
	require.NoError(t, err)
	require.NoError(t, sys.Reset(redfish.ForceRestartResetType))
	require.NoError(t, sys.Reset(redfish.ForceOffResetType))
	require.NoError(t, sys.Reset(redfish.OnResetType))
	got = actions()
	require.Len(t, got, 4)
	assert.Equal(t, "2.5.0", got[1].BIOSVersion, "ForceRestart")
	assert.Empty(t, got[2].BIOSVersion, "ForceOff boots nothing")
	assert.Equal(t, "2.5.0", got[3].BIOSVersion, "On")

	// A NIC image by class: staged on each system that has one, active at its next boot.
	loc = startUpdate(t, b, map[string]any{"ImageURI": fw.add("nic", bmcsim.FirmwareImage("NIC", "23.0.1"))})
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	assert.Equal(t, "22.31.6", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/3")["Version"])
	require.NoError(t, sys.Reset(redfish.PowerCycleResetType))
	assert.Equal(t, "23.0.1", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/3")["Version"])
	assert.Equal(t, "22.31.6", getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory/5")["Version"], "system 2 has not reset")
}

func TestFailNextUpdateEndsTheTaskInException(t *testing.T) {
	fw := serveFirmware(t, false)
	b := start(t, bmcsim.Options{UpdateDuration: testUpdateDuration})
	image := fw.add("bmc", bmcsim.FirmwareImage("BMC", "9.0.0"))

	b.FailNextUpdate("The flash part did not verify.")
	loc := startUpdate(t, b, map[string]any{"ImageURI": image})
	task, _ := followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Exception", task["TaskState"], "%v", task)
	assert.Equal(t, "The flash part did not verify.", lastMessage(t, task))
	assert.Equal(t, "1.0.0", b.FirmwareVersion(), "a failed update changes nothing")

	// Only the next one fails.
	loc = startUpdate(t, b, map[string]any{"ImageURI": image})
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	assert.Equal(t, "9.0.0", b.FirmwareVersion())
}

func TestUpdatesOfImagesThatCannotBeInstalledFail(t *testing.T) {
	fw := serveFirmware(t, false)
	b := start(t, bmcsim.Options{UpdateDuration: testUpdateDuration, Systems: firmwareSystems()})
	for name, tc := range map[string]struct {
		params map[string]any
		says   string
	}{
		"not an image":           {map[string]any{"ImageURI": fw.add("garbage", []byte("MZ\x90\x00 this is not it\n"))}, `its first line is not "IRONFLEET-FIRMWARE 1"`},
		"no version":             {map[string]any{"ImageURI": fw.add("noversion", []byte("IRONFLEET-FIRMWARE 1\ncomponent=BIOS\n"))}, "names no version"},
		"not a key=value header": {map[string]any{"ImageURI": fw.add("badline", []byte("IRONFLEET-FIRMWARE 1\ncomponent BIOS\n"))}, "is not key=value"},
		"a component the BMC does not have": {map[string]any{"ImageURI": fw.add("cpld", bmcsim.FirmwareImage("CPLD", "1"))},
			"CPLD, which is not in this BMC's firmware inventory"},
		"a component not among the Targets": {map[string]any{"ImageURI": fw.add("bios-not-bmc", bmcsim.FirmwareImage("BIOS", "3")),
			"Targets": []string{"/redfish/v1/Managers/BMC"}}, "not among the Targets /redfish/v1/Managers/BMC"},
		"an image that is not there": {map[string]any{"ImageURI": fw.srv.URL + "/fw/missing?token=s3cr3t-t0ken"}, "HTTP 404"},
	} {
		t.Run(name, func(t *testing.T) {
			loc := startUpdate(t, b, tc.params)
			task, _ := followTask(t, b, loc, "Completed", "Exception")
			require.Equal(t, "Exception", task["TaskState"], "%v", task)
			msg := lastMessage(t, task)
			assert.Contains(t, msg, tc.says)
			assert.NotContains(t, msg, "s3cr3t", "the image's URL is not echoed")
		})
	}
	assert.Equal(t, "2.1.0", b.BIOSVersion("1"))
	assert.Equal(t, "1.0.0", b.FirmwareVersion())

	// What is wrong with the request itself is refused at once.
	image := fw.add("bios", bmcsim.FirmwareImage("BIOS", "3"))
	for name, tc := range map[string]struct {
		params    map[string]any
		messageID string
	}{
		"no ImageURI":                    {map[string]any{"Targets": []string{}}, "Base.1.8.ActionParameterMissing"},
		"a Target that is nothing":       {map[string]any{"ImageURI": image, "Targets": []string{"/redfish/v1/Chassis/1"}}, "Base.1.8.ActionParameterValueFormatError"},
		"a protocol it does not fetch":   {map[string]any{"ImageURI": image, "TransferProtocol": "TFTP"}, "Base.1.8.ActionParameterValueNotInList"},
		"a scheme it does not fetch":     {map[string]any{"ImageURI": "ftp://example/fw"}, "Base.1.8.ActionParameterValueFormatError"},
		"an unknown parameter":           {map[string]any{"ImageURI": image, "Reboot": true}, "Base.1.8.ActionParameterUnknown"},
		"an apply time it does not take": {map[string]any{"ImageURI": image, "@Redfish.OperationApplyTime": "AtMaintenanceWindowStart"}, "Base.1.8.ActionParameterValueNotInList"},
	} {
		t.Run(name, func(t *testing.T) {
			status, _, body := call(t, b, http.MethodPost, simpleUpdate, tc.params)
			assert.Equal(t, http.StatusBadRequest, status, "%v", body)
			assert.Equal(t, tc.messageID, messageID(body))
		})
	}
}

// pushForm is a multipart push body: UpdateParameters (when params is not nil) and UpdateFile
// (when image is not nil).
func pushForm(t *testing.T, params map[string]any, image []byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if params != nil {
		data, err := json.Marshal(params)
		require.NoError(t, err)
		require.NoError(t, mw.WriteField("UpdateParameters", string(data)))
	}
	if image != nil {
		part, err := mw.CreateFormFile("UpdateFile", "firmware.bin")
		require.NoError(t, err)
		_, err = part.Write(image)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return mw.FormDataContentType(), buf.Bytes()
}

// push posts a multipart body to a push URI.
func push(t *testing.T, b *bmcsim.BMC, uri, contentType string, body []byte) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.URL()+uri, bytes.NewReader(body))
	require.NoError(t, err)
	req.SetBasicAuth(testUser, testPass)
	req.Header.Set("Content-Type", contentType)
	resp, err := httpClient(t, b).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out), "%s", data)
	return resp.StatusCode, resp.Header, out
}

func TestHPEOffersOnlyTheMultipartPush(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true, Profile: bmcsim.ProfileHPE, UpdateDuration: testUpdateDuration, Systems: firmwareSystems()})
	us := getOK(t, b, "/redfish/v1/UpdateService/")
	assert.NotContains(t, us, "Actions", "no SimpleUpdate")
	uri, _ := us["MultipartHttpPushUri"].(string)
	require.Equal(t, "/redfish/v1/UpdateService/upload/", uri)
	status, _, _ := call(t, b, http.MethodPost, simpleUpdate, map[string]any{"ImageURI": "http://127.0.0.1/fw"})
	assert.Equal(t, http.StatusNotFound, status)

	// The BIOS of system 1 (iLO's "System ROM", member 2), pushed.
	ct, body := pushForm(t, map[string]any{"Targets": []string{"/redfish/v1/UpdateService/FirmwareInventory/2/"}}, bmcsim.FirmwareImage("BIOS", "U30 v3.00"))
	status, header, task := push(t, b, uri, ct, body)
	require.Equal(t, http.StatusAccepted, status, "%v", task)
	loc := header.Get("Location")
	assert.Equal(t, "/redfish/v1/TaskService/Tasks/1/", loc)
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	assert.Equal(t, "2.1.0", b.BIOSVersion("1"), "not before the host resets")
	b.SetPowerState("1", "On")
	assert.Equal(t, "U30 v3.00", b.BIOSVersion("1"))
	assert.Equal(t, "U30 v3.00", getOK(t, b, "/redfish/v1/Systems/1/")["BiosVersion"])

	// An unreadable image fails its task; a form without the image or the parameters, or no
	// form at all, is refused.
	ct, body = pushForm(t, map[string]any{}, []byte("not firmware"))
	status, header, task = push(t, b, uri, ct, body)
	require.Equal(t, http.StatusAccepted, status, "%v", task)
	task, _ = followTask(t, b, header.Get("Location"), "Completed", "Exception")
	assert.Equal(t, "Exception", task["TaskState"])
	ct, body = pushForm(t, map[string]any{}, nil)
	status, _, task = push(t, b, uri, ct, body)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.ActionParameterMissing", messageID(task))
	ct, body = pushForm(t, nil, bmcsim.FirmwareImage("BIOS", "1"))
	status, _, _ = push(t, b, uri, ct, body)
	assert.Equal(t, http.StatusBadRequest, status)
	status, _, _ = push(t, b, uri, "application/octet-stream", bmcsim.FirmwareImage("BIOS", "1"))
	assert.Equal(t, http.StatusUnsupportedMediaType, status)
}

// TestADellUpdateIsAJobThatWaitsForTheReset: iDRAC's task of a BIOS update is Pending (its job
// Scheduled) from the end of the transfer until the host resets, then Completed; a job of the
// same JID is under the iDRAC's Jobs. An iDRAC update completes at once, its former version
// listed as Previous-.
func TestADellUpdateIsAJobThatWaitsForTheReset(t *testing.T) {
	fw := serveFirmware(t, false)
	b := start(t, bmcsim.Options{Profile: bmcsim.ProfileDell, UpdateDuration: testUpdateDuration, Systems: firmwareSystems()[:1]})
	assert.Equal(t, "/redfish/v1/UpdateService/MultipartUpload", getOK(t, b, "/redfish/v1/UpdateService")["MultipartHttpPushUri"])

	loc := startUpdate(t, b, map[string]any{"ImageURI": fw.add("bios", bmcsim.FirmwareImage("BIOS", "2.4.1"))})
	require.True(t, strings.HasPrefix(loc, "/redfish/v1/TaskService/Tasks/JID_"), loc)
	jid := strings.TrimPrefix(loc, "/redfish/v1/TaskService/Tasks/")
	task, _ := followTask(t, b, loc, "Pending", "Completed", "Exception")
	require.Equal(t, "Pending", task["TaskState"], "%v", task)
	assert.Equal(t, "Task successfully scheduled.", lastMessage(t, task))
	assert.Equal(t, "Scheduled", task["Oem"].(map[string]any)["Dell"].(map[string]any)["JobState"])
	job := getOK(t, b, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/"+jid)
	assert.Equal(t, "Scheduled", job["JobState"])
	assert.Equal(t, "FirmwareUpdate", job["JobType"])
	assert.Contains(t, memberIDs(t, getOK(t, b, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs")), "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/"+jid)
	assert.Equal(t, "2.1.0", b.BIOSVersion("System.Embedded.1"))

	sys := firstSystem(t, b)
	require.NoError(t, sys.Reset(redfish.OnResetType))
	task = getOK(t, b, loc)
	assert.Equal(t, "Completed", task["TaskState"])
	assert.Equal(t, "Completed", getOK(t, b, "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/"+jid)["JobState"])
	assert.Equal(t, "2.4.1", b.BIOSVersion("System.Embedded.1"))
	assert.Contains(t, memberIDs(t, getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory")),
		"/redfish/v1/UpdateService/FirmwareInventory/Installed-159-2.4.1__BIOS.Setup.1-1")

	// The iDRAC's own firmware, by its member's Id.
	b.FailNextUpdate("") // and a failure first: its job is Failed
	loc = startUpdate(t, b, map[string]any{"ImageURI": fw.add("idrac", bmcsim.FirmwareImage("Installed-25227-7.10.30.00__iDRAC.Embedded.1-1", "7.20.10.00"))})
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Exception", task["TaskState"])
	assert.Equal(t, "Failed", task["Oem"].(map[string]any)["Dell"].(map[string]any)["JobState"])
	loc = startUpdate(t, b, map[string]any{"ImageURI": fw.add("idrac", bmcsim.FirmwareImage("Installed-25227-7.10.30.00__iDRAC.Embedded.1-1", "7.20.10.00"))})
	task, _ = followTask(t, b, loc, "Completed", "Exception")
	require.Equal(t, "Completed", task["TaskState"], "%v", task)
	members := memberIDs(t, getOK(t, b, "/redfish/v1/UpdateService/FirmwareInventory"))
	assert.Contains(t, members, "/redfish/v1/UpdateService/FirmwareInventory/Installed-25227-7.20.10.00__iDRAC.Embedded.1-1")
	assert.Contains(t, members, "/redfish/v1/UpdateService/FirmwareInventory/Previous-25227-7.10.30.00__iDRAC.Embedded.1-1")
}

func TestFirmwareImageParsesAsItsOwnFormat(t *testing.T) {
	assert.Equal(t, "IRONFLEET-FIRMWARE 1\ncomponent=BIOS\nversion=2.4.0\n", string(bmcsim.FirmwareImage("BIOS", "2.4.0")))
}
