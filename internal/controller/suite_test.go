package controller_test

import (
	"context"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/bmc/ipmi"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/firmware"
	"github.com/ironfleet/ironfleet/internal/controller/health"
	"github.com/ironfleet/ironfleet/internal/controller/server"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/macdb"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/internal/registry"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/syncbuf"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// The suite runs the real reconcilers in a manager against a real kube-apiserver and etcd, and
// real Redfish simulators over HTTPS.
var (
	env  *testenv.Env
	k8s  client.Client
	logs = &syncbuf.Buffer{}
	sims = map[string]*bmcsim.BMC{}
	// Dead BMCs accept TCP connections and close them at once, recording when each came: a BMC
	// that is there but never answers. One for Endpoint probing, one for a BMC's retries.
	deadForEndpoint, deadForBMC *attemptLog
	// endpointPort is the port of prefixEnrol's BMCs.
	endpointPort int
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

// prefixEnrol is the deletion tests' own BMCs, over plain HTTP: each listens at a loopback
// address of its own on the port endpointPort (the MAC-prefix database has one port per prefix,
// as a real network's BMCs of one vendor share one).
const prefixEnrol = "02:00:00:00:03"

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
	// The BMC tests' simulators serve the same two systems: each test uses its own simulator,
	// so UUIDs only collide where a test means them to.
	systems := map[string][]bmcsim.SystemSpec{
		// Discovery: hosts with hardware trees; a silent one; one held mid-discovery.
		"discovery": {testSystem(10), testSystem(11)}, "silent": {testSystem(12)}, "restart": {testSystem(13)},
		"probetrouble": {testSystem(14)},
		// Virtual media: a BMC with none, and one with a virtual CD.
		"novmedia": {testSystem(15)}, "vmedia": {testSystem(16)},
		// A probe boot the boot service ends (its secrets asked for twice).
		"bootended": {testSystem(31)},
		// UEFI HTTP boot by URI: a BMC that can, and one without HttpBootUri.
		"urihttp": {testSystem(32)}, "nourihttp": {testSystem(33)},
		// A probe boot whose BMC action fails once.
		"bootretry": {testSystem(34)},
		// A BMC that shows UefiHttp and HttpBootUri, and refuses the URI it is given.
		"urirefuse": {testSystem(35)},
		// A UefiHttp BMC whose system boots Legacy.
		"urilegacy": {legacySystem(36)},
		// Firmware read into a ServerFirmware.
		"firmware": {testSystem(37)}, "baseline": {testSystem(38)},
	}
	quirks := map[string]*bmcsim.Quirks{"novmedia": {NoVirtualMedia: true}, "nourihttp": {NoHTTPBootURI: true}}
	for _, name := range []string{"good", "allwrong", "direct", "reuse", "deleteme", "discovery", "silent", "restart", "probetrouble", "novmedia", "vmedia", "bootended", "urihttp", "nourihttp", "bootretry", "urirefuse", "urilegacy", "firmware", "baseline"} {
		specs, ok := systems[name]
		if !ok {
			specs = []bmcsim.SystemSpec{testSystem(0), testSystem(1)}
		}
		sim, err := bmcsim.Start(bmcsim.Options{
			TLS: true, Username: goodUser, Password: goodPassword,
			Manufacturer: "Contoso", Model: "BMC-9000", FirmwareVersion: "1.2.3", SerialNumber: "BMC-" + name,
			Systems: specs, Quirks: quirks[name],
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

	if endpointPort, err = freePort(); err != nil {
		return 0, err
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
- macPrefix: %q
  manufacturer: Contoso
  protocol: Redfish
  scheme: http
  port: %d
  defaultCredentials:
  - {username: %s, password: %s}
  - {username: %s, password: %s}
`, prefixGood, port(sims["good"]), wrongUser, wrongPassword, goodUser, goodPassword,
		prefixAllWrong, port(sims["allwrong"]), wrongUser, wrongPassword, wrongUser, otherWrongPassword,
		prefixNoBMC, deadForEndpoint.port, wrongUser, wrongPassword,
		prefixEnrol, endpointPort, wrongUser, wrongPassword, goodUser, goodPassword)))
	if err != nil {
		return 0, err
	}

	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true), zap.Level(zapcore.DebugLevel)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: systemNamespace}}); err != nil {
		return 0, err
	}
	creds, err := registry.LoadOrCreate(ctx, k8s, client.ObjectKey{Namespace: systemNamespace, Name: "ironfleet-registry"}, nil)
	if err != nil {
		return 0, err
	}
	if registryAddr, err = lab.FreeLoopbackAddr(); err != nil {
		return 0, err
	}
	operatorDeps = controller.Dependencies{
		MACDB: db,
		Connect: bmc.ByProtocol(redfish.Connector(redfish.Options{Timeout: 5 * time.Second, RootCAs: roots}),
			ipmi.Connector(ipmi.Options{Timeout: 300 * time.Millisecond, Retries: 2, CallTimeout: 5 * time.Second})),
		Settings: settings.DefaultSettings(),
		Probe: probeboot.Config{
			Namespace: systemNamespace, Image: "metalprobe:test",
			RegistryURL: "https://" + registryAddr, RegistryCA: string(creds.CertPEM),
		},
		Discovery: server.DiscoverySettings{Timeout: discoveryTimeout, Attempts: 2},
		// Updates' maintenances beside the boots; tasks followed every 200 ms.
		Firmware: firmware.UpdateSettings{Namespace: systemNamespace, TaskPoll: 200 * time.Millisecond, StepTimeout: 2 * time.Minute},
		// Off but in the health test (restartOperatorWithHealth): other tests count their BMCs'
		// requests.
		Health: health.Settings{Disabled: true},
	}
	operatorDeps.Settings.BackoffBase, operatorDeps.Settings.BackoffMax = testSettingBase, 10*time.Second
	// Power requests the BMC does not confirm are sent once more, and graceful shutdowns
	// forced, in seconds rather than minutes.
	operatorDeps.Settings.Power = settings.PowerTimeouts{Confirm: 5 * time.Second, GracefulShutdown: 3 * time.Second}
	registryCreds = creds

	// The boot service is an external system: a manager of its own, which outlives operator
	// restarts.
	bootMgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}})
	if err != nil {
		return 0, err
	}
	if images, err = lab.StartImageServer(); err != nil {
		return 0, err
	}
	defer images.Close()
	boots = lab.NewBootService(ctx, k8s, ctrl.Log.WithName("boot-service"))
	if err := boots.SetupWithManager(bootMgr); err != nil {
		return 0, err
	}
	bootDone := make(chan error, 1)
	go func() { bootDone <- bootMgr.Start(ctx) }()
	for _, sim := range sims {
		sim.OnPowerOn(boots.PowerOn)
	}

	if err := startOperator(); err != nil {
		return 0, err
	}
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		code = scanForCredentials() // only meaningful after the whole suite
	}
	if err := stopOperator(); err != nil {
		return code, fmt.Errorf("manager: %w", err)
	}
	cancel()
	boots.Wait()
	if err := <-bootDone; err != nil {
		return code, fmt.Errorf("boot service: %w", err)
	}
	return code, nil
}

// The operator: the manager with every reconciler and the registry, as cmd/manager runs it.
var (
	operatorDeps  controller.Dependencies
	registryCreds *registry.Credentials
	registryAddr  string
	boots         *lab.BootService
	// images serves the claims' OS images to the in-process probes that install them.
	images      *lab.ImageServer
	stopManager context.CancelFunc
	managerDone chan error
	// operatorClient, when set, builds the operator's API client (a test that watches what the
	// reconcilers write sets it before restarting the operator); nil is controller-runtime's.
	operatorClient client.NewClientFunc
	// operatorTransport, when set, wraps the HTTP transport of everything the operator's manager
	// sends to the apiserver: its cache, its clients, its events (see requestLog).
	operatorTransport func(http.RoundTripper) http.RoundTripper
)

const (
	systemNamespace  = "ironfleet-system"
	discoveryTimeout = 4 * time.Second
)

// startOperator starts a fresh operator manager: new caches, new BMC sessions, as after a crash.
func startOperator() error {
	cfg := env.Config
	if operatorTransport != nil {
		cfg = rest.CopyConfig(cfg)
		cfg.Wrap(operatorTransport)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  cached.Options(), // as cmd/manager's
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             ctrlconfig.Controller{SkipNameValidation: ptr.To(true)},
		NewClient:              operatorClient,
	})
	if err != nil {
		return err
	}
	listening := make(chan struct{})
	signer, err := registry.Setup(mgr, registryAddr, registryCreds, systemNamespace, func(net.Addr) { close(listening) })
	if err != nil {
		return err
	}
	deps := operatorDeps
	deps.Probe.Token = signer.Token
	if err := controller.Setup(mgr, deps); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopManager, managerDone = cancel, make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	select {
	case <-listening:
		return nil
	case err := <-managerDone:
		return fmt.Errorf("operator did not start: %w", err)
	case <-time.After(30 * time.Second):
		return fmt.Errorf("operator did not start in time")
	}
}

// stopOperator stops the operator and waits until it has.
func stopOperator() error {
	stopManager()
	return <-managerDone
}

// withDiscoveryTimeout runs the rest of the test with an operator whose probe boots time out
// after timeout, and the suite's own operator again after it.
func withDiscoveryTimeout(t *testing.T, timeout time.Duration) {
	t.Helper()
	saved := operatorDeps.Discovery
	require.NoError(t, stopOperator())
	operatorDeps.Discovery.Timeout = timeout
	require.NoError(t, startOperator())
	t.Cleanup(func() {
		require.NoError(t, stopOperator())
		operatorDeps.Discovery = saved
		require.NoError(t, startOperator())
	})
}

// freePort is a TCP port free on the loopback network.
func freePort() (int, error) {
	addr, err := lab.FreeLoopbackAddr()
	if err != nil {
		return 0, err
	}
	_, p, _ := net.SplitHostPort(addr)
	var n int
	_, err = fmt.Sscan(p, &n)
	return n, err
}

func port(sim *bmcsim.BMC) int {
	_, p, _ := net.SplitHostPort(sim.Host())
	var n int
	fmt.Sscan(p, &n)
	return n
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
	for _, secret := range []string{goodPassword, wrongPassword, otherWrongPassword, ipmiPassword, ipmiWrongPassword} {
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
// legacySystem is testSystem(i) booting Legacy.
func legacySystem(i int) bmcsim.SystemSpec {
	s := testSystem(i)
	s.BootMode = bmcsim.BootModeLegacy
	return s
}

func testSystem(i int) bmcsim.SystemSpec {
	s := bmcsim.DefaultSystem(i)
	s.Manufacturer, s.Model, s.BIOSVersion = "Contoso", fmt.Sprintf("R-%d", 1000+i), "2.1."+fmt.Sprint(i)
	return s
}
