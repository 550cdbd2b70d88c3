package bmcsim_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

const (
	testUser = "admin"
	testPass = "s3cret-Passw0rd"
)

// start runs a BMC for the test, with the test credentials unless opts sets others.
func start(t *testing.T, opts bmcsim.Options) *bmcsim.BMC {
	t.Helper()
	if opts.Username == "" {
		opts.Username, opts.Password = testUser, testPass
	}
	b, err := bmcsim.Start(opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// httpClient trusts exactly the BMC's own certificate, so TLS is verified for real.
func httpClient(t *testing.T, b *bmcsim.BMC) *http.Client {
	t.Helper()
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	if pem := b.CACertPEM(); pem != nil {
		pool := x509.NewCertPool()
		require.True(t, pool.AppendCertsFromPEM(pem), "CACertPEM must parse")
		tr.TLSClientConfig.RootCAs = pool
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// connect logs gofish in, with Basic auth or a session, verifying TLS against the BMC's CA.
func connect(t *testing.T, b *bmcsim.BMC, basic bool) *gofish.APIClient {
	t.Helper()
	c, err := gofish.Connect(gofish.ClientConfig{
		Endpoint: b.URL(), Username: testUser, Password: testPass,
		BasicAuth: basic, HTTPClient: httpClient(t, b),
	})
	require.NoError(t, err)
	t.Cleanup(c.Logout)
	return c
}

// call makes one raw request with Basic auth (unless user is empty) and decodes a JSON
// answer, so tests can look at the wire format gofish would hide.
func call(t *testing.T, b *bmcsim.BMC, method, path string, body any, header ...string) (int, http.Header, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, b.URL()+path, rd)
	require.NoError(t, err)
	req.SetBasicAuth(testUser, testPass)
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Authorization" && header[i+1] == "" {
			req.Header.Del("Authorization")
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := httpClient(t, b).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if len(data) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		require.NoError(t, json.Unmarshal(data, &out), "body: %s", data)
	}
	return resp.StatusCode, resp.Header, out
}

// getOK GETs a resource that must exist.
func getOK(t *testing.T, b *bmcsim.BMC, path string) map[string]any {
	t.Helper()
	status, _, body := call(t, b, http.MethodGet, path, nil)
	require.Equal(t, http.StatusOK, status, "GET %s: %v", path, body)
	return body
}

// memberIDs lists the @odata.id of a collection's members.
func memberIDs(t *testing.T, coll map[string]any) []string {
	t.Helper()
	members, _ := coll["Members"].([]any)
	ids := make([]string, len(members))
	for i, m := range members {
		ids[i] = m.(map[string]any)["@odata.id"].(string)
	}
	return ids
}

// messageID is the first extended-info MessageId of a Redfish error body.
func messageID(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	infos, _ := e["@Message.ExtendedInfo"].([]any)
	if len(infos) == 0 {
		return ""
	}
	id, _ := infos[0].(map[string]any)["MessageId"].(string)
	return id
}

// statusOf extracts the HTTP status of a gofish error, looking inside the collection errors
// gofish wraps member failures in; 0 when it is not a Redfish answer.
func statusOf(err error) int {
	var e *common.Error
	if errors.As(err, &e) {
		return e.HTTPReturnedStatusCode
	}
	var ce *common.CollectionError
	if errors.As(err, &ce) {
		for _, inner := range ce.Failures {
			return statusOf(inner)
		}
	}
	return 0
}

// tree is what a client learns by walking everything gofish can reach from the service root.
type tree struct {
	Systems []systemView
	Manager *redfish.Manager
	Chassis []*redfish.Chassis
}

type systemView struct {
	System     *redfish.ComputerSystem
	Processors []*redfish.Processor
	Memory     []*redfish.Memory
	Drives     []*redfish.Drive
	NICs       []*redfish.EthernetInterface
}

// walk reads the whole tree through gofish, following links only, failing on any error.
func walk(t *testing.T, c *gofish.APIClient) tree {
	t.Helper()
	var out tree
	systems, err := c.Service.Systems()
	require.NoError(t, err)
	for _, s := range systems {
		v := systemView{System: s}
		v.Processors, err = s.Processors()
		require.NoError(t, err, "processors of %s", s.ID)
		v.Memory, err = s.Memory()
		require.NoError(t, err, "memory of %s", s.ID)
		storages, err := s.Storage()
		require.NoError(t, err, "storage of %s", s.ID)
		for _, st := range storages {
			drives, err := st.Drives()
			require.NoError(t, err, "drives of %s", s.ID)
			v.Drives = append(v.Drives, drives...)
		}
		v.NICs, err = s.EthernetInterfaces()
		require.NoError(t, err, "NICs of %s", s.ID)
		managers, err := s.ManagedBy()
		require.NoError(t, err, "manager of %s", s.ID)
		require.Len(t, managers, 1)
		out.Manager = managers[0]
		out.Systems = append(out.Systems, v)
	}
	out.Chassis, err = c.Service.Chassis()
	require.NoError(t, err)
	return out
}

// system finds a walked system by Id.
func (tr tree) system(t *testing.T, id string) systemView {
	t.Helper()
	for _, s := range tr.Systems {
		if s.System.ID == id {
			return s
		}
	}
	require.Failf(t, "system not found", "no system %q", id)
	return systemView{}
}

// eventually polls cond until it holds or the deadline passes; it is the only way tests wait.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 10*time.Millisecond, msg)
}
