package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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
