package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The object-model floor's and the scaling's arithmetic, in make test like the rest.

func TestObjectModelFloorMakesItsListOncePerItem(t *testing.T) {
	assert.Len(t, objectModelRequests[phaseEnrollment], 13)
	assert.Len(t, objectModelRequests[phaseClaims], 5)
	assert.Len(t, objectModelRequests[phaseRelease], 10)
	enrollment := expectedObjectModelCounts(phaseEnrollment, 10)
	assert.Equal(t, 10.0, enrollment["POST endpoints"])
	assert.Equal(t, 20.0, enrollment["PATCH servers/status"], "Discovery, then Available with the inventory")
	assert.Equal(t, 10.0, enrollment["DELETE secrets"])
	release := expectedObjectModelCounts(phaseRelease, 10)
	assert.Equal(t, 5.0, release["DELETE serverclaims"], "half the fleet is claimed and released")
	assert.Equal(t, 10.0, release["PATCH servers/status"])

	claims := expectedObjectModelCounts(phaseClaims, 4)
	assert.Empty(t, countMismatch(claims, claims))
	counted := map[string]float64{"POST serverclaims": 2, "PUT serverclaims": 2, "PATCH servers": 2, "PATCH servers/status": 3, "LIST servers": 1}
	assert.Equal(t, "PATCH serverclaims/status 0 (want 2), PATCH servers/status 3 (want 2), LIST servers 1 (want 0)", countMismatch(claims, counted))
}

func TestEachPhaseIsDividedByItsObjectModelFloor(t *testing.T) {
	assert.Equal(t, 1.5, ratio(30, 20))
	assert.Zero(t, ratio(30, 0), "no floor measured")
	assert.Zero(t, ratio(0, 20), "phase not reached")

	r := Result{Servers: 1000, Completed: []string{phaseEnrollment, phaseClaims, phaseRelease, phaseIdle, phaseSingleClaims},
		Enrollment: Enrollment{Seconds: 30, ObjectModelFloorSeconds: 20, ObjectModelFloorRequestsPerServer: 13, OverObjectModelFloor: 1.5},
		Claims: Claims{AllBoundSeconds: 6, ObjectModelFloorSeconds: 5, ObjectModelFloorRequestsPerClaim: 5, OverObjectModelFloor: 1.2,
			SingleCount: 100, SingleP50Seconds: 0.2, SingleP99Seconds: 0.8, SingleMaxSeconds: 1.4},
	}
	readme := figuresMarkdown([]Result{r})
	for _, want := range []string{
		"| object-model floor: enrollment | 20.0 s (13 requests/server) |",
		"| enrollment ÷ object-model floor | 1.50 |",
		"| object-model floor: claims | 5.0 s (5 requests/claim) |",
		"| object-model floor: release | not measured (run before the object-model floors) |",
		"| release ÷ object-model floor | no floor measured |",
		"| one claim at a time, idle fleet: → Bound p50 / p99 / max | 0.20 / 0.80 / 1.40 s (100 claims) |",
		"| enrollment ÷ object-model floor ≤ 1.3 | 1.50 ✗ missed |",
		"| all claims Bound ÷ object-model floor ≤ 1.3 | 1.20 ✓ |",
		"| release ÷ object-model floor ≤ 1.3 | no floor measured ✗ missed |",
		"| one claim at a time, idle fleet: p99 ≤ 1 s | 0.80 s ✓ |",
	} {
		assert.Contains(t, readme, want)
	}
	old := figuresMarkdown([]Result{{Servers: 1000, Completed: []string{phaseEnrollment, phaseClaims, phaseRelease, phaseIdle}}})
	assert.Contains(t, old, "| one claim at a time, idle fleet: p99 ≤ 1 s | not reached  |", "a run before the single claims")
}

func TestSingleClaimsReportNearestRankP50P99AndMax(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*10*time.Millisecond)
	}
	var c Claims
	c.setSingle(ds)
	assert.Equal(t, 100, c.SingleCount)
	assert.InDelta(t, 0.50, c.SingleP50Seconds, 1e-9)
	assert.InDelta(t, 0.99, c.SingleP99Seconds, 1e-9)
	assert.InDelta(t, 1.00, c.SingleMaxSeconds, 1e-9)
	assert.Equal(t, 25, singleClaims(50), "half of a small fleet")
	assert.Equal(t, 100, singleClaims(10000))
}

func TestScalingDividesTheOperatorsGrowthByTheObjectModelFloors(t *testing.T) {
	all := []string{phaseEnrollment, phaseClaims, phaseRelease}
	small := Result{Servers: 1000, Commit: "aaa", Completed: all,
		Enrollment: Enrollment{Seconds: 100, ObjectModelFloorSeconds: 20},
		Claims:     Claims{AllBoundSeconds: 10, ObjectModelFloorSeconds: 5},
		Release:    Release{Seconds: 50, ObjectModelFloorSeconds: 10},
		CPU: map[string]PhaseCPU{
			phaseEnrollment: {Seconds: map[string]float64{procManager: 50}},
			phaseClaims:     {Seconds: map[string]float64{procManager: 8}},
			phaseRelease:    {Seconds: map[string]float64{procManager: 20}},
		}}
	large := Result{Servers: 10000, Commit: "bbb", Completed: []string{phaseEnrollment, phaseClaims},
		Enrollment: Enrollment{Seconds: 1200, ObjectModelFloorSeconds: 200},
		Claims:     Claims{AllBoundSeconds: 110, ObjectModelFloorSeconds: 50},
		CPU: map[string]PhaseCPU{
			phaseEnrollment: {Seconds: map[string]float64{procManager: 600}},
			phaseClaims:     {Seconds: map[string]float64{procManager: 80}},
		}}
	assert.Nil(t, computeScaling([]Result{small}), "one size alone has no scaling")
	s := computeScaling([]Result{small, large})
	require.NotNil(t, s)
	assert.Equal(t, "aaa", s.FromCommit)
	assert.Equal(t, "bbb", s.ToCommit)
	assert.InDelta(t, 12, s.Enrollment.TimeRatio, 1e-9)
	assert.InDelta(t, 10, s.Enrollment.ObjectModelFloorTimeRatio, 1e-9)
	assert.InDelta(t, 1.2, s.Enrollment.TimeRatioOverObjectModelFloor, 1e-9)
	assert.InDelta(t, 1.2, s.Enrollment.ManagerCPUSecondsPerServerRatio, 1e-9, "0.06 s a server against 0.05")
	assert.InDelta(t, 1.1, s.Claims.TimeRatioOverObjectModelFloor, 1e-9)
	assert.InDelta(t, 1.0, s.Claims.ManagerCPUSecondsPerServerRatio, 1e-9)
	assert.Equal(t, ScalingPhase{}, s.Release, "the large run did not reach the release")

	// Both reports get it, whichever is written last, and the README shows it.
	dir := t.TempDir()
	require.NoError(t, writeDocs(dir, small))
	require.NoError(t, writeDocs(dir, large))
	for _, name := range []string{"1000.json", "10000.json"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		var got Result
		require.NoError(t, json.Unmarshal(data, &got))
		require.NotNil(t, got.Scaling, name)
		assert.InDelta(t, 1.2, got.Scaling.Enrollment.TimeRatioOverObjectModelFloor, 1e-9, name)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(readme), "| operator's ÷ object-model floor's ≤ 1.15 | 1.20 ✗ missed | 1.10 ✓ | not measured |")
	assert.Contains(t, string(readme), "| manager CPU-seconds per server ≤ 1.15 | 1.20 ✗ missed | 1.00 ✓ | not measured |")
}

func TestEveryListIsCountedPerServerHoweverFew(t *testing.T) {
	got := perServer(map[string]float64{"LIST servers": 1}, map[string]float64{"LIST servers": 4, "LIST bmcs": 0, "GET servers": 3, "POST servers": 1000}, 1000)
	assert.Equal(t, map[string]float64{"LIST servers": 0.003, "POST servers": 1}, got, "a LIST at 0.003 a server is kept; a GET is not")
}

func TestSmallOrDirtyRunsNeverWriteDocsBench(t *testing.T) {
	docs := filepath.Join("/repo", "docs", "bench")
	scratch := filepath.Join(os.TempDir(), "ironfleet-bench")
	assert.Equal(t, docs, outputDir("/repo", true, "abc", ""))
	assert.Equal(t, scratch, outputDir("/repo", true, "abc-dirty", ""), "a dirty tree's figures are no commit's")
	assert.Equal(t, scratch, outputDir("/repo", false, "abc", ""), "a small run")
	assert.Equal(t, "/elsewhere", outputDir("/repo", false, "abc-dirty", "/elsewhere"), "BENCH_OUT says where")
}

// TestFiguresInDocsBenchDoNotDirtyTheTree: make bench writes its figures into docs/bench one
// benchmark after another; the next one's commit is still clean. A change anywhere else is not.
func TestFiguresInDocsBenchDoNotDirtyTheTree(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "git %v: %s", args, out)
	}
	git("init", "-q")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, "docs", "bench"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "docs", "bench", "boot.json"), []byte("{}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main\n"), 0o644))
	git("add", ".")
	git("commit", "-q", "-m", "one")
	clean := commit(repo)
	require.Len(t, clean, 12)

	require.NoError(t, os.WriteFile(filepath.Join(repo, "docs", "bench", "boot.json"), []byte(`{"new":1}`+"\n"), 0o644))
	assert.Equal(t, clean, commit(repo), "new figures in docs/bench")
	require.NoError(t, os.WriteFile(filepath.Join(repo, "main.go"), []byte("package main // changed\n"), 0o644))
	assert.Equal(t, clean+"-dirty", commit(repo), "a change of the code")
}
