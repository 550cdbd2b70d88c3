// Package bench measures the operator at fleet scale (make bench): enrollment against the
// apiserver's own floor, claim latency, release, and what the manager process costs.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// config is the run's size and knobs, from the environment (make bench passes them through).
type config struct {
	servers            int
	qps                float64
	burst, concurrency int
	// labGOGC is the garbage-collection target of the lab's processes (kube-apiserver, etcd
	// and this one, which simulates the fleet and the boot service), not the manager's. The
	// floor is bound by the client's QPS, not the lab's CPU, so a faster lab shortens
	// enrollment, not the floor: the ratio is reported with this setting beside it.
	labGOGC      int
	resync, idle time.Duration
	// out is BENCH_OUT, or "" for outputDir's choice.
	out, pprof string
}

func configFromEnv(t *testing.T, root string) config {
	c := config{servers: 1000, qps: 300, burst: 600, concurrency: 16, labGOGC: 400, resync: 5 * time.Minute, idle: 5 * time.Minute,
		out: os.Getenv("BENCH_OUT"), pprof: os.Getenv("BENCH_PPROF")}
	intVar := func(name string, v *int) {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err, name)
			require.Positive(t, n, name)
			*v = n
		}
	}
	durVar := func(name string, v *time.Duration) {
		if s := os.Getenv(name); s != "" {
			d, err := time.ParseDuration(s)
			require.NoError(t, err, name)
			*v = d
		}
	}
	intVar("BENCH_SERVERS", &c.servers)
	intVar("BENCH_BURST", &c.burst)
	intVar("BENCH_CONCURRENCY", &c.concurrency)
	intVar("BENCH_LAB_GOGC", &c.labGOGC)
	if s := os.Getenv("BENCH_QPS"); s != "" {
		q, err := strconv.ParseFloat(s, 64)
		require.NoError(t, err, "BENCH_QPS")
		c.qps = q
	}
	durVar("BENCH_RESYNC", &c.resync)
	durVar("BENCH_IDLE", &c.idle)
	return c
}

// outputDir is where a run's figures go: BENCH_OUT when set; docs/bench for a run of the shape
// docs/bench reports (reported: the scale run at 1,000 or 10,000, the boot run with its two VMs,
// the install run) from a clean tree; otherwise a scratch directory, so that a small, odd or
// dirty run never replaces the figures people read and commit.
func outputDir(root string, reported bool, commit, benchOut string) string {
	switch {
	case benchOut != "":
		return benchOut
	case reported && !strings.HasSuffix(commit, "-dirty"):
		return filepath.Join(root, "docs", "bench")
	default:
		return filepath.Join(os.TempDir(), "ironfleet-bench")
	}
}

// singleClaims is how many claims the run makes one after another in the idle fleet: 100, or
// as many as half the fleet (the other half of a small fleet stays for them to bind).
func singleClaims(n int) int { return min(100, n/2) }

// labMemoryLimitMiB is the soft memory limit of each of the lab's processes (GOMEMLIMIT): with
// GOGC at 400, kube-apiserver at ten thousand servers would otherwise take a third of the
// machine's memory. At a thousand it does not bind.
const labMemoryLimitMiB = 6 << 10

func TestBench(t *testing.T) {
	if os.Getenv("IRONFLEET_BENCH") == "" {
		t.Skip("the benchmark runs with `make bench` (IRONFLEET_BENCH=1); BENCH_SERVERS=10000 for the large run")
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	cfg := configFromEnv(t, root)
	n := cfg.servers
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logf := func(format string, args ...any) {
		fmt.Printf("%s  bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	defer debug.SetGCPercent(debug.SetGCPercent(cfg.labGOGC))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(labMemoryLimitMiB << 20))
	logf("building the manager; starting the lab with %d BMCs and servers", n)
	bin, err := lab.BuildManager(t.TempDir())
	require.NoError(t, err)
	l, err := lab.Start(ctx, lab.Options{
		Dir: filepath.Join(t.TempDir(), "lab"), Servers: n, BMCs: n,
		ManagerBinary: bin, InstantProbes: true, ManualStart: true, DiscoveryTimeout: 5 * time.Minute,
		ControlPlane: testenv.Options{GOGC: cfg.labGOGC, MemoryLimitMiB: labMemoryLimitMiB},
		Manager: func(o *manager.Options) {
			o.KubeQPS, o.KubeBurst = cfg.qps, cfg.burst
			o.Settings.DefaultConcurrency = cfg.concurrency
			o.Settings.ResyncPeriod = cfg.resync
			o.PprofAddr = cfg.pprof
		},
	})
	require.NoError(t, err)
	// The lab's own parts (boot service, probes) log to a file beside the manager's.
	labLog, err := os.Create(filepath.Join(l.Opts.Dir, "lab.log"))
	require.NoError(t, err)
	defer labLog.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(labLog)))
	defer func() {
		cancel() // the trackers first, then the lab they watch
		l.Stop()
	}()
	defer func() {
		if t.Failed() {
			t.Logf("manager log: %s", filepath.Join(l.Opts.Dir, "manager.log"))
		}
	}()

	// The benchmark's own client is not the bottleneck: it only creates and watches.
	benchCfg := rest.CopyConfig(l.Env.Config)
	benchCfg.QPS, benchCfg.Burst = 5000, 10000
	c, err := client.NewWithWatch(benchCfg, client.Options{Scheme: l.Env.Scheme})
	require.NoError(t, err)

	res := Result{
		Servers: n, Date: time.Now().UTC().Format(time.RFC3339), Commit: commit(root), Machine: thisMachine(),
		Settings: Settings{KubeAPIQPS: cfg.qps, KubeAPIBurst: cfg.burst, DefaultConcurrency: cfg.concurrency,
			ResyncPeriod: cfg.resync.String(), IdleWindow: cfg.idle.String(), BMCs: len(l.BMCs), LabGOGC: cfg.labGOGC, LabMemoryLimitMiB: labMemoryLimitMiB, ManagerFlags: l.ManagerOptions.Args()},
	}

	cfg.out = outputDir(root, n == scalingFrom || n == scalingTo, res.Commit, cfg.out)
	logf("figures go to %s", cfg.out)

	// After each phase the figures so far are written, with the manager's cost up to then and
	// where the phase's requests went, by the apiserver's own count.
	var lastCounts map[string]float64
	// phaseCPU is the CPU sample at the current phase's start.
	var phaseCPU cpuSample
	startCPU := func() {
		var err error
		phaseCPU, err = sampleCPU(l.ManagerPID())
		require.NoError(t, err)
	}
	countRequests := func() map[string]float64 {
		counts, err := apiserverCounts(ctx, l.Env.Config)
		require.NoError(t, err)
		return counts
	}
	checkpoint := func(phase string) {
		counts := countRequests()
		if res.APIServerRequestsPerServer == nil {
			res.APIServerRequestsPerServer = map[string]map[string]float64{}
		}
		res.APIServerRequestsPerServer[phase] = perServer(lastCounts, counts, n)
		lastCounts = counts
		logf("%s: apiserver requests per server: %s", phase, topRequests(res.APIServerRequestsPerServer[phase]))
		now, err := sampleCPU(l.ManagerPID())
		require.NoError(t, err)
		res.CPU[phase] = now.since(phaseCPU)
		rss, cpu, err := procStats(l.ManagerPID())
		require.NoError(t, err)
		res.Cost.PeakRSSMiB, res.Cost.CPUSeconds = float64(rss)/(1<<20), cpu.Seconds()
		res.Completed = append(res.Completed, phase)
		require.NoError(t, writeDocs(cfg.out, res))
		logf("%s measured (manager peak RSS so far %.0f MiB, CPU %.0f s); wrote %s and README.md", phase, res.Cost.PeakRSSMiB, res.Cost.CPUSeconds, filepath.Join(cfg.out, fmt.Sprintf("%d.json", n)))
	}

	// 2. The floors, first, so that nothing else is running against the apiserver.
	logf("floor: %d servers × %d writes, %d claims × %d (bind) and × %d (release), QPS %g burst %d, %d workers",
		n, 1+len(floorStates), n/2, floorClaimWrites, floorReleaseWrites, cfg.qps, cfg.burst, cfg.concurrency)
	fl, err := runFloor(ctx, l.Env.Config, c, cfg, n)
	require.NoError(t, err)
	floor := fl.enrollment
	res.CPU = map[string]PhaseCPU{}
	for phase, used := range fl.cpu {
		res.CPU[floorPhase(phase)] = used
	}
	res.Floor = Floor{Seconds: floor.Seconds(), WritesPerServer: 1 + len(floorStates), Workers: cfg.concurrency}
	logf("floor: enrollment %.1f s, claims %.1f s, release %.1f s", fl.enrollment.Seconds(), fl.claims.Seconds(), fl.release.Seconds())

	// The object-model floor, also before the operator: the object model's own least requests.
	logf("object-model floor: %d servers × %d requests, %d claims × %d (bind) and × %d (release)",
		n, len(objectModelRequests[phaseEnrollment]), n/2, len(objectModelRequests[phaseClaims]), len(objectModelRequests[phaseRelease]))
	caPEM, err := readCA(l.ManagerOptions.BMCCAFile)
	require.NoError(t, err)
	om, err := runObjectModelFloor(ctx, objectModelEnv{base: l.Env.Config, admin: c, claim: l.SampleClaim, probeImage: l.ManagerOptions.ProbeImage, caPEM: caPEM}, cfg, n)
	require.NoError(t, err)
	res.APIServerRequestsPerServer = map[string]map[string]float64{}
	for _, phase := range []string{phaseEnrollment, phaseClaims, phaseRelease} {
		res.CPU[objectModelFloorPhase(phase)] = om.cpu[phase]
		res.APIServerRequestsPerServer[objectModelFloorPhase(phase)] = om.requests[phase]
		if m := om.mismatch[phase]; m != "" {
			if res.ObjectModelFloorMismatch == nil {
				res.ObjectModelFloorMismatch = map[string]string{}
			}
			res.ObjectModelFloorMismatch[phase] = m
			logf("object-model floor %s: the apiserver counted other requests than its list: %s", phase, m)
		}
	}
	logf("object-model floor: enrollment %.1f s, claims %.1f s, release %.1f s", om.seconds[phaseEnrollment], om.seconds[phaseClaims], om.seconds[phaseRelease])

	lastCounts = countRequests()

	// 1. Enrollment: the clock starts with the operator and the first Endpoint.
	servers, err := track[*metalv1alpha1.Server](ctx, c, func() client.ObjectList { return &metalv1alpha1.ServerList{} }, "", nil)
	require.NoError(t, err)
	available := func(s *metalv1alpha1.Server) bool { return s.Status.State == metalv1alpha1.ServerStateAvailable }
	serverSummary := func() string {
		counts := map[metalv1alpha1.ServerState]int{}
		servers.count(func(s *metalv1alpha1.Server) bool { counts[lab.StateOf(s)]++; return false })
		return fmt.Sprint(counts)
	}
	logf("enrollment: %d Endpoints", n)
	startCPU()
	start := time.Now()
	require.NoError(t, l.StartManager())
	require.NoError(t, l.CreateEndpoints(ctx))
	require.NoError(t, waitFor(ctx, scaled(n, time.Second), fmt.Sprintf("%d servers Available", n), func() (bool, string) {
		return servers.count(available) == n, serverSummary()
	}))
	enrollment := time.Since(start)
	res.Enrollment = Enrollment{Seconds: enrollment.Seconds(), ServersPerSecond: float64(n) / enrollment.Seconds(),
		ObjectModelFloorSeconds: om.seconds[phaseEnrollment], ObjectModelFloorRequestsPerServer: len(objectModelRequests[phaseEnrollment])}
	res.Enrollment.OverObjectModelFloor = ratio(res.Enrollment.Seconds, res.Enrollment.ObjectModelFloorSeconds)
	res.EnrollmentOverFloor = enrollment.Seconds() / floor.Seconds()
	m, err := scrape(l.MetricsURL)
	require.NoError(t, err)
	res.Cost.APIRequestsPerServerEnrollment = m.sum("rest_client_requests_total") / float64(n)
	checkpoint(phaseEnrollment)
	logf("enrollment: %.1f s (floor %.1f s)", enrollment.Seconds(), floor.Seconds())

	// 3. Claims: N/2 at once; latency from each create to the claim seen Bound.
	claims := n / 2
	var mu sync.Mutex
	created, bound := map[string]time.Time{}, map[string]time.Time{}
	claimTracker, err := track(ctx, c, func() client.ObjectList { return &metalv1alpha1.ServerClaimList{} }, "default",
		func(_ watch.EventType, claim *metalv1alpha1.ServerClaim, at time.Time) {
			if claim.Status.Phase != metalv1alpha1.ClaimPhaseBound {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if _, seen := bound[claim.Name]; !seen {
				bound[claim.Name] = at
			}
		})
	require.NoError(t, err)
	logf("claims: %d created at once", claims)
	startCPU()
	claimStart := time.Now()
	require.NoError(t, lab.Parallel(64, claims, func(i int) error {
		claim := l.SampleClaim(benchClaim(i))
		at := time.Now()
		mu.Lock()
		created[claim.Name] = at
		mu.Unlock()
		return persist(func() error {
			if err := c.Create(ctx, claim); !apierrors.IsAlreadyExists(err) { // a timed-out try may have made it
				return err
			}
			return nil
		})
	}))
	require.NoError(t, waitFor(ctx, scaled(claims, time.Second), fmt.Sprintf("%d claims Bound", claims), func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(bound) == claims, fmt.Sprintf("%d Bound", len(bound))
	}))
	mu.Lock()
	var latencies []time.Duration
	last := claimStart
	for name, at := range bound {
		latencies = append(latencies, at.Sub(created[name]))
		if at.After(last) {
			last = at
		}
	}
	mu.Unlock()
	res.Claims = Claims{Count: claims, P50Seconds: percentile(latencies, 50).Seconds(), P95Seconds: percentile(latencies, 95).Seconds(),
		P99Seconds: percentile(latencies, 99).Seconds(), AllBoundSeconds: last.Sub(claimStart).Seconds(),
		FloorSeconds: fl.claims.Seconds(), FloorWritesPerClaim: floorClaimWrites}
	res.Claims.OverFloor = res.Claims.AllBoundSeconds / res.Claims.FloorSeconds
	res.Claims.ObjectModelFloorSeconds, res.Claims.ObjectModelFloorRequestsPerClaim = om.seconds[phaseClaims], len(objectModelRequests[phaseClaims])
	res.Claims.OverObjectModelFloor = ratio(res.Claims.AllBoundSeconds, res.Claims.ObjectModelFloorSeconds)
	logf("claims: all Bound after %.1f s (floor %.1f s), p99 %.2f s", res.Claims.AllBoundSeconds, fl.claims.Seconds(), res.Claims.P99Seconds)
	checkpoint(phaseClaims)

	// Release them all: until every server is Available again (wiped, verified).
	logf("release: deleting %d claims", claims)
	startCPU()
	releaseStart := time.Now()
	// One delete per claim, as their users would: a single delete-collection of 5,000 claims
	// outlasts the apiserver's request timeout at 10,000 servers.
	require.NoError(t, lab.Parallel(64, claims, func(i int) error {
		claim := l.SampleClaim(benchClaim(i))
		return persist(func() error { return client.IgnoreNotFound(c.Delete(ctx, claim)) })
	}))
	require.NoError(t, waitFor(ctx, scaled(claims, time.Second), fmt.Sprintf("%d servers Available again", n), func() (bool, string) {
		return servers.count(available) == n && claimTracker.count(func(*metalv1alpha1.ServerClaim) bool { return true }) == 0, serverSummary()
	}))
	res.Release = Release{Seconds: time.Since(releaseStart).Seconds(), FloorSeconds: fl.release.Seconds(), FloorWritesPerServer: floorReleaseWrites}
	res.Release.OverFloor = res.Release.Seconds / res.Release.FloorSeconds
	res.Release.ObjectModelFloorSeconds, res.Release.ObjectModelFloorRequestsPerServer = om.seconds[phaseRelease], len(objectModelRequests[phaseRelease])
	res.Release.OverObjectModelFloor = ratio(res.Release.Seconds, res.Release.ObjectModelFloorSeconds)
	if m, err = scrape(l.MetricsURL); err == nil {
		res.Cost.APIRequestsPerServerLifecycle = m.sum("rest_client_requests_total") / float64(n)
	}
	require.NoError(t, err)
	logf("release: %.1f s (floor %.1f s)", res.Release.Seconds, fl.release.Seconds())
	checkpoint(phaseRelease)

	// 4. Idle: what a quiet fleet costs, from when the release's last power-offs have been
	// seen (until then the manager looks every few seconds, which is not idling).
	powerSettled := func(s *metalv1alpha1.Server) bool {
		return s.Status.PowerState != metalv1alpha1.PowerStatePoweringOn && s.Status.PowerState != metalv1alpha1.PowerStatePoweringOff
	}
	require.NoError(t, waitFor(ctx, scaled(n, 10*time.Millisecond), "every server's last power change observed", func() (bool, string) {
		settled := servers.count(powerSettled)
		return settled == n, fmt.Sprintf("%d of %d servers still Powering*", n-settled, n)
	}))
	logf("idle: measuring for %s", cfg.idle)
	for _, b := range l.BMCs {
		b.ResetStats()
	}
	before, err := scrape(l.MetricsURL)
	require.NoError(t, err)
	startCPU()
	idle := time.NewTimer(cfg.idle)
	select {
	case <-idle.C:
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	after, err := scrape(l.MetricsURL)
	require.NoError(t, err)
	var redfish int64
	for _, b := range l.BMCs {
		redfish += b.Stats().Requests
	}
	minutes := cfg.idle.Minutes()
	res.Cost.IdleRedfishPerServerPerMinute = float64(redfish) / float64(n) / minutes
	res.Cost.IdleReconcilesPerMinute = (after.sum("controller_runtime_reconcile_total") - before.sum("controller_runtime_reconcile_total")) / minutes
	res.Cost.IdleReconcilesPerMinuteExpected = float64(n) / cfg.resync.Minutes()
	res.Cost.IdleReconcilesByController = map[string]float64{}
	for _, name := range []string{"endpoint", "bmc", "server", "serverclaim", "servermaintenance"} {
		label := fmt.Sprintf("controller=%q", name)
		res.Cost.IdleReconcilesByController[name] = (after.sum("controller_runtime_reconcile_total", label) - before.sum("controller_runtime_reconcile_total", label)) / minutes
	}
	checkpoint(phaseIdle)

	// 5. One claim at a time in the idle fleet: create → Bound as one user feels it, each
	// waited for before the next.
	count := singleClaims(n)
	logf("single claims: %d, one after another", count)
	startCPU()
	var single []time.Duration
	for i := range count {
		claim := l.SampleClaim(fmt.Sprintf("single-%03d", i))
		at := time.Now()
		mu.Lock()
		created[claim.Name] = at
		mu.Unlock()
		require.NoError(t, persist(func() error {
			if err := c.Create(ctx, claim); !apierrors.IsAlreadyExists(err) {
				return err
			}
			return nil
		}))
		var latency time.Duration
		require.NoError(t, waitFor(ctx, scaled(1, time.Second), claim.Name+" Bound", func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			b, ok := bound[claim.Name]
			latency = b.Sub(at)
			return ok, "not Bound"
		}))
		single = append(single, latency)
	}
	res.Claims.setSingle(single)
	logf("single claims: → Bound p50 %.2f s, p99 %.2f s, max %.2f s", res.Claims.SingleP50Seconds, res.Claims.SingleP99Seconds, res.Claims.SingleMaxSeconds)
	checkpoint(phaseSingleClaims)
	res.writeTable(os.Stdout)
}

// scaled is a deadline that grows with the work: five minutes plus per for each item.
func scaled(items int, per time.Duration) time.Duration {
	return 5*time.Minute + time.Duration(items)*per
}

// benchClaim names the benchmark's i-th claim.
func benchClaim(i int) string { return fmt.Sprintf("bench-%06d", i) }
