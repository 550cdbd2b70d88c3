package bmcsim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// mockupDir finds a DMTF mockup: $IRONFLEET_MOCKUPS/<name>, by default
// ../shared/redfish-mockups/<name> next to the repository root (the directory holding PROJECT).
func mockupDir(t *testing.T, name string) string {
	t.Helper()
	base := os.Getenv("IRONFLEET_MOCKUPS")
	if base == "" {
		dir, err := os.Getwd()
		require.NoError(t, err)
		for {
			if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
				break
			}
			parent := filepath.Dir(dir)
			require.NotEqual(t, dir, parent, "no PROJECT file above the test directory")
			dir = parent
		}
		base = filepath.Join(dir, "..", "shared", "redfish-mockups")
	}
	dir := filepath.Join(base, name)
	if _, err := os.Stat(dir); os.IsNotExist(err) {
		t.Skipf("mockup %s is absent; set IRONFLEET_MOCKUPS to a directory of DMTF mockups to run this test", dir)
	}
	return dir
}

// readMockup decodes the index.json of a Redfish path inside a mockup directory.
func readMockup(t *testing.T, dir, odataID string) map[string]any {
	t.Helper()
	rel := strings.TrimPrefix(strings.TrimSuffix(odataID, "/"), "/redfish/v1")
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel), "index.json"))
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(data, &out))
	return out
}

func TestGofishReadsAStaticMockup(t *testing.T) {
	dir := mockupDir(t, "public-rackmount1")
	// Expected values come from the mockup's own files, found by following its links.
	root := readMockup(t, dir, "/redfish/v1")
	systemsLink := root["Systems"].(map[string]any)["@odata.id"].(string)
	members := readMockup(t, dir, systemsLink)["Members"].([]any)
	require.Len(t, members, 1)
	want := readMockup(t, dir, members[0].(map[string]any)["@odata.id"].(string))
	// And two literals, so a mockup that changed under the test cannot make it pass vacuously.
	require.Equal(t, "38947555-7742-3448-3784-823347823834", want["UUID"])
	require.Equal(t, "3500", want["Model"])

	b, err := bmcsim.StartStatic(dir, true)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })

	for _, basic := range []bool{true, false} {
		c := connect(t, b, basic)
		systems, err := c.Service.Systems()
		require.NoError(t, err)
		require.Len(t, systems, 1)
		s := systems[0]
		assert.Equal(t, "38947555-7742-3448-3784-823347823834", s.UUID)
		assert.Equal(t, "3500", s.Model)
		assert.Equal(t, want["UUID"], s.UUID)
		assert.Equal(t, want["Manufacturer"], s.Manufacturer)
		assert.Equal(t, want["Model"], s.Model)
		assert.Equal(t, want["SerialNumber"], s.SerialNumber)
		assert.Equal(t, want["PowerState"], string(s.PowerState))
		ps := want["ProcessorSummary"].(map[string]any)
		assert.EqualValues(t, ps["Count"], s.ProcessorSummary.Count)
		assert.Equal(t, ps["Model"], s.ProcessorSummary.Model)
		ms := want["MemorySummary"].(map[string]any)
		assert.InDelta(t, ms["TotalSystemMemoryGiB"], s.MemorySummary.TotalSystemMemoryGiB, 0.001)

		procs, err := s.Processors()
		require.NoError(t, err)
		assert.NotEmpty(t, procs)
		c.Logout()
	}
	st := b.Stats()
	assert.EqualValues(t, 1, st.SessionsCreated, "the fake session login")
	assert.EqualValues(t, 1, st.SessionsDeleted, "and its logout")
	assert.Zero(t, st.ActiveSessions)
	assert.Empty(t, b.PowerState("437XR1138R2"), "a mockup has no power to report")
}

func TestStaticHandlerIsReadOnly(t *testing.T) {
	dir := mockupDir(t, "public-rackmount1")
	h, err := bmcsim.StaticHandler(dir)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	do := func(method, path string) (int, string, http.Header) {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(`{"ResetType":"On"}`))
		require.NoError(t, err)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body), resp.Header
	}

	status, body, _ := do(http.MethodGet, "/redfish")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"v1":"/redfish/v1/"}`, body)

	status, body, hdr := do(http.MethodGet, "/redfish/v1/$metadata")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, hdr.Get("Content-Type"), "xml")
	assert.Contains(t, body, "edmx:Edmx")

	for _, p := range []string{"/redfish/v1", "/redfish/v1/", "/redfish/v1/Systems/437XR1138R2/", "/redfish/v1//Chassis"} {
		status, _, hdr := do(http.MethodGet, p)
		assert.Equal(t, http.StatusOK, status, p)
		assert.Contains(t, hdr.Get("Content-Type"), "application/json", p)
	}
	status, body, _ = do(http.MethodHead, "/redfish/v1/Systems")
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, body)

	for _, method := range []string{http.MethodPost, http.MethodPatch, http.MethodPut, http.MethodDelete} {
		status, _, hdr = do(method, "/redfish/v1/Systems/437XR1138R2/Actions/ComputerSystem.Reset")
		assert.Equal(t, http.StatusMethodNotAllowed, status, method)
		assert.Equal(t, "GET, HEAD", hdr.Get("Allow"))
	}
	status, _, _ = do(http.MethodPatch, "/redfish/v1/Systems/437XR1138R2")
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	status, _, _ = do(http.MethodGet, "/redfish/v1/../../../etc/passwd")
	assert.Equal(t, http.StatusNotFound, status)
	status, _, _ = do(http.MethodGet, "/redfish/v1/NoSuchResource")
	assert.Equal(t, http.StatusNotFound, status)
}

func TestStaticHandlerNeedsAMockup(t *testing.T) {
	_, err := bmcsim.StaticHandler(t.TempDir())
	assert.ErrorContains(t, err, "not a Redfish mockup")
	_, err = bmcsim.StartStatic(filepath.Join(t.TempDir(), "missing"), false)
	assert.Error(t, err)
}

func TestStaticModeAcceptsAnySessionLogin(t *testing.T) {
	dir := mockupDir(t, "public-rackmount1")
	b, err := bmcsim.StartStatic(dir, false)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: b.URL(), Username: "anyone", Password: "anything"})
	require.NoError(t, err)
	session, err := c.GetSession()
	require.NoError(t, err)
	status, _, body := call(t, b, http.MethodGet, session.ID, nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "anyone", body["UserName"])
	c.Logout()
	status, _, _ = call(t, b, http.MethodGet, session.ID, nil)
	assert.Equal(t, http.StatusNotFound, status, "logged out")
}
