package bench

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The benchmark's arithmetic runs in make test, so a broken figure is caught before a long run.

func TestPercentileIsNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(101-i)*time.Millisecond)
	}
	assert.Equal(t, 50*time.Millisecond, percentile(ds, 50))
	assert.Equal(t, 99*time.Millisecond, percentile(ds, 99))
	assert.Equal(t, 100*time.Millisecond, percentile(ds, 100))
	assert.Equal(t, 7*time.Millisecond, percentile([]time.Duration{7 * time.Millisecond}, 99))
	assert.Zero(t, percentile(nil, 50))
	assert.Equal(t, 100*time.Millisecond, ds[0], "the input is not reordered")
}

func TestMetricsSumMatchesNameAndLabels(t *testing.T) {
	m := metrics(`# HELP rest_client_requests_total Number of HTTP requests
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 10
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 5
rest_client_requests_total_other 100
controller_runtime_reconcile_total{controller="bmc",result="success"} 3
controller_runtime_reconcile_total{controller="server",result="success"} 4
controller_runtime_reconcile_total{controller="server",result="error"} 1
plain_metric 2.5
`)
	assert.Equal(t, 15.0, m.sum("rest_client_requests_total"))
	assert.Equal(t, 5.0, m.sum("rest_client_requests_total", `method="POST"`))
	assert.Equal(t, 8.0, m.sum("controller_runtime_reconcile_total"))
	assert.Equal(t, 5.0, m.sum("controller_runtime_reconcile_total", `controller="server"`))
	assert.Equal(t, 2.5, m.sum("plain_metric"))
	assert.Zero(t, m.sum("missing_metric"))
}

func TestReadmeKeepsHandWrittenTextAroundTheFigures(t *testing.T) {
	r := Result{Servers: 1000, Claims: Claims{P99Seconds: 0.5}, EnrollmentOverFloor: 2.5, Completed: []string{phaseEnrollment, phaseClaims}}
	r.Cost.IdleReconcilesPerMinuteExpected = 200
	fresh := spliceFigures("", figuresMarkdown([]Result{r}))
	assert.Contains(t, fresh, beginFigures)
	assert.Contains(t, fresh, "| enrollment ÷ floor ≤ 2.0 | 2.50 ✗ missed |")
	assert.Contains(t, fresh, "| claim latency p99 ≤ 1 s | 0.50 s ✓ |")
	assert.Contains(t, fresh, "| idle Redfish requests / server / min ≤ 1 | not reached  |", "a phase the run did not reach is neither met nor missed")
	assert.Contains(t, fresh, "| release: all servers Available again | — (not reached) |")

	edited := "# Benchmarks\n\nWhat limited it.\n\n" + beginFigures + "\nold\n" + endFigures + "\n\n## Notes\nkept\n"
	out := spliceFigures(edited, "new\n")
	assert.Equal(t, "# Benchmarks\n\nWhat limited it.\n\n"+beginFigures+"\nnew\n"+endFigures+"\n\n## Notes\nkept\n", out)
	assert.Equal(t, 1, strings.Count(out, beginFigures))
}

func TestEveryPhaseIsJudgedAgainstItsFloorAndMemoryByFleetSize(t *testing.T) {
	dir := t.TempDir()
	// A run from before the phase floors: release in releaseSeconds, no claims or release floor.
	old := `{"servers": 10000, "releaseSeconds": 71.5, "cost": {"peakRssMiB": 250}, "completed": ["enrollment", "claims", "release"]}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "10000.json"), []byte(old), 0o644))
	r := Result{Servers: 1000, EnrollmentOverFloor: 1.9, Claims: Claims{AllBoundSeconds: 9, FloorSeconds: 3, OverFloor: 3, FloorWritesPerClaim: 2},
		Release: Release{Seconds: 8, FloorSeconds: 5, OverFloor: 1.6, FloorWritesPerServer: 3}, Cost: Cost{PeakRSSMiB: 95},
		Completed: []string{phaseEnrollment, phaseClaims, phaseRelease}}
	require.NoError(t, writeDocs(dir, r))
	results, err := loadResults(dir)
	require.NoError(t, err)
	require.Len(t, results, 2)
	assert.Equal(t, 71.5, results[1].Release.Seconds, "an older run's release time is kept")

	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	for _, want := range []string{
		"| enrollment ÷ floor ≤ 2.0 | 1.90 ✓ | no floor measured ✗ missed |",
		"| all claims Bound ÷ floor ≤ 2.0 | 3.00 ✗ missed | no floor measured ✗ missed |",
		"| release ÷ floor ≤ 2.0 | 1.60 ✓ | no floor measured ✗ missed |",
		"| manager peak RSS ≤ 90 MiB / ≤ 300 MiB | 95 MiB ✗ missed | 250 MiB ✓ |",
		"| claims floor: plain client binds as many | 3.0 s (2 writes/claim) | not measured (run before the phase floors) |",
		"| release: all servers Available again | 8.0 s | 71.5 s |",
	} {
		assert.Contains(t, string(readme), want)
	}
}

func TestApiserverRequestsAreCountedByVerbAndResource(t *testing.T) {
	m := metrics(`apiserver_request_total{code="200",component="apiserver",dry_run="",group="metal.ironfleet.dev",resource="servers",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 30
apiserver_request_total{code="409",component="apiserver",dry_run="",group="metal.ironfleet.dev",resource="servers",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="metal.ironfleet.dev",resource="servers",scope="cluster",subresource="",verb="WATCH",version="v1alpha1"} 7
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="POST",version="v1"} 20
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 99
`)
	got := requestsByResource(m)
	assert.Equal(t, map[string]float64{"PATCH servers/status": 40, "POST secrets": 20}, got, "watches and other groups are left out")
	assert.Equal(t, map[string]float64{"PATCH servers/status": 3, "POST secrets": 2}, perServer(map[string]float64{"PATCH servers/status": 10}, got, 10))
	assert.Equal(t, "PATCH servers/status 3.00, POST secrets 2.00", topRequests(perServer(map[string]float64{"PATCH servers/status": 10}, got, 10)))
}

func TestCPUSamplesCountThisProcessAndTheControlPlaneItStarted(t *testing.T) {
	// A child named as the control plane's processes are is counted under its name.
	sleep, err := exec.LookPath("sleep")
	require.NoError(t, err)
	data, err := os.ReadFile(sleep)
	require.NoError(t, err)
	etcd := filepath.Join(t.TempDir(), procEtcd)
	require.NoError(t, os.WriteFile(etcd, data, 0o755))
	child := exec.Command(etcd, "60")
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })

	before, err := sampleCPU(0)
	require.NoError(t, err)
	assert.Contains(t, before.procs, procEtcd)
	assert.NotContains(t, before.procs, procManager, "no manager yet")
	// Spend CPU here until the kernel has counted some of it.
	var now cpuSample
	sum := 0
	require.Eventually(t, func() bool {
		for i := range 5_000_000 {
			sum += i
		}
		now, err = sampleCPU(child.Process.Pid) // the child stands in for a manager
		return err == nil && now.procs[procLab]-before.procs[procLab] >= 50*time.Millisecond
	}, 30*time.Second, time.Millisecond, "this process's CPU time never grew (sum %d)", sum)
	used := now.since(before)
	assert.GreaterOrEqual(t, used.Seconds[procLab], 0.05)
	assert.Contains(t, used.Seconds, procManager)
	assert.Greater(t, used.MachineBusy, 0.0)
	assert.LessOrEqual(t, used.MachineBusy, 1.0)
}

func TestCPUFiguresNameThePhaseAndItsFloor(t *testing.T) {
	r := Result{Completed: []string{phaseEnrollment, phaseClaims}, CPU: map[string]PhaseCPU{
		phaseEnrollment:             {MachineBusy: 0.994, Seconds: map[string]float64{procManager: 27.2, procAPIServer: 61, procLab: 24, procEtcd: 9.6}},
		floorPhase(phaseEnrollment): {MachineBusy: 0.47},
		phaseClaims:                 {MachineBusy: 1},
	}}
	assert.Equal(t, "99% (floor 47%)", r.busyFigure(phaseEnrollment))
	assert.Equal(t, "100%", r.busyFigure(phaseClaims), "a run whose claims floor was not sampled")
	assert.Equal(t, "not measured (run before the CPU figures)", r.busyFigure(phaseRelease))
	assert.Equal(t, "kube-apiserver 61, manager 27, lab 24, etcd 10", r.cpuFigure(phaseEnrollment))
}
