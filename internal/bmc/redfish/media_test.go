package redfish_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// token stands for the boot's secret in image URLs: it must never show in an error.
const token = "tok-3f9a1c7e5b2d4f60"

// isoServer serves two small ISO-like files on loopback, as the boot service does, at
// /boot/<token>/<name>.iso; every other path is 404. It counts the requests per path.
type isoServer struct {
	srv   *httptest.Server
	files map[string][]byte
	mu    sync.Mutex
	hits  map[string]int
}

func startISOServer(t *testing.T) *isoServer {
	t.Helper()
	s := &isoServer{files: map[string][]byte{}, hits: map[string]int{}}
	rng := rand.New(rand.NewPCG(7, 11))
	for _, name := range []string{"a", "b"} {
		data := make([]byte, 48<<10+5)
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		s.files["/boot/"+token+"/"+name+".iso"] = data
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		s.mu.Lock()
		data, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "probe.iso", time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *isoServer) url(name string) string {
	return s.srv.URL + "/boot/" + token + "/" + name + ".iso"
}
func (s *isoServer) data(name string) []byte { return s.files["/boot/"+token+"/"+name+".iso"] }

// add serves data at path too, and returns its URL.
func (s *isoServer) add(path string, data []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
	return s.srv.URL + path
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// refusal is a VirtualMedia action the BMC refuses (its name, as "VirtualMedia.EjectMedia";
// none when empty), naming the image URLs in echo.
type refusal struct {
	action string
	echo   []string
}

// refuseAction makes the BMC behind c refuse the action refusing holds with status and a
// Redfish error whose every field names the URLs, as iDRAC's RAC0904 names the image; the body
// also has them with JSON's escaped slashes.
func refuseAction(c *redfish.Client, refusing *atomic.Value, status int) {
	redfish.WrapTransport(c, func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			r, _ := refusing.Load().(refusal)
			echo := r.echo
			if r.action == "" || req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/"+r.action) {
				return next.RoundTrip(req)
			}
			if req.Body != nil {
				_, _ = io.Copy(io.Discard, req.Body)
				_ = req.Body.Close()
			}
			all := strings.Join(echo, " and ")
			escaped := strings.ReplaceAll(all, "/", `\/`)
			body, _ := json.Marshal(map[string]any{"error": map[string]any{
				"code": "Base.1.8.GeneralError", "message": "A general error has occurred: " + all + " (" + escaped + ")",
				"@Message.ExtendedInfo": []map[string]any{{
					"MessageId": "IDRAC.2.8.RAC0904", "Message": "Unable to complete the operation on " + all + ".",
					"MessageArgs": echo, "Severity": "Critical", "Resolution": "Check " + all + " and retry.",
				}},
			}})
			return &http.Response{StatusCode: status, Status: http.StatusText(status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
				Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(bytes.NewReader(body)),
				ContentLength: int64(len(body)), Request: req}, nil
		})
	})
}

// mediaClient connects with fast polling, so lagging BMCs cost the tests little.
func mediaClient(t *testing.T, sim *bmcsim.BMC) *redfish.Client {
	t.Helper()
	opts := trusting(sim)
	opts.MediaPollInterval, opts.MediaInsertTimeout, opts.MediaEjectTimeout = 20*time.Millisecond, 10*time.Second, 10*time.Second
	c, err := redfish.Connect(context.Background(), target(t, sim, password), opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// holds asserts the simulator's CD holds exactly the bytes the server served for name.
func holds(t *testing.T, sim *bmcsim.BMC, systemID string, iso *isoServer, name string) {
	t.Helper()
	m := sim.Media(systemID)
	require.True(t, m.Inserted, "%s holds media", systemID)
	assert.Equal(t, iso.url(name), m.Image)
	got, err := os.ReadFile(m.Path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(iso.data(name), got), "the BMC fetched exactly what was served")
}

// mediaLifeCycle drives one system's CD through everything a boot does: insert, insert again
// (nothing happens), replace, eject, eject again (nothing happens), and a boot from it.
func mediaLifeCycle(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c *redfish.Client, sys bmc.SystemInfo, iso *isoServer, hook *bmcsim.MediaRecorder) {
	t.Helper()
	before := len(hook.Events())

	slot, err := c.VirtualMedia(ctx, sys.URI)
	require.NoError(t, err)
	assert.NotEmpty(t, slot.URI)
	assert.False(t, slot.Inserted)

	require.NoError(t, c.InsertMedia(ctx, sys.URI, iso.url("a")))
	holds(t, sim, sys.ID, iso, "a")
	evs := hook.Events()[before:]
	require.Len(t, evs, 1, "the hook fired once")
	assert.Equal(t, bmcsim.MediaEvent{SystemID: sys.ID, Image: iso.url("a"), Path: sim.Media(sys.ID).Path, Inserted: true}, evs[0])
	slot, err = c.VirtualMedia(ctx, sys.URI)
	require.NoError(t, err)
	assert.True(t, slot.Inserted, "InsertMedia returns once the BMC reports the media")
	assert.Equal(t, iso.url("a"), slot.Image)
	inserts := sim.Stats().MediaInserts

	require.NoError(t, c.InsertMedia(ctx, sys.URI, iso.url("a")), "again")
	assert.Equal(t, inserts, sim.Stats().MediaInserts, "the same image is not inserted again")
	assert.Len(t, hook.Events()[before:], 1)

	require.NoError(t, c.InsertMedia(ctx, sys.URI, iso.url("b")), "another image")
	holds(t, sim, sys.ID, iso, "b")
	assert.NoFileExists(t, evs[0].Path, "the first image is gone")

	require.NoError(t, c.SetBootOnce(ctx, sys.URI, bmc.BootCd, ""))
	target, enabled := sim.BootOverride(sys.ID)
	assert.Equal(t, bmcsim.BootCd, target)
	assert.Equal(t, "Once", enabled)
	require.NoError(t, c.SetPower(ctx, sys.URI, bmc.PowerOn))
	log := sim.BootLog(sys.ID)
	require.NotEmpty(t, log)
	assert.Equal(t, bmcsim.BootCd, log[len(log)-1].Boot, "the host booted the CD")

	require.NoError(t, c.EjectMedia(ctx, sys.URI))
	assert.Equal(t, bmcsim.MediaEvent{SystemID: sys.ID}, sim.Media(sys.ID))
	last := hook.Events()[len(hook.Events())-1]
	assert.Equal(t, bmcsim.MediaEvent{SystemID: sys.ID}, last, "the hook saw the eject")
	slot, err = c.VirtualMedia(ctx, sys.URI)
	require.NoError(t, err)
	assert.False(t, slot.Inserted, "EjectMedia returns once the BMC reports the slot empty")

	ejects := sim.Stats().MediaEjects
	require.NoError(t, c.EjectMedia(ctx, sys.URI), "an empty slot")
	assert.Equal(t, ejects, sim.Stats().MediaEjects, "nothing to eject, nothing sent")
}

func TestVirtualMediaOnEveryProfile(t *testing.T) {
	for _, profile := range bmcsim.Profiles() {
		t.Run(string(profile), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			iso := startISOServer(t)
			sim := startSim(t, bmcsim.Options{Profile: profile})
			hook := bmcsim.RecordMedia(sim)
			c := mediaClient(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			require.Len(t, systems, 2)
			// The first system of a Manager-media profile uses the Manager's slots, the
			// second its own: both paths of the search.
			for _, sys := range systems {
				mediaLifeCycle(t, ctx, sim, c, sys, iso, hook)
			}
			assert.False(t, sim.Media(systems[0].ID).Inserted)
		})
	}
}

// TestVirtualMediaOnEveryQuirk runs the life cycle against each VirtualMedia quirk of the
// simulator, alone on a well-behaved BMC.
func TestVirtualMediaOnEveryQuirk(t *testing.T) {
	cases := map[string]struct {
		quirks bmcsim.Quirks
		check  func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c *redfish.Client, sys bmc.SystemInfo, iso *isoServer)
	}{
		"NoVirtualMedia": {bmcsim.Quirks{NoVirtualMedia: true}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c *redfish.Client, sys bmc.SystemInfo, iso *isoServer) {
			_, err := c.VirtualMedia(ctx, sys.URI)
			require.Error(t, err)
			assert.True(t, errors.Is(err, bmc.ErrUnsupported), "%v", err)
			assert.Equal(t, metalv1alpha1.BMCReasonVirtualMediaUnsupported, bmc.Reason(err))
			assert.Contains(t, err.Error(), "no VirtualMedia under "+sys.URI+" or its managers")
			for _, err := range []error{c.InsertMedia(ctx, sys.URI, iso.url("a")), c.EjectMedia(ctx, sys.URI)} {
				assert.True(t, errors.Is(err, bmc.ErrUnsupported), "%v", err)
				assert.Equal(t, metalv1alpha1.BMCReasonVirtualMediaUnsupported, bmc.Reason(err))
			}
			assert.Zero(t, sim.Stats().MediaInserts)
		}},
		"VirtualMediaPatchOnly":           {bmcsim.Quirks{VirtualMediaPatchOnly: true}, nil},
		"VirtualMediaRejectsInsertParams": {bmcsim.Quirks{VirtualMediaRejectsInsertParams: true}, nil},
		"VirtualMediaInsertedLag": {bmcsim.Quirks{VirtualMediaInsertedLag: 300 * time.Millisecond}, func(t *testing.T, ctx context.Context, sim *bmcsim.BMC, c *redfish.Client, sys bmc.SystemInfo, iso *isoServer) {
			start := time.Now()
			require.NoError(t, c.InsertMedia(ctx, sys.URI, iso.url("a")))
			assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it waited for the BMC to say Inserted")
			require.NoError(t, c.EjectMedia(ctx, sys.URI))
		}},
		"VirtualMediaConflictWhenInserted":  {bmcsim.Quirks{VirtualMediaConflictWhenInserted: true}, nil},
		"VirtualMediaEjectNeedsBody":        {bmcsim.Quirks{VirtualMediaEjectNeedsBody: true}, nil},
		"VirtualMediaNeedsTransferProtocol": {bmcsim.Quirks{VirtualMediaNeedsTransferProtocol: true}, nil},
		"VirtualMediaEjectWhenEmptyFails":   {bmcsim.Quirks{VirtualMediaEjectWhenEmptyFails: true}, nil},
		"all of them but NoVirtualMedia and PatchOnly": {bmcsim.Quirks{VirtualMediaRejectsInsertParams: true, VirtualMediaInsertedLag: 100 * time.Millisecond,
			VirtualMediaConflictWhenInserted: true, VirtualMediaEjectNeedsBody: true, VirtualMediaNeedsTransferProtocol: true, VirtualMediaEjectWhenEmptyFails: true}, nil},
		"PatchOnly with a lag and conflicts": {bmcsim.Quirks{VirtualMediaPatchOnly: true, VirtualMediaInsertedLag: 100 * time.Millisecond, VirtualMediaConflictWhenInserted: true}, nil},
	}
	for _, name := range bmcsim.QuirkNames() {
		if strings.Contains(name, "VirtualMedia") {
			assert.Contains(t, cases, name, "quirk %s needs a case", name)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			iso := startISOServer(t)
			q := tc.quirks
			sim := startSim(t, bmcsim.Options{Quirks: &q})
			hook := bmcsim.RecordMedia(sim)
			c := mediaClient(t, sim)
			systems, err := c.Systems(ctx)
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, ctx, sim, c, systems[0], iso)
			}
			if !q.NoVirtualMedia {
				mediaLifeCycle(t, ctx, sim, c, systems[0], iso, hook)
			}
		})
	}
}

func TestInsertMediaReportsAFetchFailureWithoutTheURL(t *testing.T) {
	ctx := context.Background()
	iso := startISOServer(t)
	sim := startSim(t, bmcsim.Options{})
	c := mediaClient(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]

	missing := iso.srv.URL + "/boot/" + token + "/gone.iso"
	err = c.InsertMedia(ctx, sys.URI, missing)
	require.Error(t, err)
	assert.False(t, errors.Is(err, bmc.ErrUnsupported), "the BMC can do it; the image server failed")
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
	assert.Contains(t, err.Error(), "HTTP 400")
	assert.Contains(t, err.Error(), "404", "the BMC's reason is passed on")
	assert.NotContains(t, err.Error(), token, "the image URL is a secret")
	assert.Contains(t, err.Error(), iso.srv.Listener.Addr().String(), "the image server is named")
	assert.False(t, sim.Media(sys.ID).Inserted)
	iso.mu.Lock()
	assert.Equal(t, 1, iso.hits["/boot/"+token+"/gone.iso"], "the BMC did try")
	iso.mu.Unlock()

	err = c.InsertMedia(ctx, sys.URI, "ftp://example.invalid/x.iso")
	assert.Error(t, err, "only http and https")
}

// InsertMedia replacing another boot's media scrubs both image URLs from its errors, the one it
// inserts and the one the slot held (that boot's token is as secret), whether the BMC refuses
// the eject of the old media or the insert of the new and names them: neither path shows in
// the error, nor in any error reachable from it with errors.As or Unwrap. EjectMedia likewise.
func TestMediaErrorsScrubTheOldImageURLToo(t *testing.T) {
	ctx := context.Background()
	iso := startISOServer(t)
	const otherToken = "tok-0ld8e2b7c41d9a55"
	oldPath, newPath := "/boot/"+otherToken+"/probe.iso", "/boot/"+token+"/b.iso"
	oldURL, newURL := iso.add(oldPath, iso.data("a")), iso.url("b")
	sim := startSim(t, bmcsim.Options{})
	c := mediaClient(t, sim)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)
	sys := systems[0]
	var refusing atomic.Value
	refuseAction(c, &refusing, http.StatusInternalServerError)
	secrets := []string{oldPath, newPath, otherToken, token}

	for _, refused := range []string{"VirtualMedia.EjectMedia", "VirtualMedia.InsertMedia"} {
		t.Run(refused, func(t *testing.T) {
			refusing.Store(refusal{})
			require.NoError(t, c.InsertMedia(ctx, sys.URI, oldURL), "another boot's media in the slot")
			refusing.Store(refusal{refused, []string{oldURL, newURL}})
			err := c.InsertMedia(ctx, sys.URI, newURL)
			require.Error(t, err)
			t.Log(err)
			assert.Empty(t, redfish.Leaks(err, secrets...))
			assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
			assert.Contains(t, err.Error(), "HTTP 500")
			assert.Contains(t, err.Error(), "Unable to complete the operation on", "the BMC's message is passed on")
			assert.Contains(t, err.Error(), iso.srv.Listener.Addr().String(), "the image server is named")
		})
	}

	refusing.Store(refusal{})
	require.NoError(t, c.InsertMedia(ctx, sys.URI, oldURL))
	refusing.Store(refusal{"VirtualMedia.EjectMedia", []string{oldURL}})
	err = c.EjectMedia(ctx, sys.URI)
	require.Error(t, err)
	assert.Empty(t, redfish.Leaks(err, secrets...))
	assert.Equal(t, metalv1alpha1.BMCReasonProtocolError, bmc.Reason(err))
	refusing.Store(refusal{})
	require.NoError(t, c.EjectMedia(ctx, sys.URI))
}

func TestInsertMediaDoesNotWaitForEver(t *testing.T) {
	ctx := context.Background()
	iso := startISOServer(t)
	q := bmcsim.Quirks{VirtualMediaInsertedLag: time.Hour}
	sim := startSim(t, bmcsim.Options{Quirks: &q})
	opts := trusting(sim)
	opts.MediaPollInterval, opts.MediaInsertTimeout, opts.MediaEjectTimeout = 20*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond
	c, err := redfish.Connect(ctx, target(t, sim, password), opts)
	require.NoError(t, err)
	t.Cleanup(c.Close)
	systems, err := c.Systems(ctx)
	require.NoError(t, err)

	err = c.InsertMedia(ctx, systems[0].URI, iso.url("a"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not report")
	assert.NotContains(t, err.Error(), token)
	inserts := sim.Stats().MediaInserts

	// A retry (the next reconcile) waits for the same image instead of inserting it again.
	err = c.InsertMedia(ctx, systems[0].URI, iso.url("a"))
	require.Error(t, err)
	assert.GreaterOrEqual(t, sim.Stats().MediaInserts, inserts)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, c.InsertMedia(cancelled, systems[0].URI, iso.url("a")), context.Canceled)
}

// writeMockup writes a DMTF-style mockup: resources keyed by their path under /redfish/v1.
func writeMockup(t *testing.T, resources map[string]any) string {
	t.Helper()
	dir := t.TempDir()
	for p, body := range resources {
		d := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(d, 0o755))
		data, err := json.Marshal(body)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(d, "index.json"), data, 0o644))
	}
	return dir
}

type obj = map[string]any

func ref(p string) obj { return obj{"@odata.id": p} }

// TestUnsupportedSaysWhatWasFound reads BMCs whose slots cannot boot an ISO (served as static
// mockups): the error names what there is.
func TestUnsupportedSaysWhatWasFound(t *testing.T) {
	base := func(slots map[string]obj) map[string]any {
		r := map[string]any{
			"": obj{"@odata.id": "/redfish/v1/", "Systems": ref("/redfish/v1/Systems"), "Managers": ref("/redfish/v1/Managers"),
				"SessionService": ref("/redfish/v1/SessionService"), "Links": obj{"Sessions": ref("/redfish/v1/SessionService/Sessions")}},
			"Systems":   obj{"@odata.id": "/redfish/v1/Systems", "Members": []obj{ref("/redfish/v1/Systems/1")}},
			"Systems/1": obj{"@odata.id": "/redfish/v1/Systems/1", "Id": "1", "Links": obj{"ManagedBy": []obj{ref("/redfish/v1/Managers/1")}}},
			"Managers":  obj{"@odata.id": "/redfish/v1/Managers", "Members": []obj{ref("/redfish/v1/Managers/1")}},
			"Managers/1": obj{"@odata.id": "/redfish/v1/Managers/1", "Id": "1", "ManagerType": "BMC",
				"VirtualMedia": ref("/redfish/v1/Managers/1/VirtualMedia")},
			"SessionService": obj{"@odata.id": "/redfish/v1/SessionService", "Sessions": ref("/redfish/v1/SessionService/Sessions")},
		}
		var members []obj
		for id, s := range slots {
			p := "/redfish/v1/Managers/1/VirtualMedia/" + id
			s["@odata.id"], s["Id"] = p, id
			r["Managers/1/VirtualMedia/"+id] = s
			members = append(members, ref(p))
		}
		r["Managers/1/VirtualMedia"] = obj{"@odata.id": "/redfish/v1/Managers/1/VirtualMedia", "Members": members}
		return r
	}
	actions := func(p string) obj {
		return obj{"#VirtualMedia.InsertMedia": obj{"target": p + "/Actions/VirtualMedia.InsertMedia"},
			"#VirtualMedia.EjectMedia": obj{"target": p + "/Actions/VirtualMedia.EjectMedia"}}
	}
	for name, tc := range map[string]struct {
		slots map[string]obj
		want  []string
	}{
		"USB and floppy only": {map[string]obj{
			"1": {"MediaTypes": []string{"USBStick", "Floppy"}, "Inserted": false, "Actions": actions("/redfish/v1/Managers/1/VirtualMedia/1")},
		}, []string{"slots offer only USBStick/Floppy", "/redfish/v1/Managers/1/VirtualMedia/1"}},
		"a KVM-only CD": {map[string]obj{
			"CD": {"MediaTypes": []string{"CD"}, "Inserted": false, "ConnectedVia": "Applet"},
		}, []string{"/redfish/v1/Managers/1/VirtualMedia/CD", "no InsertMedia action and do not allow PATCH"}},
		"no slots": {map[string]obj{}, []string{"VirtualMedia collections of /redfish/v1/Systems/1 and its managers are empty"}},
	} {
		t.Run(name, func(t *testing.T) {
			sim, err := bmcsim.StartStatic(writeMockup(t, base(tc.slots)), true)
			require.NoError(t, err)
			t.Cleanup(func() { _ = sim.Close() })
			c := connect(t, sim)
			_, err = c.VirtualMedia(context.Background(), "/redfish/v1/Systems/1")
			require.Error(t, err)
			assert.True(t, errors.Is(err, bmc.ErrUnsupported), "%v", err)
			assert.Equal(t, metalv1alpha1.BMCReasonVirtualMediaUnsupported, bmc.Reason(err))
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// TestADVDOnlySlotIsACD: Cisco blades offer DVD, not CD.
func TestADVDOnlySlotIsACD(t *testing.T) {
	p := "/redfish/v1/Managers/1/VirtualMedia/0"
	resources := map[string]any{
		"":                        obj{"@odata.id": "/redfish/v1/", "Systems": ref("/redfish/v1/Systems"), "Managers": ref("/redfish/v1/Managers"), "Links": obj{"Sessions": ref("/redfish/v1/SessionService/Sessions")}},
		"Systems":                 obj{"Members": []obj{ref("/redfish/v1/Systems/1")}},
		"Systems/1":               obj{"@odata.id": "/redfish/v1/Systems/1", "Id": "1"}, // no ManagedBy: found through all managers
		"Managers":                obj{"Members": []obj{ref("/redfish/v1/Managers/1")}},
		"Managers/1":              obj{"@odata.id": "/redfish/v1/Managers/1", "VirtualMedia": ref("/redfish/v1/Managers/1/VirtualMedia")},
		"Managers/1/VirtualMedia": obj{"Members": []obj{ref(p)}},
		"Managers/1/VirtualMedia/0": obj{"@odata.id": p, "MediaTypes": []string{"DVD"}, "Image": "http://10.0.0.1/x.iso", "Inserted": true,
			"Actions": obj{"#VirtualMedia.InsertMedia": obj{"target": p + "/Actions/VirtualMedia.InsertMedia"}}},
	}
	sim, err := bmcsim.StartStatic(writeMockup(t, resources), true)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	c := connect(t, sim)
	slot, err := c.VirtualMedia(context.Background(), "/redfish/v1/Systems/1")
	require.NoError(t, err)
	assert.Equal(t, bmc.MediaSlot{URI: p, Image: "http://10.0.0.1/x.iso", Inserted: true}, slot)
}
