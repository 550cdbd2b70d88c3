package controller_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	eventsv1 "k8s.io/api/events/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/internal/bmcsim"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/internal/testenv"
)

// The suite runs the real reconcilers in a manager against a real kube-apiserver and etcd, and
// real Redfish simulators over HTTPS.
var (
	env  *testenv.Env
	k8s  client.Client
	logs = &syncBuffer{}
	sims = map[string]*bmcsim.BMC{}
	// Dead BMCs accept TCP connections and close them at once, recording when each came: a BMC
	// that is there but never answers. One for Endpoint probing, one for a BMC's retries.
	deadForEndpoint, deadForBMC *attemptLog
)

// Passwords in play; the secrecy test looks for each in logs and events.
const (
	goodUser, goodPassword   = "admin", "correct-horse-battery"
	wrongUser, wrongPassword = "admin", "wrong-password-123"
	otherWrongPassword       = "another-wrong-456"
)

// Prefixes of the suite's MAC-prefix database: each points at one simulator.
const (
	prefixGood      = "02:00:00:00:00" // two default credentials, the second is right
	prefixAllWrong  = "02:00:00:00:01" // no default credential is right
	prefixNoBMC     = "02:00:00:00:02" // matches, but nothing listens
	unmatchedMAC    = "06:00:00:00:00:01"
	testSettingBase = 200 * time.Millisecond
)

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	var err error
	if env, err = testenv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client

	roots := x509.NewCertPool()
	// Every simulator serves the same two systems: each test uses its own simulator, so UUIDs
	// only collide where a test means them to.
	for _, name := range []string{"good", "allwrong", "direct", "reuse", "deleteme"} {
		sim, err := bmcsim.Start(bmcsim.Options{
			TLS: true, Username: goodUser, Password: goodPassword,
			Manufacturer: "Contoso", Model: "BMC-9000", FirmwareVersion: "1.2.3", SerialNumber: "BMC-" + name,
			Systems: []bmcsim.SystemSpec{testSystem(0), testSystem(1)},
		})
		if err != nil {
			return 0, err
		}
		defer sim.Close()
		sims[name] = sim
		roots.AppendCertsFromPEM(sim.CACertPEM())
	}
	for _, dead := range []**attemptLog{&deadForEndpoint, &deadForBMC} {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		*dead = &attemptLog{port: l.Addr().(*net.TCPAddr).Port}
		go (*dead).serve(l)
	}

	db, err := macdb.Parse([]byte(fmt.Sprintf(`
macPrefixes:
- macPrefix: %q
  manufacturer: Contoso
  protocol: Redfish
  scheme: https
  port: %d
  defaultCredentials:
  - {username: %s, password: %s}
  - {username: %s, password: %s}
- macPrefix: %q
  manufacturer: Contoso
  protocol: Redfish
  scheme: https
  port: %d
  defaultCredentials:
  - {username: %s, password: %s}
  - {username: %s, password: %s}
- macPrefix: %q
  manufacturer: Nowhere
  protocol: Redfish
  scheme: https
  port: %d
  defaultCredentials:
  - {username: %s, password: %s}
`, prefixGood, port(sims["good"]), wrongUser, wrongPassword, goodUser, goodPassword,
		prefixAllWrong, port(sims["allwrong"]), wrongUser, wrongPassword, wrongUser, otherWrongPassword,
		prefixNoBMC, deadForEndpoint.port, wrongUser, wrongPassword)))
	if err != nil {
		return 0, err
	}

	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel)))
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                 env.Scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return 0, err
	}
	settings := controller.DefaultSettings()
	settings.BackoffBase, settings.BackoffMax = testSettingBase, 10*time.Second
	if err := controller.Setup(mgr, controller.Dependencies{
		MACDB:    db,
		Connect:  redfish.Connector(redfish.Options{Timeout: 5 * time.Second, RootCAs: roots}),
		Settings: settings,
	}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	if code == 0 {
		code = scanForCredentials()
	}
	cancel()
	if err := <-done; err != nil {
		return code, fmt.Errorf("manager: %w", err)
	}
	return code, nil
}

func port(sim *bmcsim.BMC) int {
	_, p, _ := net.SplitHostPort(sim.Host())
	var n int
	fmt.Sscan(p, &n)
	return n
}

// syncBuffer collects the manager's log output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// attemptLog records when connections arrived at the dead BMC.
type attemptLog struct {
	port  int
	mu    sync.Mutex
	times []time.Time
}

func (a *attemptLog) serve(l net.Listener) {
	for {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		a.mu.Lock()
		a.times = append(a.times, time.Now())
		a.mu.Unlock()
		_ = conn.Close()
	}
}

func (a *attemptLog) since(t time.Time) []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []time.Time
	for _, at := range a.times {
		if at.After(t) {
			out = append(out, at)
		}
	}
	return out
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, cond func() bool, msgAndArgs ...any) {
	t.Helper()
	require.Eventually(t, cond, timeout, 50*time.Millisecond, msgAndArgs...)
}

// scanForCredentials runs after every test: no password in play may appear in the manager's
// log or in any event.
func scanForCredentials() int {
	var evs eventsv1.EventList
	if err := k8s.List(context.Background(), &evs); err != nil {
		fmt.Fprintln(os.Stderr, "listing events:", err)
		return 1
	}
	text := logs.String()
	if len(evs.Items) == 0 || text == "" {
		fmt.Fprintln(os.Stderr, "credential scan: expected manager logs and events to scan")
		return 1
	}
	for _, secret := range []string{goodPassword, wrongPassword, otherWrongPassword} {
		if strings.Contains(text, secret) {
			fmt.Fprintf(os.Stderr, "credential scan: a password appears in the manager's log\n")
			return 1
		}
		for _, e := range evs.Items {
			if strings.Contains(e.Note, secret) {
				fmt.Fprintf(os.Stderr, "credential scan: a password appears in event %s\n", e.Name)
				return 1
			}
		}
	}
	fmt.Fprintf(os.Stderr, "credential scan: %d log bytes and %d events hold no password\n", len(text), len(evs.Items))
	return 0
}

// testSystem is a simulated system with the identity fields the tests compare filled in.
func testSystem(i int) bmcsim.SystemSpec {
	s := bmcsim.DefaultSystem(i)
	s.Manufacturer, s.Model, s.BIOSVersion = "Contoso", fmt.Sprintf("R-%d", 1000+i), "2.1."+fmt.Sprint(i)
	return s
}
