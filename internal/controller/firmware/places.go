package firmware

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// admissions are the servers this manager admitted to a baseline's rollout that the cache may
// not show yet: with them, two reconciles back to back never both take the last free place.
// They are a lower bound the cache's own view completes (a restarted manager starts with an
// empty set and a synced cache).
type admissions struct {
	mu sync.Mutex
	by map[string]map[string]bool // baseline → servers
}

func (a *admissions) add(baseline, server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.by == nil {
		a.by = map[string]map[string]bool{}
	}
	if a.by[baseline] == nil {
		a.by[baseline] = map[string]bool{}
	}
	a.by[baseline][server] = true
}

// done forgets server: its update no longer holds a place, as written.
func (a *admissions) done(server string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.by {
		delete(s, server)
	}
}

func (a *admissions) of(baseline string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.by[baseline]))
	for s := range a.by[baseline] {
		out = append(out, s)
	}
	return out
}

// holdsPlace says whether an update in state keeps its server out of service for its
// baseline: under way, or Failed (the server stays in maintenance).
func holdsPlace(u *metalv1alpha1.FirmwareUpdate) bool {
	if u == nil {
		return false
	}
	switch u.State {
	case "", metalv1alpha1.FirmwareUpdateSucceeded, metalv1alpha1.FirmwareUpdateWithdrawn:
		return false
	case metalv1alpha1.FirmwareUpdateWaiting:
		return u.Maintenance != nil // retried: still in the maintenance it failed in
	}
	return true
}

// place says whether baseline b's rollout has a place for server, and if not why (a reason
// and a message): it is not paused, fewer of its servers than maxUnavailable are out of service
// for it, and fewer than maxFailures have a failed update (until each is retried, or given back).
// The controller runs one worker (SetupWithManager): places are counted and taken by one
// reconcile at a time.
func (r *Reconciler) place(ctx context.Context, b *metalv1alpha1.FirmwareBaseline, server string) (bool, string, string, error) {
	if b.Spec.Rollout.Paused {
		return false, metalv1alpha1.ReasonRolloutPaused, "baseline " + b.Name + "'s rollout is paused (rollout.paused)", nil
	}
	var list metalv1alpha1.ServerFirmwareList
	if err := r.Client.List(ctx, &list); err != nil {
		return false, "", "", err
	}
	holding, listed := map[string]bool{}, map[string]bool{}
	failed := 0
	for i := range list.Items {
		listed[list.Items[i].Name] = true
		u := list.Items[i].Status.Update
		if u == nil || u.Baseline != b.Name {
			continue
		}
		if holdsPlace(u) {
			holding[list.Items[i].Name] = true
		}
		if u.State == metalv1alpha1.FirmwareUpdateFailed {
			failed++
		}
	}
	// Servers its maintenances hold count whatever their ServerFirmwares say: a maintenance
	// made just before a write that did not land, or before a restart.
	var maints metalv1alpha1.ServerMaintenanceList
	if err := r.Client.List(ctx, &maints, client.InNamespace(r.Update.Namespace), client.MatchingLabels{LabelBaseline: b.Name}); err != nil {
		return false, "", "", err
	}
	for _, sm := range maints.Items {
		if s := sm.Labels[metalv1alpha1.LabelServer]; s != "" && listed[s] {
			holding[s] = true
		}
	}
	for _, s := range r.admitted.of(b.Name) {
		if !listed[s] {
			r.admitted.done(s) // its Server, and with it its ServerFirmware, was deleted
			continue
		}
		holding[s] = true
	}
	delete(holding, server)
	maxFailures := max(int(b.Spec.Rollout.MaxFailures), 1)
	if failed >= maxFailures {
		return false, metalv1alpha1.ReasonRolloutStopped, fmt.Sprintf("the rollout of baseline %s is stopped: rollout.maxFailures (%d) of its servers failed; "+
			"retry them (%s) or change what it wants of them", b.Name, maxFailures, metalv1alpha1.AnnotationRetryUpdate), nil
	}
	limit, err := maxUnavailable(b)
	if err != nil {
		return false, "", "", err
	}
	if len(holding) >= limit {
		// No count in the message: it would rewrite every waiting server at every turn.
		return false, metalv1alpha1.ReasonWaitingForTurn, fmt.Sprintf("waiting for its turn: rollout.maxUnavailable (%d) of baseline %s's servers are out of service for it", limit, b.Name), nil
	}
	return true, "", "", nil
}

// maxUnavailable is the baseline's rollout.maxUnavailable as a number of servers: a percentage
// of those it matched, rounded down, at least 1.
func maxUnavailable(b *metalv1alpha1.FirmwareBaseline) (int, error) {
	v := b.Spec.Rollout.MaxUnavailable
	if v == nil {
		return 1, nil
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(b.Status.Matched), false)
	if err != nil {
		return 0, fmt.Errorf("baseline %s: rollout.maxUnavailable: %w", b.Name, err)
	}
	return max(n, 1), nil
}
