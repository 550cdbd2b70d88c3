package registry_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/registry"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/internal/testenv"
)

var (
	env    *testenv.Env
	signer *registry.Signer
	url    string
	https  *http.Client
)

const (
	uuidA = "38947555-7742-3448-3784-823347823834"
	uuidB = "4c4c4544-0042-4a10-8039-b4c04f4d3732"
	// boot is the test servers' current probe boot.
	boot = "boot-1"
)

func TestMain(main *testing.M) {
	code, err := run(main)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(main *testing.M) (int, error) {
	// Fuzzing (`go test -fuzz`, and its worker processes) runs only the pure decoder target:
	// no control plane is started for it.
	flag.Parse()
	if f := flag.Lookup("test.fuzz"); f != nil && f.Value.String() != "" {
		return main.Run(), nil
	}
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return main.Run(), nil
	}
	var err error
	if env, err = testenv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	key := client.ObjectKey{Namespace: "default", Name: "ironfleet-registry"}
	creds, err := registry.LoadOrCreate(ctx, env.Client, key, []string{"registry.example"})
	if err != nil {
		return 0, err
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		return 0, err
	}
	bound := make(chan net.Addr, 1)
	if signer, err = registry.Setup(mgr, "127.0.0.1:0", creds, func(a net.Addr) { bound <- a }); err != nil {
		return 0, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case a := <-bound:
		url = "https://" + a.String()
	case err := <-done:
		return 0, err
	case <-time.After(30 * time.Second):
		return 0, fmt.Errorf("registry did not start listening")
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(creds.CertPEM)
	https = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}

	for _, s := range []struct{ name, uuid string }{{"server-a", uuidA}, {"server-b", uuidB}} {
		if err := env.Client.Create(ctx, &m.Server{ObjectMeta: metav1.ObjectMeta{Name: s.name, Annotations: map[string]string{m.AnnotationProbeBoot: boot}},
			Spec: m.ServerSpec{SystemUUID: s.uuid}}); err != nil {
			return 0, err
		}
	}
	code := main.Run()
	cancel()
	return code, <-done
}

func post(t *testing.T, path, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := https.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(msg)
}

func reportFor(uuid string, cores int32) []byte {
	data, _ := json.Marshal(report.Report{SystemUUID: uuid, ProbeVersion: "test", CollectedAt: time.Now(),
		Inventory: m.Inventory{CPU: m.CPUSummary{Cores: cores, Sockets: 1},
			Memory:  m.MemorySummary{Total: resource.NewQuantity(8<<30, resource.BinarySI)},
			Storage: []m.StorageDevice{{Name: "nvme0n1", SerialNumber: "S1", Size: resource.NewQuantity(1<<40, resource.BinarySI)}}},
		Warnings: []string{"lldp: lldpctl not found"}})
	return data
}

func server(t *testing.T, name string) *m.Server {
	t.Helper()
	var s m.Server
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	return &s
}

func TestAcceptsAReportSignedByItsServer(t *testing.T) {
	status, msg := post(t, "/v1/reports", signer.Token(uuidA, boot), reportFor(uuidA, 24))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool { return server(t, "server-a").Status.Inventory != nil }, 10*time.Second, 50*time.Millisecond)
	inv := server(t, "server-a").Status.Inventory
	assert.Equal(t, "Probe", inv.Source)
	assert.Equal(t, int32(24), inv.CPU.Cores)
	assert.Equal(t, "S1", inv.Storage[0].SerialNumber)
	assert.Equal(t, "test", inv.CollectorVersion)
	assert.Equal(t, []string{"lldp: lldpctl not found"}, inv.Warnings, "nothing the probe sent is thrown away")
	assert.NotNil(t, inv.ReportedAt)
	assert.Equal(t, m.SummarizeInventory(inv), server(t, "server-a").Status.Hardware, "kubectl get servers shows the report's summary")
}

func TestRefusesWhatItShould(t *testing.T) {
	before := server(t, "server-b").DeepCopy()
	cases := []struct {
		name   string
		path   string
		token  string
		body   []byte
		status int
		says   string
	}{
		{"no token", "/v1/reports", "", reportFor(uuidB, 1), http.StatusUnauthorized, "bearer token is required"},
		{"another server's token", "/v1/reports", signer.Token(uuidA, boot), reportFor(uuidB, 1), http.StatusForbidden, "does not belong to server"},
		{"forged token", "/v1/reports", "Zm9yZ2Vk", reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
		{"malformed JSON", "/v1/reports", signer.Token(uuidB, boot), []byte(`{"systemUUID": `), http.StatusBadRequest, "malformed JSON"},
		{"unknown field", "/v1/reports", signer.Token(uuidB, boot), []byte(`{"systemUUID":"` + uuidB + `","bogus":1}`), http.StatusBadRequest, "unknown field"},
		{"trailing data", "/v1/reports", signer.Token(uuidB, boot), append(reportFor(uuidB, 1), []byte(`{}`)...), http.StatusBadRequest, "trailing data"},
		{"not a UUID", "/v1/reports", signer.Token("nope", boot), []byte(`{"systemUUID":"nope"}`), http.StatusBadRequest, "is not a UUID"},
		{"oversized", "/v1/reports", signer.Token(uuidB, boot), []byte(`{"systemUUID":"` + uuidB + `","warnings":["` + strings.Repeat("x", 2<<20) + `"]}`), http.StatusRequestEntityTooLarge, "exceeds"},
		{"unknown server", "/v1/reports", signer.Token("00000000-1111-2222-3333-444444444444", boot), reportFor("00000000-1111-2222-3333-444444444444", 1), http.StatusNotFound, "no server has systemUUID"},
		{"boot state for another server", "/v1/bootstate", signer.Token(uuidA, boot), []byte(`{"systemUUID":"` + uuidB + `","state":"Booted"}`), http.StatusForbidden, "does not belong"},
		// A probe of an earlier boot that reports late (it kept retrying while the registry
		// was away) must not have its wipe taken for the current boot's.
		{"an earlier boot's token", "/v1/reports", signer.Token(uuidB, "boot-0"), reportFor(uuidB, 1), http.StatusForbidden, "earlier probe boot"},
		{"a token without a boot", "/v1/reports", "Zm9yZ2Vk.Zm9yZ2Vk", reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, msg := post(t, c.path, c.token, c.body)
			assert.Equal(t, c.status, status, msg)
			assert.Contains(t, msg, c.says)
		})
	}
	after := server(t, "server-b")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "no refused request changed the server")
	assert.Nil(t, after.Status.Inventory)
}

func TestBootStateBecomesACondition(t *testing.T) {
	status, msg := post(t, "/v1/bootstate", signer.Token(uuidB, boot), []byte(`{"systemUUID":"`+uuidB+`","state":"Wiping","message":"3 disks"}`))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool {
		for _, c := range server(t, "server-b").Status.Conditions {
			if c.Type == registry.ConditionProbe && c.Reason == "Wiping" && c.Message == "3 disks" {
				return true
			}
		}
		return false
	}, 10*time.Second, 50*time.Millisecond)

	status, _ = post(t, "/v1/bootstate", signer.Token(uuidB, boot), []byte(`{"systemUUID":"`+uuidB+`","state":"not camel"}`))
	assert.Equal(t, http.StatusBadRequest, status)
}

func TestHealthz(t *testing.T) {
	resp, err := https.Get(url + "/healthz")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestTokensSurviveRestarts: the key is kept in the Secret, so a second load (another replica,
// a restarted manager) mints the same tokens.
func TestTokensSurviveRestarts(t *testing.T) {
	creds, err := registry.LoadOrCreate(context.Background(), env.Client, client.ObjectKey{Namespace: "default", Name: "ironfleet-registry"}, nil)
	require.NoError(t, err)
	again, err := registry.NewSigner(creds.HMACKey)
	require.NoError(t, err)
	assert.Equal(t, signer.Token(uuidA, boot), again.Token(uuidA, boot))
	assert.NotEqual(t, signer.Token(uuidA, boot), signer.Token(uuidB, boot))
	got, ok := again.Verify(strings.ToUpper(uuidA), signer.Token(uuidA, boot))
	assert.True(t, ok, "UUID case does not matter")
	assert.Equal(t, boot, got)
	_, ok = again.Verify(uuidA, strings.Replace(signer.Token(uuidA, boot), boot, "boot-2", 1))
	assert.False(t, ok, "the boot is signed too")
}
