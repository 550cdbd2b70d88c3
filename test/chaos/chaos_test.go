// Package chaos is the crash-consistency test: a lab fleet goes through discovery, claims,
// releases and maintenance while the manager process is killed with SIGKILL at random moments,
// and invariants are checked at every observation (see docs/reliability.md).
//
// CHAOS_KILLS (30) sets the number of kills, CHAOS_SEED replays a run's workload and kill
// schedule (the seed is printed; the system's own timing is not replayed), CHAOS_SERVERS (100)
// sizes the fleet, and CHAOS_DIR keeps the lab's directory (manager.log, lab.log).
//
// Files: this one runs the lab and the kills; workload_test.go plays the users;
// observer_test.go watches and snapshots the API; invariants_test.go says what must hold (and
// invariants_check_test.go shows each check can fail); converge_test.go says what the end state
// is; report_test.go explains a failure.
package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/test/lab"
)

// config is the run's size, from the environment (make chaos passes CHAOS_KILLS).
type config struct {
	seed              uint64
	kills, servers    int
	bmcs              int
	gapMin, gapMax    time.Duration // between a manager's start and its kill
	downMax           time.Duration // how long the manager stays dead, at most
	claims, maints    int           // how many of each the workload keeps around (claims: at most)
	discoveryTimeout  time.Duration
	convergeTimeout   time.Duration
	observeEvery      time.Duration
	minTransitionKill float64 // share of kills that must hit servers mid-transition
	minReleases       int     // releases that must be followed to Available; kills go on (up to twice as many) until they are
}

func configFromEnv(t *testing.T) config {
	c := config{
		seed: uint64(time.Now().UnixNano()), kills: 30, servers: 100,
		gapMin: time.Second, gapMax: 5 * time.Second, downMax: 500 * time.Millisecond,
		claims: 40, maints: 6, discoveryTimeout: 5 * time.Second, convergeTimeout: 3 * time.Minute,
		observeEvery: 250 * time.Millisecond, minTransitionKill: 0.5, minReleases: 10,
	}
	num := func(name string, v *int) {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err, name)
			require.Positive(t, n, name)
			*v = n
		}
	}
	if s := os.Getenv("CHAOS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "CHAOS_SEED")
		c.seed = n
	}
	num("CHAOS_KILLS", &c.kills)
	num("CHAOS_SERVERS", &c.servers)
	// Four systems per BMC: a BMC reconcile that creates several Servers can be killed half
	// way, and the fleet costs the (race-instrumented) simulators a quarter of the sessions and
	// polls that one BMC per server would.
	c.bmcs = max(1, c.servers/4)
	return c
}

// labLog takes what the lab's own side logs (the boot service above all), once a run has a
// directory to put it in.
var labLog = &switchWriter{}

func TestMain(tm *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(labLog)))
	os.Exit(tm.Run())
}

type switchWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *switchWriter) set(w io.Writer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.w = w
}

func (s *switchWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.w == nil {
		return len(p), nil
	}
	return s.w.Write(p)
}

// TestCrashConsistency: 100 servers go through discovery, claims, releases and maintenance
// while the manager is SIGKILLed at seeded random moments; every observation must satisfy the
// invariants, and after the last restart every server must converge.
func TestCrashConsistency(t *testing.T) {
	cfg := configFromEnv(t)
	t.Logf("chaos seed %d (CHAOS_SEED=%d replays the workload and kill schedule), %d kills, %d servers on %d BMCs",
		cfg.seed, cfg.seed, cfg.kills, cfg.servers, cfg.bmcs)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("FAILED with chaos seed %d: rerun with CHAOS_SEED=%d CHAOS_KILLS=%d CHAOS_SERVERS=%d", cfg.seed, cfg.seed, cfg.kills, cfg.servers)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	began := time.Now()

	l, pprofAddr, runs := startLab(ctx, t, cfg)
	restCfg := rest.CopyConfig(l.Env.Config)
	restCfg.QPS, restCfg.Burst = 1000, 2000
	c, err := client.NewWithWatch(restCfg, client.Options{Scheme: l.Env.Scheme})
	require.NoError(t, err)

	image, checksum := l.Images.SimImage()
	wl := newWorkload(c, image, checksum, cfg.seed, cfg.claims, cfg.maints)
	obs := newObserver(c, cfg.observeEvery, wl.claimDeleted)
	// The lab's hosts are known by their own UUID, which their Servers' may not be (none, a
	// placeholder, shared): they are found by BMC and system Id.
	obs.wipes.hostOf = func(s *m.Server) string {
		if h, _, ok := l.HostOf(s); ok {
			return h.UUID
		}
		return s.Spec.SystemUUID
	}
	wl.obs = obs
	obsCtx, stopObserver := context.WithCancel(ctx)
	obsDone, ready := make(chan struct{}), make(chan error, 1)
	go func() { defer close(obsDone); obs.run(obsCtx, ready) }()
	require.NoError(t, <-ready)
	defer func() { stopObserver(); <-obsDone }()

	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))

	// The workload and the kills run together; the workload stops after the last restart.
	wlCtx, stopWorkload := context.WithCancel(ctx)
	wlDone := make(chan struct{})
	go func() { defer close(wlDone); wl.run(wlCtx) }()
	kills, killErr := killLoop(ctx, t, l, obs, cfg)
	obs.calm()
	stopWorkload()
	<-wlDone
	require.NoError(t, killErr)
	t.Logf("%d kills in %v; workload %+v", len(kills), time.Since(began).Round(time.Second), wl.statsNow())

	// The end state: no maintenance, two Bound claims in three kept, the rest released.
	kept, err := wl.finish(ctx)
	require.NoError(t, err)
	t.Logf("end state: %d claims kept, the rest and every maintenance deleted; waiting for convergence", kept)
	converge(ctx, t, l, obs, cfg, pprofAddr)
	stopObserver()
	<-obsDone

	violations := obs.allViolations()
	violations = append(violations, obs.wipes.Verify(runs.all())...)
	violations = append(violations, checkImageBoots(l, obs, wl.readyClaims())...)
	report(t, obs, kills, runs, violations)
	checkManagerLog(t, filepath.Join(l.Opts.Dir, "manager.log"))
	checkKills(t, cfg, kills)
	if st := wl.statsNow(); st.ServersDeleted == 0 || st.BMCsDeleted == 0 || st.BMCSecretsDeleted == 0 || st.EndpointsDeleted == 0 || st.EndpointsRecreated == 0 {
		t.Errorf("Servers, BMCs, BMCSecrets and Endpoints must each have been deleted (and Endpoints made again): %+v", st)
	}
	if n := obs.releases(); n < cfg.minReleases {
		t.Errorf("only %d releases were followed to Available: the wipe invariant was hardly exercised", n)
	}
	if len(violations) > 0 {
		t.Errorf("%d invariant violations:\n%s", len(violations), summarize(violations, 10))
		var details string
		for _, v := range violations {
			details += v.Detail + "\n"
		}
		explainServers(t, l, obs, details)
		explainClaims(t, wl, details)
		t.Logf("kills → restarts: %s", formatKills(kills))
	}
}

// startLab starts the lab with the manager as a process of its own (not yet running), and
// records every wipe its hosts do.
func startLab(ctx context.Context, t *testing.T, cfg config) (*lab.Lab, string, *wipeRuns) {
	t.Helper()
	bin, err := lab.BuildManager(t.TempDir())
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "lab")
	if d := os.Getenv("CHAOS_DIR"); d != "" {
		dir = d // kept after the run, with manager.log, lab.log and a goroutine dump
	}
	// pprof on the manager: a goroutine dump says what a manager that is not getting anywhere
	// is doing.
	pprofAddr, err := lab.FreeLoopbackAddr()
	require.NoError(t, err)
	l, err := lab.Start(ctx, lab.Options{
		Dir: dir, Servers: cfg.servers, BMCs: cfg.bmcs, ManagerBinary: bin, InstantProbes: true, ManualStart: true,
		DiscoveryTimeout: cfg.discoveryTimeout,
		Manager: func(o *manager.Options) {
			// A probe boot lost to a kill is retried seconds later, not minutes; enough
			// attempts that kills alone never exhaust them (Error would wait for a person).
			o.Discovery.Attempts = 20
			o.Settings.BackoffBase, o.Settings.BackoffMax = 100*time.Millisecond, 2*time.Second
			o.Settings.ResyncPeriod = 10 * time.Second
			// BMC calls wait on the simulators; more workers keep the queue moving meanwhile.
			o.Settings.MaxConcurrentReconciles = map[string]int{"server": 8}
			o.KubeQPS, o.KubeBurst = 200, 400
			o.PprofAddr = pprofAddr
		},
	})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	sideLog, err := os.Create(filepath.Join(l.Opts.Dir, "lab.log"))
	require.NoError(t, err)
	labLog.set(sideLog)
	t.Cleanup(func() { labLog.set(nil); sideLog.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			log := filepath.Join(l.Opts.Dir, "manager.log")
			t.Logf("manager log: %s (last lines below)\n%s", log, tail(log, 40))
		}
	})

	// The boot service starts each probe run under its lock, so taking that lock once (Boots)
	// publishes the wrapper to them; none runs before the manager starts anyway.
	runs := &wipeRuns{}
	probe := l.Boots.Probe
	// A wipe run is recorded when it starts, which is what the invariant asks about: a probe
	// that has reported may still be running (its last boot state) when the checks are made.
	l.Boots.Probe = func(ctx context.Context, ign []byte, host lab.Host) error {
		c, perr := ignition.Parse(ign)
		if perr != nil || c.Mode != ignition.ModeWipe {
			return probe(ctx, ign, host)
		}
		i := runs.add(wipeRun{UUID: host.UUID, Start: time.Now()})
		err := probe(ctx, ign, host)
		runs.ended(i, time.Now(), err)
		return err
	}
	_ = l.Boots.Boots()
	return l, pprofAddr, runs
}

// wipeRuns collects the lab's wipe boots.
type wipeRuns struct {
	mu   sync.Mutex
	runs []wipeRun
}

// add records a run that started, and returns its index for ended.
func (w *wipeRuns) add(r wipeRun) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs = append(w.runs, r)
	return len(w.runs) - 1
}

// ended records when run i ended, and how.
func (w *wipeRuns) ended(i int, at time.Time, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs[i].End, w.runs[i].Err = at, err
}

func (w *wipeRuns) all() []wipeRun {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]wipeRun(nil), w.runs...)
}

// kill is one SIGKILL and what the fleet was doing at that moment.
type kill struct {
	at, restarted time.Time
	states        map[m.ServerState]int
	transitioning int // servers in Initial, Discovery or Cleanup (or not yet enrolled)
}

// killLoop kills the manager cfg.kills times at seeded random moments, restarting it after a
// seeded random downtime each time.
func killLoop(ctx context.Context, t *testing.T, l *lab.Lab, obs *observer, cfg config) ([]kill, error) {
	rng := rand.New(rand.NewPCG(cfg.seed, 0x6b696c6c73))
	var kills []kill
	// The kills go on past cfg.kills while too few releases have been seen through (a slow or
	// busy machine gets through fewer in the same time), up to twice as many.
	for i := 0; i < cfg.kills || (obs.releases() < cfg.minReleases && i < 2*cfg.kills); i++ {
		gap := cfg.gapMin + time.Duration(rng.Int64N(int64(cfg.gapMax-cfg.gapMin)))
		down := time.Duration(rng.Int64N(int64(cfg.downMax)))
		select {
		case <-ctx.Done():
			return kills, ctx.Err()
		case <-time.After(gap): // the schedule, not a synchronisation
		}
		states := obs.states()
		k := kill{at: time.Now(), states: states,
			transitioning: states[m.ServerStateInitial] + states[m.ServerStateDiscovery] + states[m.ServerStateCleanup] + states[lab.StateNew]}
		if err := l.KillManager(); err != nil {
			return kills, fmt.Errorf("kill %d: %w", i+1, err)
		}
		kills = append(kills, k)
		select {
		case <-ctx.Done():
			return kills, ctx.Err()
		case <-time.After(down):
		}
		if err := l.StartManager(); err != nil {
			return kills, fmt.Errorf("restart %d: %w", i+1, err)
		}
		kills[len(kills)-1].restarted = time.Now()
		if (i+1)%10 == 0 {
			t.Logf("kill %d (of at least %d) at %s: %s", i+1, cfg.kills, k.at.Format("15:04:05.000"), formatStates(states))
		}
	}
	return kills, nil
}

// checkKills fails a run whose kills did not happen, or happened only while the fleet rested.
func checkKills(t *testing.T, cfg config, kills []kill) {
	t.Helper()
	require.GreaterOrEqual(t, len(kills), cfg.kills)
	mid := 0
	for _, k := range kills {
		if k.transitioning > 0 {
			mid++
		}
	}
	if float64(mid) < cfg.minTransitionKill*float64(len(kills)) {
		t.Errorf("only %d of %d kills hit a server mid-transition (Initial, Discovery, Cleanup)", mid, len(kills))
	}
}
