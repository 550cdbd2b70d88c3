package bmcsim_test

import (
	"bytes"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// images is an HTTP server on loopback serving ISO-like files at /boot/<name>.iso, as the boot
// service does; every other path is 404.
type images struct {
	srv   *httptest.Server
	files map[string][]byte
}

func imageServer(t *testing.T) *images {
	t.Helper()
	im := &images{files: map[string][]byte{}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"a", "b"} {
		data := make([]byte, 64<<10+17)
		for i := range data {
			data[i] = byte(rng.UintN(256))
		}
		im.files["/boot/"+name+".iso"] = data
	}
	im.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := im.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "probe.iso", fixedTime, bytes.NewReader(data))
	}))
	t.Cleanup(im.srv.Close)
	return im
}

var fixedTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (im *images) url(name string) string  { return im.srv.URL + "/boot/" + name + ".iso" }
func (im *images) data(name string) []byte { return im.files["/boot/"+name+".iso"] }

const (
	cdPath   = "/redfish/v1/Systems/1/VirtualMedia/CD"
	insertCD = cdPath + "/Actions/VirtualMedia.InsertMedia"
	ejectCD  = cdPath + "/Actions/VirtualMedia.EjectMedia"
)

func TestInsertFetchesTheImageAndTellsTheHooks(t *testing.T) {
	im := imageServer(t)
	b := start(t, bmcsim.Options{})
	events := bmcsim.RecordMedia(b)

	sys := getOK(t, b, "/redfish/v1/Systems/1")
	assert.Equal(t, "/redfish/v1/Systems/1/VirtualMedia", sys["VirtualMedia"].(map[string]any)["@odata.id"])
	assert.Contains(t, sys["Boot"].(map[string]any)["BootSourceOverrideTarget@Redfish.AllowableValues"], "Cd")
	assert.Equal(t, []string{cdPath}, memberIDs(t, getOK(t, b, "/redfish/v1/Systems/1/VirtualMedia")))
	slot := getOK(t, b, cdPath)
	assert.Equal(t, []any{"CD", "DVD"}, slot["MediaTypes"])
	assert.Equal(t, false, slot["Inserted"])
	assert.Nil(t, slot["Image"])

	status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
	require.Equal(t, http.StatusNoContent, status, "%v", body)

	// The hook ran before the answer: no waiting needed.
	evs := events.Events()
	require.Len(t, evs, 1)
	ev := evs[0]
	assert.Equal(t, "1", ev.SystemID)
	assert.Equal(t, im.url("a"), ev.Image)
	assert.True(t, ev.Inserted)
	got, err := os.ReadFile(ev.Path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(im.data("a"), got), "the BMC holds exactly the bytes served")
	assert.Equal(t, ev, b.Media("1"))
	assert.Equal(t, filepath.Dir(ev.Path), b.MediaDir())

	slot = getOK(t, b, cdPath)
	assert.Equal(t, true, slot["Inserted"])
	assert.Equal(t, im.url("a"), slot["Image"])
	assert.Equal(t, "a.iso", slot["ImageName"])
	assert.Equal(t, "URI", slot["ConnectedVia"])

	// Another image replaces the first (a well-behaved BMC needs no eject in between).
	status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("b"), "Inserted": true, "WriteProtected": true, "TransferProtocolType": "HTTP", "TransferMethod": "Stream"})
	require.Equal(t, http.StatusNoContent, status)
	require.Len(t, events.Events(), 2)
	second := events.Events()[1]
	assert.NoFileExists(t, ev.Path, "the replaced image is gone")
	got, err = os.ReadFile(second.Path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(im.data("b"), got))

	status, _, _ = call(t, b, http.MethodPost, ejectCD, nil)
	require.Equal(t, http.StatusNoContent, status)
	require.Len(t, events.Events(), 3)
	assert.Equal(t, bmcsim.MediaEvent{SystemID: "1"}, events.Events()[2])
	assert.Equal(t, bmcsim.MediaEvent{SystemID: "1"}, b.Media("1"))
	assert.NoFileExists(t, second.Path)
	assert.Equal(t, false, getOK(t, b, cdPath)["Inserted"])

	// Ejecting an empty slot is fine and tells nobody: nothing changed.
	status, _, _ = call(t, b, http.MethodPost, ejectCD, map[string]any{})
	require.Equal(t, http.StatusNoContent, status)
	assert.Len(t, events.Events(), 3)

	st := b.Stats()
	assert.EqualValues(t, 2, st.MediaInserts)
	assert.EqualValues(t, 2, st.MediaEjects)
	b.ResetStats()
	assert.Zero(t, b.Stats().MediaInserts)
}

func TestInsertRefusesWhatItCannotFetch(t *testing.T) {
	im := imageServer(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedPort := ln.Addr().String()
	require.NoError(t, ln.Close())

	b := start(t, bmcsim.Options{MediaMaxBytes: 64 << 10})
	events := bmcsim.RecordMedia(b)
	for name, tc := range map[string]struct {
		image any
		id    string
	}{
		"404":            {im.srv.URL + "/boot/missing.iso", "Base.1.8.ResourceAtUriInUnknownFormat"},
		"too large":      {im.url("a"), "Base.1.8.ActionParameterValueFormatError"},
		"nobody listens": {"http://" + closedPort + "/x.iso", "Base.1.8.CouldNotEstablishConnection"},
		"not http":       {"nfs://server/x.iso", "Base.1.8.ActionParameterValueFormatError"},
		"not a string":   {42, "Base.1.8.ActionParameterValueFormatError"},
	} {
		t.Run(name, func(t *testing.T) {
			status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": tc.image})
			assert.Equal(t, http.StatusBadRequest, status)
			assert.Equal(t, tc.id, messageID(body), "%v", body)
		})
	}
	status, _, body := call(t, b, http.MethodPost, insertCD, map[string]any{})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.ActionParameterMissing", messageID(body))
	status, _, body = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a"), "Bogus": 1})
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.ActionParameterUnknown", messageID(body))

	assert.Empty(t, events.Events())
	assert.Equal(t, bmcsim.MediaEvent{SystemID: "1"}, b.Media("1"))
	assert.Zero(t, b.Stats().MediaInserts)
	if dir := b.MediaDir(); dir != "" {
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		assert.Empty(t, entries, "a failed fetch leaves nothing behind")
	}
}

func TestMediaDirIsTheCallersOrATemporaryOneCloseRemoves(t *testing.T) {
	im := imageServer(t)

	dir := t.TempDir()
	b, err := bmcsim.Start(bmcsim.Options{MediaDir: dir, Username: testUser, Password: testPass})
	require.NoError(t, err)
	status, _, _ := call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
	require.Equal(t, http.StatusNoContent, status)
	path := b.Media("1").Path
	assert.Equal(t, dir, filepath.Dir(path))
	require.NoError(t, b.Close())
	assert.NoFileExists(t, path, "Close removes the images")
	assert.DirExists(t, dir, "but not the caller's directory")

	b, err = bmcsim.Start(bmcsim.Options{Username: testUser, Password: testPass})
	require.NoError(t, err)
	assert.Empty(t, b.MediaDir(), "no directory until the first insert")
	status, _, _ = call(t, b, http.MethodPost, insertCD, map[string]any{"Image": im.url("a")})
	require.Equal(t, http.StatusNoContent, status)
	tmp := b.MediaDir()
	assert.DirExists(t, tmp)
	require.NoError(t, b.Close())
	assert.NoDirExists(t, tmp)
}

func TestBootCdReachesThePowerHooks(t *testing.T) {
	b := start(t, bmcsim.Options{})
	var mu sync.Mutex
	var boots []bmcsim.BootTarget
	var actions []bmcsim.PowerAction
	b.OnPowerOn(func(ev bmcsim.PowerOnEvent) { mu.Lock(); boots = append(boots, ev.Boot); mu.Unlock() })
	b.OnPowerAction(func(a bmcsim.PowerAction) { mu.Lock(); actions = append(actions, a); mu.Unlock() })

	status, _, _ := call(t, b, http.MethodPatch, "/redfish/v1/Systems/1", map[string]any{"Boot": map[string]string{"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
	require.Equal(t, http.StatusNoContent, status)
	target, enabled := b.BootOverride("1")
	assert.Equal(t, bmcsim.BootCd, target)
	assert.Equal(t, "Once", enabled)
	status, _, _ = call(t, b, http.MethodPost, "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", map[string]string{"ResetType": "On"})
	require.Equal(t, http.StatusNoContent, status)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []bmcsim.BootTarget{bmcsim.BootCd}, boots)
	require.Len(t, actions, 1)
	assert.Equal(t, bmcsim.BootCd, actions[0].Boot)
	assert.Equal(t, bmcsim.BootCd, b.BootLog("1")[0].Boot)
}

// TestEveryProfileHasItsVendorsSlots checks where each profile keeps its VirtualMedia (found by
// following links only) and that its CD slot is the one the hooks report.
func TestEveryProfileHasItsVendorsSlots(t *testing.T) {
	want := map[bmcsim.Profile]struct {
		collection string
		slots      map[string][]any // slot path -> MediaTypes
		cd         string
		second     string // the second system's CD slot
	}{
		bmcsim.ProfileGeneric: {"/redfish/v1/Systems/1/VirtualMedia",
			map[string][]any{"/redfish/v1/Systems/1/VirtualMedia/CD": {"CD", "DVD"}},
			"/redfish/v1/Systems/1/VirtualMedia/CD", "/redfish/v1/Systems/2/VirtualMedia/CD"},
		bmcsim.ProfileDell: {"/redfish/v1/Systems/System.Embedded.1/VirtualMedia",
			map[string][]any{"/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1": {"CD", "DVD"}, "/redfish/v1/Systems/System.Embedded.1/VirtualMedia/2": {"USBStick"}},
			"/redfish/v1/Systems/System.Embedded.1/VirtualMedia/1", "/redfish/v1/Systems/System.Embedded.2/VirtualMedia/1"},
		bmcsim.ProfileHPE: {"/redfish/v1/Managers/1/VirtualMedia/",
			map[string][]any{"/redfish/v1/Managers/1/VirtualMedia/1/": {"Floppy", "USBStick"}, "/redfish/v1/Managers/1/VirtualMedia/2/": {"CD", "DVD"}},
			"/redfish/v1/Managers/1/VirtualMedia/2/", "/redfish/v1/Systems/2/VirtualMedia/2/"},
		bmcsim.ProfileLenovo: {"/redfish/v1/Managers/1/VirtualMedia",
			map[string][]any{"/redfish/v1/Managers/1/VirtualMedia/EXT1": {"CD", "DVD", "USBStick"}, "/redfish/v1/Managers/1/VirtualMedia/EXT2": {"USBStick"}},
			"/redfish/v1/Managers/1/VirtualMedia/EXT1", "/redfish/v1/Systems/2/VirtualMedia/EXT1"},
		bmcsim.ProfileSupermicro: {"/redfish/v1/Managers/1/VirtualMedia",
			map[string][]any{"/redfish/v1/Managers/1/VirtualMedia/CD1": {"CD", "DVD"}, "/redfish/v1/Managers/1/VirtualMedia/USB1": {"USBStick"}},
			"/redfish/v1/Managers/1/VirtualMedia/CD1", "/redfish/v1/Systems/2/VirtualMedia/CD1"},
		bmcsim.ProfileOpenBMC: {"/redfish/v1/Managers/bmc/VirtualMedia",
			map[string][]any{"/redfish/v1/Managers/bmc/VirtualMedia/Slot_0": {"CD", "USBStick"}, "/redfish/v1/Managers/bmc/VirtualMedia/Slot_1": {"CD", "USBStick"}},
			"/redfish/v1/Managers/bmc/VirtualMedia/Slot_1", "/redfish/v1/Systems/system2/VirtualMedia/Slot_1"},
	}
	require.Len(t, want, len(bmcsim.Profiles()))
	for _, profile := range bmcsim.Profiles() {
		t.Run(string(profile), func(t *testing.T) {
			t.Parallel()
			w := want[profile]
			im := imageServer(t)
			b := start(t, bmcsim.Options{Profile: profile, Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(0), bmcsim.DefaultSystem(1)}})
			events := bmcsim.RecordMedia(b)
			first := b.SystemIDs()[0]
			systems := memberIDs(t, getOK(t, b, "/redfish/v1/Systems"))
			sys := getOK(t, b, systems[0])
			mgrs := memberIDs(t, getOK(t, b, "/redfish/v1/Managers"))
			mgr := getOK(t, b, mgrs[0])
			link := sys["VirtualMedia"]
			if link == nil {
				link = mgr["VirtualMedia"]
			} else {
				assert.Nil(t, mgr["VirtualMedia"], "one place per slot")
			}
			require.NotNil(t, link, "the slots are linked from the System or the Manager")
			coll := link.(map[string]any)["@odata.id"].(string)
			assert.Equal(t, w.collection, coll)
			got := map[string][]any{}
			for _, p := range memberIDs(t, getOK(t, b, coll)) {
				got[p] = getOK(t, b, p)["MediaTypes"].([]any)
			}
			assert.Equal(t, w.slots, got)

			second := getOK(t, b, systems[1])
			secondColl := second["VirtualMedia"].(map[string]any)["@odata.id"].(string)
			assert.Contains(t, memberIDs(t, getOK(t, b, secondColl)), w.second, "further systems have their own slots")

			// The CD slot takes media the way this BMC wants it.
			cd := getOK(t, b, w.cd)
			var status int
			var body map[string]any
			if actions, ok := cd["Actions"].(map[string]any); ok {
				target := actions["#VirtualMedia.InsertMedia"].(map[string]any)["target"].(string)
				status, _, body = call(t, b, http.MethodPost, target, map[string]any{"Image": im.url("a")})
			} else {
				status, _, body = call(t, b, http.MethodPatch, w.cd, map[string]any{"Image": im.url("a"), "Inserted": true})
			}
			require.Equal(t, http.StatusNoContent, status, "%v", body)
			require.Len(t, events.Events(), 1)
			assert.Equal(t, first, events.Events()[0].SystemID)
			assert.True(t, b.Media(first).Inserted)
			assert.False(t, b.Media(b.SystemIDs()[1]).Inserted)
		})
	}
}

func TestVirtualMediaQuirksParseByName(t *testing.T) {
	q, err := bmcsim.ParseQuirks("NoVirtualMedia,VirtualMediaPatchOnly,virtualmediarejectsinsertparams,VirtualMediaInsertedLag=1500ms," +
		"VirtualMediaConflictWhenInserted,VirtualMediaEjectNeedsBody,VirtualMediaNeedsTransferProtocol,VirtualMediaEjectWhenEmptyFails")
	require.NoError(t, err)
	assert.Equal(t, bmcsim.Quirks{NoVirtualMedia: true, VirtualMediaPatchOnly: true, VirtualMediaRejectsInsertParams: true,
		VirtualMediaInsertedLag: 1500 * time.Millisecond, VirtualMediaConflictWhenInserted: true, VirtualMediaEjectNeedsBody: true,
		VirtualMediaNeedsTransferProtocol: true, VirtualMediaEjectWhenEmptyFails: true}, q)
	_, err = bmcsim.Start(bmcsim.Options{Quirks: &bmcsim.Quirks{VirtualMediaInsertedLag: -time.Second}})
	assert.Error(t, err)

	generic, err := bmcsim.ProfileQuirks(bmcsim.ProfileGeneric)
	require.NoError(t, err)
	assert.Equal(t, bmcsim.Quirks{}, generic, "the generic profile stays well-behaved")
}
