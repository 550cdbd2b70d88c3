package firmware

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// baselineServers is, per FirmwareBaseline, how many of the servers it selects stand where: one
// series per baseline and count (baselines are few: the cardinality is theirs times seven).
var baselineServers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "ironfleet_firmware_baseline_servers",
	Help: "Servers a FirmwareBaseline selects, by where they stand: matched, compliant, updating, failed, unsupported, conflicting, and stopped (1 while its rollout is stopped by maxFailures).",
}, []string{"baseline", "count"})

func init() { metrics.Registry.MustRegister(baselineServers) }

// recordBaseline sets a baseline's series from its status.
func recordBaseline(b *metalv1alpha1.FirmwareBaseline) {
	st := b.Status
	stopped := 0.0
	if st.Rollout == metalv1alpha1.RolloutStopped {
		stopped = 1
	}
	for count, v := range map[string]float64{
		"matched": float64(st.Matched), "compliant": float64(st.Compliant), "updating": float64(st.Updating),
		"failed": float64(st.Failed), "unsupported": float64(st.Unsupported), "conflicting": float64(st.Conflicting), "stopped": stopped,
	} {
		baselineServers.WithLabelValues(b.Name, count).Set(v)
	}
}

// forgetBaseline removes a deleted baseline's series.
func forgetBaseline(name string) {
	baselineServers.DeletePartialMatch(prometheus.Labels{"baseline": name})
}
