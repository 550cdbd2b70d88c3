package registry_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/registry"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/test/testenv"
)

var (
	env    *testenv.Env
	cache  ctrlcache.Cache // the registry's
	signer *registry.Signer
	url    string
	https  *http.Client
)

const (
	uuidA = "38947555-7742-3448-3784-823347823834"
	uuidB = "4c4c4544-0042-4a10-8039-b4c04f4d3732"
	// shared is the UUID a Supermicro-style BMC reports for every system it manages.
	shared = "5f3c9b7e-2a41-4d8e-9c1b-7e0f4a6d2b31"
	// placeholder is the AMI BIOS default many boards report.
	placeholder = "03000200-0400-0500-0006-000700080009"
	zeros       = "00000000-0000-0000-0000-000000000000"
	// boot is the test servers' current probe boot.
	boot = "boot-1"
)

// The test servers: two named by their UUIDs (their identity), and systems whose UUID cannot
// identify them, named by BMC and system Id as the BMC reconciler names them.
const (
	serverA     = uuidA
	serverB     = uuidB
	sharedOne   = "smc-1-1"
	sharedTwo   = "smc-1-2"
	noUUID      = "openbmc-1-system"
	allZeros    = "whitebox-1-1"
	withDefault = "ami-1-1"
	dottedName  = "rack-4.smc-2.system.1"
)

var testServers = []struct{ name, uuid string }{
	{serverA, uuidA}, {serverB, uuidB},
	{sharedOne, shared}, {sharedTwo, shared},
	{noUUID, ""}, {allZeros, zeros}, {withDefault, placeholder}, {dottedName, shared},
}

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
	// The registry's requests are counted: its status writes, by server.
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return statusWrites{rt} })
	// The manager's cache as the operator's: Servers' inventories compact.
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}, Cache: cached.Options()})
	if err != nil {
		return 0, err
	}
	cache = mgr.GetCache()
	bound := make(chan net.Addr, 1)
	if signer, err = registry.Setup(mgr, "127.0.0.1:0", creds, probeNamespace, func(a net.Addr) { bound <- a }); err != nil {
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

	for _, s := range testServers {
		server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: s.name}, Spec: m.ServerSpec{SystemUUID: s.uuid}}
		if err := env.Client.Create(ctx, server); err != nil {
			return 0, err
		}
		server.Status.ProbeBoot = boot
		if err := env.Client.Status().Update(ctx, server); err != nil {
			return 0, err
		}
	}
	code := main.Run()
	cancel()
	return code, <-done
}

// writesOf counts the registry's status writes, by server name.
var writesOf sync.Map

// statusWrites counts the PATCHes of servers' status, and the GETs of servers, that go through
// it.
type statusWrites struct{ next http.RoundTripper }

func (s statusWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if req.Method == http.MethodPatch && len(parts) == 6 && parts[3] == "servers" && parts[5] == "status" {
		n, _ := writesOf.LoadOrStore(parts[4], new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	if req.Method == http.MethodGet && len(parts) == 5 && parts[3] == "servers" {
		n, _ := readsOf.LoadOrStore(parts[4], new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
	}
	return s.next.RoundTrip(req)
}

// readsOf counts the registry's reads of a server from the API, by server name.
var readsOf sync.Map

func readsOfServer(name string) int64 {
	n, _ := readsOf.LoadOrStore(name, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

func statusWritesOf(name string) int64 {
	n, _ := writesOf.LoadOrStore(name, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
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

// reportFor is a report of a host that reads uuid, with cores cores and NICs with macs.
func reportFor(uuid string, cores int32, macs ...string) []byte {
	rep := report.Report{SystemUUID: uuid, ProbeVersion: "test", CollectedAt: time.Now(),
		Inventory: m.Inventory{CPU: m.CPUSummary{Cores: cores, Sockets: 1},
			Memory:  m.MemorySummary{Total: resource.NewQuantity(8<<30, resource.BinarySI)},
			Storage: []m.StorageDevice{{Name: "nvme0n1", SerialNumber: "S1", Size: resource.NewQuantity(1<<40, resource.BinarySI)}}},
		Warnings: []string{"lldp: lldpctl not found"}}
	for i, mac := range macs {
		rep.Inventory.NetworkInterfaces = append(rep.Inventory.NetworkInterfaces, m.NetworkInterface{Name: fmt.Sprintf("eno%d", i+1), MACAddress: mac})
	}
	data, _ := json.Marshal(rep)
	return data
}

// stored waits until the server's inventory is a probe's with cores cores.
func stored(t *testing.T, name string, cores int32) *m.Server {
	t.Helper()
	var s *m.Server
	require.Eventually(t, func() bool {
		s = server(t, name)
		return s.Status.Inventory != nil && s.Status.Inventory.Source == "Probe" && s.Status.Inventory.CPU.Cores == cores
	}, 10*time.Second, 50*time.Millisecond, "server %s stores the report with %d cores", name, cores)
	return s
}

func server(t *testing.T, name string) *m.Server {
	t.Helper()
	var s m.Server
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	return &s
}

func TestAcceptsAReportSignedByItsServer(t *testing.T) {
	status, msg := post(t, "/v1/reports", signer.Token(serverA, boot), reportFor(strings.ToUpper(uuidA), 24))
	require.Equal(t, http.StatusNoContent, status, msg)
	inv := stored(t, serverA, 24).Status.Inventory
	assert.Equal(t, "Probe", inv.Source)
	assert.Equal(t, int32(24), inv.CPU.Cores)
	assert.Equal(t, "S1", inv.Storage[0].SerialNumber)
	assert.Equal(t, "test", inv.CollectorVersion)
	assert.Equal(t, []string{"lldp: lldpctl not found"}, inv.Warnings, "nothing the probe sent is thrown away")
	assert.NotNil(t, inv.ReportedAt)
	assert.Equal(t, m.SummarizeInventory(inv), server(t, serverA).Status.Hardware, "kubectl get servers shows the report's summary")
}

func TestRefusesWhatItShould(t *testing.T) {
	before := server(t, serverB).DeepCopy()
	otherKey, err := registry.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	cases := []struct {
		name   string
		path   string
		token  string
		body   []byte
		status int
		says   string
	}{
		{"no token", "/v1/reports", "", reportFor(uuidB, 1), http.StatusUnauthorized, "bearer token is required"},
		// Server A's valid token with a report about B's machine: it is refused, and it could
		// never land on B, whose token it is not.
		{"another server's token", "/v1/reports", signer.Token(serverA, boot), reportFor(uuidB, 1), http.StatusForbidden, "the server's is " + uuidA},
		{"forged token", "/v1/reports", "Zm9yZ2Vk", reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
		{"another registry's token", "/v1/reports", otherKey.Token(serverB, boot), reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
		{"a token naming no valid server name", "/v1/reports", "Qk9HVVMh." + boot + ".Zm9yZ2Vk", reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
		{"malformed JSON", "/v1/reports", signer.Token(serverB, boot), []byte(`{"systemUUID": `), http.StatusBadRequest, "malformed JSON"},
		{"unknown field", "/v1/reports", signer.Token(serverB, boot), []byte(`{"systemUUID":"` + uuidB + `","bogus":1}`), http.StatusBadRequest, "unknown field"},
		{"trailing data", "/v1/reports", signer.Token(serverB, boot), append(reportFor(uuidB, 1), []byte(`{}`)...), http.StatusBadRequest, "trailing data"},
		{"oversized", "/v1/reports", signer.Token(serverB, boot), []byte(`{"systemUUID":"` + uuidB + `","warnings":["` + strings.Repeat("x", 2<<20) + `"]}`), http.StatusRequestEntityTooLarge, "exceeds"},
		{"unknown server", "/v1/reports", signer.Token("no-such-server", boot), reportFor("00000000-1111-2222-3333-444444444444", 1), http.StatusNotFound, "no server no-such-server"},
		{"boot state for another server", "/v1/bootstate", signer.Token(serverA, boot), []byte(`{"systemUUID":"` + uuidB + `","state":"Booted"}`), http.StatusForbidden, "about another machine"},
		// A probe of an earlier boot that reports late (it kept retrying while the registry
		// was away) must not have its wipe taken for the current boot's.
		{"an earlier boot's token", "/v1/reports", signer.Token(serverB, "boot-0"), reportFor(uuidB, 1), http.StatusForbidden, "earlier probe boot of server " + serverB},
		{"a token without a boot", "/v1/reports", "Zm9yZ2Vk.Zm9yZ2Vk", reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
		{"a token whose server was changed", "/v1/reports", retarget(signer.Token(serverA, boot), serverB), reportFor(uuidB, 1), http.StatusForbidden, "does not belong"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, msg := post(t, c.path, c.token, c.body)
			assert.Equal(t, c.status, status, msg)
			assert.Contains(t, msg, c.says)
		})
	}
	after := server(t, serverB)
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "no refused request changed the server")
	assert.Nil(t, after.Status.Inventory)
}

// retarget is token with its server field replaced by another server's name.
func retarget(token, server string) string {
	fields := strings.SplitN(token, ".", 2)
	return base64.RawURLEncoding.EncodeToString([]byte(server)) + "." + fields[1]
}

// TestSystemsSharingAUUIDEachReportToTheirOwnServer: two systems a BMC reports with one UUID
// (and a third, of another BMC, with it too) each report with their own token; each report lands
// on its own Server, whatever UUID the host reads.
func TestSystemsSharingAUUIDEachReportToTheirOwnServer(t *testing.T) {
	for i, c := range []struct {
		server, reads string
		cores         int32
	}{
		{sharedOne, shared, 11},
		// Supermicro's BMC reports the first system's UUID for all; the host reads its own.
		{sharedTwo, "6a8b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d", 12},
		{dottedName, shared, 13},
	} {
		mac := fmt.Sprintf("0c:c4:7a:00:01:%02x", i)
		status, msg := post(t, "/v1/reports", signer.Token(c.server, boot), reportFor(c.reads, c.cores, mac))
		require.Equal(t, http.StatusNoContent, status, "%s: %s", c.server, msg)
		s := stored(t, c.server, c.cores)
		assert.Equal(t, mac, s.Status.Inventory.NetworkInterfaces[0].MACAddress)
		assert.Equal(t, shared, s.Spec.SystemUUID, "the BMC's UUID stays as the BMC said, for people")
	}
	// A report with sharedOne's token about sharedTwo's machine (same UUID, its NICs) is
	// refused: sharedOne's probe reported its NICs, and these are not them.
	before := server(t, sharedTwo).ResourceVersion
	status, msg := post(t, "/v1/reports", signer.Token(sharedOne, boot), reportFor(shared, 99, "0c:c4:7a:00:01:01"))
	assert.Equal(t, http.StatusForbidden, status, msg)
	assert.Contains(t, msg, "none of the host's NICs (0c:c4:7a:00:01:01) is one of the server's (0c:c4:7a:00:01:00)")
	assert.Equal(t, int32(11), server(t, sharedOne).Status.Inventory.CPU.Cores, "sharedOne keeps its own report")
	assert.Equal(t, before, server(t, sharedTwo).ResourceVersion, "and sharedTwo was never touched")
	// A report listing no NIC cannot show it is the machine's either.
	status, msg = post(t, "/v1/reports", signer.Token(sharedOne, boot), reportFor(shared, 99))
	assert.Equal(t, http.StatusForbidden, status, msg)
	assert.Contains(t, msg, "lists no NIC")
	// The machine's next report (one NIC the same, one new) is taken.
	status, msg = post(t, "/v1/reports", signer.Token(sharedOne, boot), reportFor(shared, 21, "0C-C4-7A-00-01-00", "0c:c4:7a:00:02:00"))
	require.Equal(t, http.StatusNoContent, status, msg)
	stored(t, sharedOne, 21)
}

// TestSystemsWithoutAUsableUUIDAreDiscovered: a system without a UUID, one with all zeros, one
// with a vendor placeholder each report, whatever the host reads, and their reports are stored.
func TestSystemsWithoutAUsableUUIDAreDiscovered(t *testing.T) {
	for _, c := range []struct {
		server, reads string
		cores         int32
	}{
		{noUUID, "", 31},
		{allZeros, zeros, 32},
		{withDefault, placeholder, 33},
	} {
		status, msg := post(t, "/v1/reports", signer.Token(c.server, boot), reportFor(c.reads, c.cores))
		require.Equal(t, http.StatusNoContent, status, "%s: %s", c.server, msg)
		stored(t, c.server, c.cores)
	}
	// What the probe read is information only: a host that reads garbage is still taken.
	status, msg := post(t, "/v1/bootstate", signer.Token(noUUID, boot), []byte(`{"systemUUID":"Not Settable","state":"Booted"}`))
	assert.Equal(t, http.StatusNoContent, status, msg)
	status, msg = post(t, "/v1/bootstate", signer.Token(withDefault, boot), []byte(`{"state":"Booted"}`))
	assert.Equal(t, http.StatusNoContent, status, msg)
}

// TestABootStateSentAgainIsNotWrittenAgain: a probe that sends the same boot state twice (a
// retry, a progress message that did not change) costs one status write, not two.
func TestABootStateSentAgainIsNotWrittenAgain(t *testing.T) {
	// A message of this run's own, so that the first post is news however often the test runs.
	body := []byte(`{"systemUUID":"` + uuidA + `","state":"Collecting","message":"reading the inventory (` + strconv.FormatInt(time.Now().UnixNano(), 10) + `)"}`)
	status, msg := post(t, "/v1/bootstate", signer.Token(serverA, boot), body)
	require.Equal(t, http.StatusNoContent, status, msg)
	// The first post may take two PATCHes (its test of a cached version that was behind fails,
	// and it writes again on the API's): what is counted is what the second post adds.
	before := statusWritesOf(serverA)
	first := server(t, serverA)
	c := meta.FindStatusCondition(first.Status.Conditions, m.ConditionProbe)
	require.NotNil(t, c)
	require.Equal(t, "Collecting", c.Reason)
	// The second post is counted once the registry's cache shows the first: a cache still behind
	// costs a refused PATCH (its version is stale) and a read, not a write, but the count here is
	// of PATCHes sent.
	require.Eventually(t, func() bool {
		var s m.Server
		return cache.Get(context.Background(), client.ObjectKey{Name: serverA}, &s) == nil && s.ResourceVersion == first.ResourceVersion
	}, 10*time.Second, 20*time.Millisecond, "the registry's cache shows the first post")

	status, msg = post(t, "/v1/bootstate", signer.Token(serverA, boot), body)
	require.Equal(t, http.StatusNoContent, status, msg)
	assert.Equal(t, first.ResourceVersion, server(t, serverA).ResourceVersion)
	assert.Equal(t, before, statusWritesOf(serverA), "the same boot state is not written again")
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
	assert.Equal(t, signer.Token(serverA, boot), again.Token(serverA, boot))
	assert.NotEqual(t, signer.Token(serverA, boot), signer.Token(serverB, boot))
	name, got, ok := again.Verify(signer.Token(dottedName, boot))
	assert.True(t, ok)
	assert.Equal(t, dottedName, name, "a name with dots travels in the token whole")
	assert.Equal(t, boot, got)
	_, _, ok = again.Verify(strings.Replace(signer.Token(serverA, boot), "."+boot+".", ".boot-2.", 1))
	assert.False(t, ok, "the boot is signed too")
}

// newServer makes a server of this test's own, in its current probe boot.
func newServer(t *testing.T, name, uuid string) {
	t.Helper()
	ctx := context.Background()
	s := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: m.ServerSpec{SystemUUID: uuid}}
	require.NoError(t, env.Client.Create(ctx, s))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), s) })
	s.Status.ProbeBoot = boot
	require.NoError(t, env.Client.Status().Update(ctx, s))
}

// cachedBoot waits until the registry's cache shows the server in its probe boot.
func cachedBoot(t *testing.T, name string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var s m.Server
		return cache.Get(context.Background(), client.ObjectKey{Name: name}, &s) == nil && s.Status.ProbeBoot == boot
	}, 10*time.Second, 20*time.Millisecond)
}

// TestAReportReplacesTheWholeInventory: the registry's cache keeps a compact inventory (no
// processors, PCI devices, DMI, warnings), and a report is stored from the cache's version of
// the server: what the new report no longer has must still be gone from the API's inventory,
// not kept from the one before.
func TestAReportReplacesTheWholeInventory(t *testing.T) {
	const uuid = "9a1c7e52-3b0d-4f6a-8e21-5c9d0b7f4a13"
	newServer(t, uuid, uuid)
	full := report.Report{SystemUUID: uuid, ProbeVersion: "v1", CollectedAt: time.Now(), Warnings: []string{"lldp: lldpctl not found"},
		Inventory: m.Inventory{CPU: m.CPUSummary{Cores: 8, Sockets: 1},
			Processors:    []m.Processor{{ID: "CPU0", Type: "CPU", Vendor: "Intel"}},
			MemoryModules: []m.MemoryModule{{Locator: "DIMM0", Size: resource.NewQuantity(8<<30, resource.BinarySI)}},
			PCIDevices:    []m.PCIDevice{{Address: "0000:00:1f.0", VendorID: "8086", ProductID: "a382"}},
			DMI:           &m.DMI{System: m.DMISystem{Manufacturer: "Supermicro"}}}}
	data, err := json.Marshal(full)
	require.NoError(t, err)
	status, msg := post(t, "/v1/reports", signer.Token(uuid, boot), data)
	require.Equal(t, http.StatusNoContent, status, msg)
	first := stored(t, uuid, 8).Status.Inventory
	require.Len(t, first.PCIDevices, 1)
	require.NotNil(t, first.DMI)

	// The cache's version shows the first report (compactly) before the second is sent.
	require.Eventually(t, func() bool {
		var s m.Server
		return cache.Get(context.Background(), client.ObjectKey{Name: uuid}, &s) == nil && s.Status.Inventory != nil && s.Status.Inventory.CPU.Cores == 8
	}, 10*time.Second, 20*time.Millisecond)
	status, msg = post(t, "/v1/reports", signer.Token(uuid, boot), reportFor(uuid, 4))
	require.Equal(t, http.StatusNoContent, status, msg)
	inv := stored(t, uuid, 4).Status.Inventory
	assert.Empty(t, inv.Processors, "the first report's processors are gone")
	assert.Empty(t, inv.MemoryModules)
	assert.Empty(t, inv.PCIDevices)
	assert.Nil(t, inv.DMI)
	assert.Equal(t, "test", inv.CollectorVersion)
	assert.Equal(t, []string{"lldp: lldpctl not found"}, inv.Warnings)
}

// TestAReportCostsOneWriteAndNoRead: a report about a server the cache shows in the token's boot
// is checked against the cache and stored with one write; the write itself tests that the boot
// is still current.
func TestAReportCostsOneWriteAndNoRead(t *testing.T) {
	const uuid = "0d6f3a91-7c24-4b5e-9f80-2e1a6c3b9d47"
	newServer(t, uuid, uuid)
	cachedBoot(t, uuid)
	reads, writes := readsOfServer(uuid), statusWritesOf(uuid)
	status, msg := post(t, "/v1/reports", signer.Token(uuid, boot), reportFor(uuid, 2))
	require.Equal(t, http.StatusNoContent, status, msg)
	stored(t, uuid, 2)
	assert.Equal(t, reads, readsOfServer(uuid), "no read of the server around the cache")
	assert.Equal(t, writes+1, statusWritesOf(uuid), "one status write")
}

// patchFrom writes news as the registry would on read, a version that may be outdated.
func patchFrom(t *testing.T, read, news *m.Server, pinInventory bool) error {
	t.Helper()
	patch, err := registry.StatusPatch(boot, read, news, pinInventory)
	require.NoError(t, err)
	return env.Client.Status().Patch(context.Background(), news, client.RawPatch(types.JSONPatchType, patch))
}

// TestAWriteFromAnOutdatedVersionTestsWhatItMustNotUndo: news built on a version of the server
// that is no longer the API's (the cache's, a moment behind) is written only if the boot is
// still current, and conditions only if nobody changed them since.
func TestAWriteFromAnOutdatedVersionTestsWhatItMustNotUndo(t *testing.T) {
	ctx := context.Background()
	const uuid = "5b2e9c04-1f7a-4d63-a8e5-7c0b3d9f1e26"
	newServer(t, uuid, uuid)
	read := server(t, uuid)
	var err error

	// Another writer sets a condition after the version read: news that changes the
	// conditions, built on that version, is refused by the API rather than undoing it.
	other := read.DeepCopy()
	meta.SetStatusCondition(&other.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Discovery", Message: "x"})
	require.NoError(t, env.Client.Status().Update(ctx, other))
	news := read.DeepCopy()
	meta.SetStatusCondition(&news.Status.Conditions, metav1.Condition{Type: m.ConditionProbe, Status: metav1.ConditionTrue, Reason: "Booted", Message: "y"})
	err = patchFrom(t, read, news, false)
	require.True(t, apierrors.IsInvalid(err), "the conditions moved on: %v", err)
	assert.NotNil(t, meta.FindStatusCondition(server(t, uuid).Status.Conditions, "Ready"), "the other writer's condition is kept")

	// News that leaves the conditions alone goes in whatever else changed meanwhile.
	read = server(t, uuid)
	news = read.DeepCopy()
	news.Status.Hardware = &m.HardwareSummary{CPUs: 3}
	require.NoError(t, patchFrom(t, read, news, false))

	// A report's NICs were compared with the inventory the version read had (none): a report
	// stored since is a different one, and the write built on that comparison is refused.
	read = server(t, uuid)
	require.Nil(t, read.Status.Inventory)
	other = read.DeepCopy()
	reportedAt := metav1.Now()
	other.Status.Inventory = &m.Inventory{Source: "Probe", ReportedAt: &reportedAt,
		NetworkInterfaces: []m.NetworkInterface{{Name: "eno1", MACAddress: "02:00:00:00:00:09"}}}
	require.NoError(t, env.Client.Status().Update(ctx, other))
	news = read.DeepCopy()
	news.Status.Inventory = &m.Inventory{Source: "Probe", ReportedAt: &reportedAt}
	err = patchFrom(t, read, news, true)
	require.True(t, apierrors.IsInvalid(err), "another report was stored since: %v", err)
	// Built on the report that is there, it goes in.
	read = server(t, uuid)
	news = read.DeepCopy()
	news.Status.Hardware = &m.HardwareSummary{CPUs: 7}
	require.NoError(t, patchFrom(t, read, news, true))

	// A boot that ended: nothing is written.
	ended := server(t, uuid)
	ended.Status.ProbeBoot = "boot-2"
	require.NoError(t, env.Client.Status().Update(ctx, ended))
	news = read.DeepCopy()
	news.Status.Hardware = &m.HardwareSummary{CPUs: 5}
	err = patchFrom(t, read, news, false)
	require.True(t, apierrors.IsInvalid(err), "the boot is over: %v", err)
	assert.EqualValues(t, 7, server(t, uuid).Status.Hardware.CPUs)

	// And through the registry: the report is refused, as over.
	status, msg := post(t, "/v1/reports", signer.Token(uuid, boot), reportFor(uuid, 6))
	assert.Equal(t, http.StatusForbidden, status, msg)
	assert.Contains(t, msg, "earlier probe boot")
}
