package bmcsim_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stmcginnis/gofish"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func TestProtocolBasics(t *testing.T) {
	b := start(t, bmcsim.Options{TLS: true})

	// The version document and the service root are public, with or without the slash.
	for _, p := range []string{"/redfish", "/redfish/", "/redfish/v1", "/redfish/v1/"} {
		status, hdr, body := call(t, b, http.MethodGet, p, nil, "Authorization", "")
		assert.Equal(t, http.StatusOK, status, p)
		assert.Equal(t, "application/json; charset=utf-8", hdr.Get("Content-Type"), p)
		assert.Equal(t, "4.0", hdr.Get("OData-Version"), p)
		assert.NotEmpty(t, body, p)
	}
	assert.Equal(t, map[string]any{"v1": "/redfish/v1/"}, getOK(t, b, "/redfish"))
	root := getOK(t, b, "/redfish/v1")
	assert.Equal(t, "/redfish/v1/SessionService/Sessions", root["Links"].(map[string]any)["Sessions"].(map[string]any)["@odata.id"])
	assert.Equal(t, "Ironfleet", root["Vendor"])
	assert.NotEmpty(t, root["UUID"])

	status, hdr, body := call(t, b, http.MethodHead, "/redfish/v1/Systems/1", nil)
	assert.Equal(t, http.StatusOK, status)
	assert.Nil(t, body)
	assert.Equal(t, "GET, HEAD, PATCH", hdr.Get("Allow"))
	assert.NotEmpty(t, hdr.Get("ETag"))

	status, hdr, body = call(t, b, http.MethodDelete, "/redfish/v1/Systems/1", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, status)
	assert.Equal(t, "GET, HEAD, PATCH", hdr.Get("Allow"))
	assert.Equal(t, "Base.1.8.OperationNotAllowed", messageID(body))

	status, _, body = call(t, b, http.MethodGet, "/redfish/v1/Systems/99", nil)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "Base.1.8.ResourceMissingAtURI", messageID(body))

	// Ids are matched case-insensitively and trailing slashes are tolerated everywhere.
	assert.Equal(t, "1", getOK(t, b, "/REDFISH/v1/systems/1/")["Id"])
	acct := getOK(t, b, "/redfish/v1/AccountService")
	assert.Equal(t, true, acct["ServiceEnabled"])
	ss := getOK(t, b, "/redfish/v1/SessionService")
	assert.EqualValues(t, 1800, ss["SessionTimeout"])

	status, _, body = call(t, b, http.MethodPost, "/redfish/v1/SessionService/Sessions", "not an object", "Authorization", "")
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "Base.1.8.MalformedJSON", messageID(body))
}

func TestHandlerCanBeEmbedded(t *testing.T) {
	b := start(t, bmcsim.Options{})
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)

	c, err := gofish.Connect(gofish.ClientConfig{Endpoint: srv.URL, Username: testUser, Password: testPass})
	require.NoError(t, err)
	defer c.Logout()
	systems, err := c.Service.Systems()
	require.NoError(t, err)
	require.Len(t, systems, 1)
	assert.Equal(t, bmcsim.DefaultSystem(0).UUID, systems[0].UUID, "the default system is DefaultSystem(0)")
	assert.EqualValues(t, 1, b.Stats().SessionsCreated, "stats are shared with the embedded handler")

	b.ResetStats()
	st := b.Stats()
	assert.Zero(t, st.Requests)
	assert.Zero(t, st.SessionsCreated)
	assert.EqualValues(t, 1, st.ActiveSessions, "ResetStats keeps the live-session gauge")
}
