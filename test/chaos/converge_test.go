package chaos

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// converge waits until the fleet is in its end state (convergence), observing — and so
// checking the invariants — all the while. It fails the test when the fleet does not get there.
func converge(ctx context.Context, t *testing.T, l *lab.Lab, obs *observer, cfg config, pprofAddr string) {
	t.Helper()
	start := time.Now()
	var last []string
	lastLog, dumped := start, false
	err := lab.Poll(ctx, cfg.convergeTimeout, "every server to converge", func() (bool, error) {
		if !dumped && time.Since(start) > 20*time.Second {
			dumped = true
			dump := filepath.Join(l.Opts.Dir, "manager-goroutines.txt")
			if err := dumpGoroutines(pprofAddr, dump); err != nil {
				t.Logf("goroutine dump: %v", err)
			} else {
				t.Logf("not converged after 20 s: the manager's goroutines are in %s", dump)
			}
		}
		snap, err := obs.observe(ctx)
		if err != nil {
			return false, nil // the apiserver is busy: look again
		}
		last = convergence(snap, l, cfg.servers)
		if time.Since(lastLog) > 15*time.Second {
			lastLog = time.Now()
			t.Logf("converging: %d problems left, servers %s", len(last), formatStates(obs.states()))
		}
		return len(last) == 0, nil
	})
	if err == nil {
		t.Logf("converged %v after the last restart", time.Since(start).Round(100*time.Millisecond))
		return
	}
	t.Errorf("the fleet did not converge within %v after the last restart:\n  %s", cfg.convergeTimeout, strings.Join(last, "\n  "))
	explainServers(t, l, obs, strings.Join(last, "\n"))
}

// convergence lists what keeps the fleet from its end state; none when it has converged.
func convergence(s *snapshot, l *lab.Lab, servers int) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if len(s.Servers) != servers {
		add("%d servers exist, not %d", len(s.Servers), servers)
	}
	for _, sm := range s.Maints {
		add("maintenance %s/%s still exists (%s)", sm.Namespace, sm.Name, sm.Status.State)
	}
	byName := map[string]*m.Server{}
	for i := range s.Servers {
		byName[s.Servers[i].Name] = &s.Servers[i]
	}
	held := map[string]*m.ServerClaim{}
	for i := range s.Claims {
		c := &s.Claims[i]
		key := c.Namespace + "/" + c.Name
		if !c.DeletionTimestamp.IsZero() {
			add("claim %s is still being deleted (%s)", key, c.Status.Phase)
			continue
		}
		if c.Status.Phase != m.ClaimPhaseBound || c.Status.ServerRef == nil || !meta.IsStatusConditionTrue(c.Status.Conditions, m.ConditionReady) {
			add("claim %s is %s, Ready %s", key, c.Status.Phase, describeCondition(meta.FindStatusCondition(c.Status.Conditions, m.ConditionReady)))
			continue
		}
		srv := byName[c.Status.ServerRef.Name]
		if srv == nil || srv.Spec.ServerClaimRef == nil || !refersTo(srv.Spec.ServerClaimRef, c) {
			add("claim %s: server %s does not hold it", key, c.Status.ServerRef.Name)
			continue
		}
		held[srv.Name] = c
	}
	for _, srv := range s.Servers {
		want := m.ServerStateAvailable
		c := held[srv.Name]
		if c != nil {
			want = m.ServerStateReserved
		}
		if srv.Status.State != want || srv.Spec.MaintenanceRef != nil {
			add("server %s is %s (want %s): %s", srv.Name, srv.Status.State, want, describeCondition(meta.FindStatusCondition(srv.Status.Conditions, m.ConditionReady)))
			continue
		}
		if !meta.IsStatusConditionTrue(srv.Status.Conditions, m.ConditionDiscovered) {
			add("server %s is %s but not Discovered", srv.Name, want)
		}
		if c != nil && c.Spec.Image != "" && !meta.IsStatusConditionTrue(srv.Status.Conditions, m.ConditionProvisioned) {
			add("server %s holds claim %s/%s but is not Provisioned", srv.Name, c.Namespace, c.Name)
		}
		wantPower := "Off"
		if c != nil && orDefault(c.Spec.Power, m.PowerOn) == m.PowerOn {
			wantPower = "On"
		}
		sim, id := simSystem(l, &srv)
		if got := sim.PowerState(id); got != wantPower {
			add("server %s (%s, %s) is powered %q at its BMC, want %s (status says %s)", srv.Name, srv.Status.State, srv.Status.LastTransitionReason, got, wantPower, srv.Status.PowerState)
		}
		// The claim's image was installed by a probe boot, and the server boots its disk from
		// then on, whatever its power.
		if c != nil && c.Spec.Image != "" {
			if !bootedImage(l, srv.Name, c) {
				add("server %s holds claim %s/%s but the boot service never booted the install of %s", srv.Name, c.Namespace, c.Name, c.Spec.Image)
			}
			if last := srv.Status.LastInstall; last == nil || !last.Succeeded || last.Image != c.Spec.Image {
				add("server %s holds claim %s/%s but its last install is %+v", srv.Name, c.Namespace, c.Name, last)
			}
			if target, once := sim.BootOverride(id); !bootsItsDisk(sim, id, wantPower) {
				add("server %s holds claim %s/%s (installed) but its boot is %s/%s, not the disk for good", srv.Name, c.Namespace, c.Name, target, once)
			}
		}
	}
	for _, b := range s.Boots {
		add("probe boot configuration %s/%s (%s, server %s) is left over", b.Namespace, b.Name, b.Spec.Purpose, b.Spec.ServerRef.Name)
	}
	for _, sec := range s.Secrets {
		probe := sec.Labels[m.LabelServer] != "" // a probe boot's ignition (older ones: owned by their Server)
		for _, ref := range sec.OwnerReferences {
			probe = probe || ref.Kind == "Server"
		}
		if probe {
			add("ignition Secret %s/%s is left over", sec.Namespace, sec.Name)
		}
	}
	return out
}

// bootsItsDisk says whether an installed server's system boots its disk: a Continuous override to
// Hdd; or, behind a BMC that offers no Continuous (Supermicro's), a one-time override to Hdd
// waiting for the next power-on, or, once it was used, the last power-on booted the disk.
func bootsItsDisk(sim *bmcsim.BMC, id, wantPower string) bool {
	target, once := sim.BootOverride(id)
	switch {
	case target == bmcsim.BootHdd && once == "Continuous":
		return true
	case !sim.Quirks().BootOnceOnly:
		return false
	case target == bmcsim.BootHdd && once == "Once":
		return true
	}
	log := sim.BootLog(id)
	return wantPower == "On" && len(log) > 0 && log[len(log)-1].Boot == bmcsim.BootHdd
}

// simSystem is the server's simulated BMC and system Id there (found by BMC and Id: many of
// the lab's systems have no UUID that could say).
func simSystem(l *lab.Lab, s *m.Server) (*bmcsim.BMC, string) {
	uri := strings.TrimSuffix(s.Spec.SystemURI, "/")
	id := uri[strings.LastIndex(uri, "/")+1:]
	if _, sim, ok := l.HostOf(s); ok {
		return sim, id
	}
	return &bmcsim.BMC{}, id
}

// bootedImage says whether the boot service served the claim's image to the server since the
// claim was bound.
func bootedImage(l *lab.Lab, server string, c *m.ServerClaim) bool {
	since := c.CreationTimestamp.Time
	if c.Status.BoundAt != nil {
		since = c.Status.BoundAt.Time
	}
	since = since.Add(-time.Second) // a second-precision stamp
	for _, b := range l.Boots.Boots() {
		if b.Server == server && b.Purpose == m.BootPurposeProvisioning && b.Image == c.Spec.Image && b.Err == nil && !b.Time.Before(since) {
			return true
		}
	}
	return false
}

// checkImageBoots checks that every claim seen Ready with an image (power On) had its server
// PXE-booted while it held the claim, as the server's BMC recorded it: from a little before the
// watch first saw the server hold the claim (the watch may lag the write) to the claim's
// deletion.
func checkImageBoots(l *lab.Lab, obs *observer, claims []readyClaim) []violation {
	servers := map[string]*m.Server{}
	for _, s := range obs.servers() {
		servers[s.Name] = s
	}
	obs.mu.Lock()
	heldSince := maps.Clone(obs.wipes.heldSince)
	obs.mu.Unlock()
	var out []violation
	for _, c := range claims {
		s := servers[c.server]
		if s == nil {
			continue
		}
		from := c.boundAt.Add(-time.Second)
		if at, ok := heldSince[c.server+"/"+c.uid]; ok {
			from = at.Add(-2 * time.Second)
		}
		until := c.deleted
		if until.IsZero() {
			until = time.Now()
		}
		sim, id := simSystem(l, s)
		booted := false
		var seen []string
		for _, ev := range sim.BootLog(id) {
			if ev.Boot == bmcsim.BootPxe && !ev.Time.Before(from) && !ev.Time.After(until) {
				booted = true
				break
			}
			if ev.Time.After(from.Add(-10*time.Second)) && ev.Time.Before(until.Add(10*time.Second)) {
				seen = append(seen, ev.Time.Format("15:04:05.000")+" "+string(ev.Boot))
			}
		}
		if !booted {
			out = append(out, violation{At: c.ready, Invariant: invNeverBooted, Detail: fmt.Sprintf(
				"claim %s was Ready on server %s (held from %s), but the server did not PXE-boot before the claim was deleted (%s); power-ons around: [%s]",
				c.name, c.server, from.Format("15:04:05.000"), until.Format("15:04:05.000"), strings.Join(seen, "; "))})
		}
	}
	return out
}

func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}
