package cli

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/fixtures"
	"github.com/ironfleet/ironfleet/metalprobe/post"
)

// The token every test uses; no output may ever contain it.
const token = "probe-token-9f8e7d6c5b4a"

func TestMain(m *testing.M) {
	sendBackoff = post.Backoff{Initial: time.Millisecond, Max: 2 * time.Millisecond, Attempts: 3}
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

func runProbe(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	assert.NotContains(t, r.stdout, token, "stdout must never contain the token")
	assert.NotContains(t, r.stderr, token, "stderr must never contain the token")
	return r
}

func fixtureRoot(t *testing.T, name string) string {
	t.Helper()
	root, err := fixtures.Root(name)
	require.NoError(t, err)
	return root
}

func decodeStrict(t *testing.T, data []byte) report.Report {
	t.Helper()
	var rep report.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	return rep
}

func TestDryRunPrintsTheReportOfEachFixture(t *testing.T) {
	names, err := fixtures.Names()
	require.NoError(t, err)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			r := runProbe(t, "--root", fixtureRoot(t, name), "--dry-run")
			require.Equal(t, exitOK, r.code, r.stderr)
			rep := decodeStrict(t, []byte(r.stdout))
			exp, err := fixtures.LoadExpected(name)
			require.NoError(t, err)
			for _, d := range exp.Diff(&rep) {
				t.Error(d)
			}
			assert.Equal(t, Version, rep.ProbeVersion)
			for _, w := range rep.Warnings {
				assert.Contains(t, r.stderr, "warning: "+w)
			}
		})
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	root := fixtureRoot(t, "small-vm")
	tokenFile := writeFile(t, "token", token+"\n")
	cases := map[string][]string{
		"unknown flag":            {"--frobnicate"},
		"positional argument":     {"--dry-run", "extra"},
		"no registry":             {"--root", root, "--token", token},
		"no token":                {"--root", root, "--registry-url", "https://registry.example:8443"},
		"token and token file":    {"--root", root, "--registry-url", "https://r", "--token", token, "--token-file", tokenFile},
		"bad registry URL":        {"--root", root, "--registry-url", "registry:8443", "--token", token},
		"zero timeout":            {"--root", root, "--dry-run", "--timeout", "0s"},
		"bad timeout":             {"--root", root, "--dry-run", "--timeout", "soon"},
		"ca file and insecure":    {"--root", root, "--dry-run", "--ca-file", "x.pem", "--insecure-skip-verify"},
		"flag missing its value":  {"--root"},
		"token given as argument": {"--dry-run", token},
		"unknown mode":            {"--root", root, "--dry-run", "--mode", "reinstall"},
		"unknown wipe policy":     {"--root", root, "--dry-run", "--mode", "wipe", "--wipe-policy", "shred"},
		"wipe policy, no wipe":    {"--root", root, "--dry-run", "--wipe-policy", "zero"},
		"wipe policy, discovery":  {"--root", root, "--dry-run", "--mode", "discovery", "--wipe-policy", "zero"},
		"wipe dry run, live":      {"--dry-run", "--mode", "wipe"},
		"wipe dry run, root /":    {"--root", "/", "--dry-run", "--mode", "wipe", "--wipe-policy", "zero"},
		"ignition wipe, live":     {"--dry-run", "--ignition", writeFile(t, "wipe.json", `{"mode": "wipe", "wipePolicy": "zero"}`)},
		"wipe without registry":   {"--root", root, "--mode", "wipe", "--token", token},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			r := runProbe(t, args...)
			assert.Equal(t, exitUsage, r.code, r.stderr)
			assert.NotEmpty(t, r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	r := runProbe(t, "--help")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stderr, "Usage: metalprobe")
	assert.Contains(t, r.stderr, "-token-file")

	r = runProbe(t, "--version")
	assert.Equal(t, exitOK, r.code)
	assert.Equal(t, Version+"\n", r.stdout)
}

func TestFileProblemsExitOne(t *testing.T) {
	root := fixtureRoot(t, "small-vm")
	dir := t.TempDir()
	cases := map[string]struct {
		args []string
		want string
	}{
		"malformed ignition": {[]string{"--root", root, "--ignition", writeFile(t, "bad.json", `{"registryURL": "https://r", "token": `+`"`+token+`",}`)},
			"malformed JSON at line 1"},
		"missing ignition":   {[]string{"--root", root, "--ignition", filepath.Join(dir, "none.json")}, "reading ignition"},
		"missing token file": {[]string{"--root", root, "--dry-run", "--token-file", filepath.Join(dir, "none")}, "reading --token-file"},
		"empty token file":   {[]string{"--root", root, "--dry-run", "--token-file", writeFile(t, "empty", "\n")}, "is empty"},
		"ca file not PEM":    {[]string{"--root", root, "--dry-run", "--ca-file", writeFile(t, "ca.pem", "hello")}, "no PEM certificate"},
		"root missing":       {[]string{"--root", filepath.Join(dir, "nowhere"), "--dry-run"}, "collecting"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := runProbe(t, tc.args...)
			assert.Equal(t, exitFailure, r.code, r.stderr)
			assert.Contains(t, r.stderr, tc.want)
			assert.Empty(t, r.stdout)
		})
	}
}

// registry records what metalprobe sends it.
type registry struct {
	status int
	body   string

	mu       sync.Mutex
	auth     []string
	received []report.Report
}

func (g *registry) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/reports" {
		http.NotFound(w, r)
		return
	}
	data, _ := io.ReadAll(r.Body)
	var rep report.Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	g.mu.Lock()
	g.auth = append(g.auth, r.Header.Get("Authorization"))
	g.received = append(g.received, rep)
	g.mu.Unlock()
	if g.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(g.status)
		_, _ = io.WriteString(w, g.body)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func TestSendsTheReportToTheRegistry(t *testing.T) {
	reg := &registry{}
	srv := httptest.NewServer(reg)
	defer srv.Close()

	r := runProbe(t, "--root", fixtureRoot(t, "dual-socket"), "--registry-url", srv.URL, "--token", token)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "delivered to "+srv.URL)
	require.Len(t, reg.received, 1)
	assert.Equal(t, "Bearer "+token, reg.auth[0])
	assert.Equal(t, "4c4c4544-0058-4b10-8034-b8c04f513533", reg.received[0].SystemUUID)
	assert.Len(t, reg.received[0].Inventory.Storage, 5)
}

func TestIgnitionProvidesTheRegistryAndFlagsOverrideIt(t *testing.T) {
	reg := &registry{}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	ignition := writeFile(t, "ignition.json", `{"registryURL": "`+srv.URL+`", "token": "from-ignition", "mode": "discovery",
		"systemUUID": "5F3C9B7E-2A41-4D8E-9C1B-7E0F4A6D2B31"}`)

	r := runProbe(t, "--root", fixtureRoot(t, "small-vm"), "--ignition", ignition)
	require.Equal(t, exitOK, r.code, r.stderr)

	tokenFile := writeFile(t, "token", token+"\n")
	r = runProbe(t, "--root", fixtureRoot(t, "small-vm"), "--ignition", ignition, "--token-file", tokenFile)
	require.Equal(t, exitOK, r.code, r.stderr)

	require.Len(t, reg.auth, 2)
	assert.Equal(t, "Bearer from-ignition", reg.auth[0])
	assert.Equal(t, "Bearer "+token, reg.auth[1], "the flag wins over the ignition file")
	assert.NotContains(t, strings.Join(reg.received[1].Warnings, "\n"), "probe:", "the ignition's UUID matches")

	// An ignition rendered for another server still reports, with a warning.
	other := writeFile(t, "other.json", `{"registryURL": "`+srv.URL+`", "token": "t", "systemUUID": "00000000-0000-0000-0000-000000000001"}`)
	r = runProbe(t, "--root", fixtureRoot(t, "small-vm"), "--ignition", other)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "ignition is for system 00000000-0000-0000-0000-000000000001")
	assert.Contains(t, reg.received[2].Warnings[len(reg.received[2].Warnings)-1], "probe: ignition is for system")
}

// TestDiscoversWithoutAUUID: an ignition without a systemUUID (the server's UUID is not its
// identity) discovers and reports; the UUID the host's firmware holds, a placeholder here, is
// reported as it is, as information, with no warning about another system.
func TestDiscoversWithoutAUUID(t *testing.T) {
	reg := &registry{}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	root, err := fixtures.CopyRoot("small-vm", t.TempDir())
	require.NoError(t, err)
	const placeholder = "03000200-0400-0500-0006-000700080009"
	require.NoError(t, os.WriteFile(filepath.Join(root, "sys", "class", "dmi", "id", "product_uuid"), []byte(placeholder+"\n"), 0o644))
	ign := writeFile(t, "ignition.json", `{"registryURL": "`+srv.URL+`", "token": "`+token+`", "server": "smc-1-2", "mode": "discovery"}`)

	r := runProbe(t, "--root", root, "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "report for server smc-1-2 (this host reads system UUID "+placeholder+") delivered")
	require.Len(t, reg.received, 1)
	assert.Equal(t, placeholder, reg.received[0].SystemUUID)
	assert.NotContains(t, strings.Join(reg.received[0].Warnings, "\n"), "probe:", "no ignition UUID, nothing to disagree with")

	// A host whose firmware holds no UUID at all reports too.
	require.NoError(t, os.Remove(filepath.Join(root, "sys", "class", "dmi", "id", "product_uuid")))
	r = runProbe(t, "--root", root, "--ignition", ign)
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Len(t, reg.received, 2)
	assert.Empty(t, reg.received[1].SystemUUID)
	assert.Contains(t, r.stderr, "report for server smc-1-2 (this host reads no system UUID) delivered")
}

func TestRegistryRefusalExitsOneWithItsMessage(t *testing.T) {
	reg := &registry{status: http.StatusForbidden, body: `{"error":"the token does not belong to server 5f3c9b7e"}`}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	r := runProbe(t, "--root", fixtureRoot(t, "small-vm"), "--registry-url", srv.URL, "--token", token)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "403")
	assert.Contains(t, r.stderr, "the token does not belong to server 5f3c9b7e")
	assert.Len(t, reg.received, 1, "a 4xx is not retried")
}

func TestRegistryUnavailableIsRetriedThenFails(t *testing.T) {
	reg := &registry{status: http.StatusServiceUnavailable, body: `{"error":"looking up server"}`}
	srv := httptest.NewServer(reg)
	defer srv.Close()
	r := runProbe(t, "--root", fixtureRoot(t, "small-vm"), "--registry-url", srv.URL, "--token", token)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "giving up after 3 attempts")
	assert.Len(t, reg.received, 3)
}

func TestTLSRegistry(t *testing.T) {
	reg := &registry{}
	srv := httptest.NewUnstartedServer(reg)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below is expected
	srv.StartTLS()
	defer srv.Close()
	caFile := writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	root := fixtureRoot(t, "small-vm")

	r := runProbe(t, "--root", root, "--registry-url", srv.URL, "--token", token, "--ca-file", caFile)
	require.Equal(t, exitOK, r.code, r.stderr)

	// The CA can come inline from the ignition file too.
	caPEM, err := os.ReadFile(caFile)
	require.NoError(t, err)
	inline, err := json.Marshal(map[string]string{"registryURL": srv.URL, "token": token, "registryCA": string(caPEM)})
	require.NoError(t, err)
	r = runProbe(t, "--root", root, "--ignition", writeFile(t, "ignition.json", string(inline)))
	require.Equal(t, exitOK, r.code, r.stderr)

	// Without the CA the certificate is refused at once (not retried).
	r = runProbe(t, "--root", root, "--registry-url", srv.URL, "--token", token)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "certificate")

	r = runProbe(t, "--root", root, "--registry-url", srv.URL, "--token", token, "--insecure-skip-verify")
	require.Equal(t, exitOK, r.code, r.stderr)
	assert.Contains(t, r.stderr, "not verifying")
	assert.Len(t, reg.received, 3)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}
