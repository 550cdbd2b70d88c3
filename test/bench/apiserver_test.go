package bench

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiserverCounts is the apiserver's own request count (apiserver_request_total) by
// "VERB resource[/subresource]", from every client: the manager, the lab's boot service and
// this benchmark (whose own requests are Endpoint creates, claim creates and deletes, and its
// watches). It says where the manager's requests go, which the manager's client metrics
// (method and code only) cannot.
func apiserverCounts(ctx context.Context, cfg *rest.Config) (map[string]float64, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	data, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiserver /metrics: %w", err)
	}
	return requestsByResource(metrics(data)), nil
}

// requestsByResource folds apiserver_request_total samples into "VERB resource[/sub]" keys,
// leaving out WATCH (long-lived) and the apiserver's own resources of no interest here.
func requestsByResource(m metrics) map[string]float64 {
	out := map[string]float64{}
	const name = "apiserver_request_total{"
	for _, line := range strings.Split(string(m), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok {
			continue
		}
		end := strings.Index(rest, "}")
		if end < 0 {
			continue
		}
		labels := map[string]string{}
		for _, kv := range strings.Split(rest[:end], ",") {
			k, v, ok := strings.Cut(kv, "=")
			if ok {
				labels[k] = strings.Trim(v, `"`)
			}
		}
		var v float64
		if _, err := fmt.Sscan(strings.TrimSpace(rest[end+1:]), &v); err != nil || labels["resource"] == "" {
			continue
		}
		if labels["verb"] == "WATCH" || labels["group"] != "metal.ironfleet.dev" && labels["resource"] != "secrets" && labels["resource"] != "events" {
			continue
		}
		key := labels["verb"] + " " + labels["resource"]
		if s := labels["subresource"]; s != "" {
			key += "/" + s
		}
		out[key] += v
	}
	return out
}

// perServer is after − before, per server: what is at least 0.05 a server, to two places, and
// every LIST, to four (lists should be below 0.01 a server: at start and resync only).
func perServer(before, after map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		d := (v - before[k]) / float64(n)
		switch {
		case strings.HasPrefix(k, "LIST ") && d > 0:
			out[k] = math.Round(d*1e4) / 1e4
		case d >= 0.05:
			out[k] = math.Round(d*100) / 100
		}
	}
	return out
}

// topRequests renders a breakdown largest first, e.g. "PATCH servers/status 5.02, ...".
func topRequests(m map[string]float64) string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			if m[a] > m[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
