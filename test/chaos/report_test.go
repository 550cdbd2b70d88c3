package chaos

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/lab"
)

// report logs what the run observed, and in which states the kills found the fleet.
func report(t *testing.T, obs *observer, kills []kill, runs *wipeRuns, violations []violation) {
	t.Helper()
	atKill := map[m.ServerState]int{}
	for _, k := range kills {
		for st, n := range k.states {
			if n > 0 {
				atKill[st]++
			}
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	n := time.Duration(max(obs.snapshots, 1))
	t.Logf("observed %d snapshots (%d failed to read; %v each on average, of which listing Servers %v; %v at most), %d server versions, %d watch gaps; %d releases followed to Available; %d wipe boots; %d violations",
		obs.snapshots, obs.snapErrors, (obs.snapTime / n).Round(time.Millisecond), (obs.snapServers / n).Round(time.Millisecond), obs.snapMax.Round(time.Millisecond),
		obs.versions, obs.watchGaps, len(obs.wipes.Releases), len(runs.all()), len(violations))
	t.Logf("kills that found at least one server in each state: %s", formatStates(atKill))
}

// summarize groups violations by invariant: how many, and the first few of each.
func summarize(vs []violation, each int) string {
	byInv := map[string][]violation{}
	for _, v := range vs {
		byInv[v.Invariant] = append(byInv[v.Invariant], v)
	}
	var b strings.Builder
	for _, inv := range sortedKeys(byInv) {
		list := byInv[inv]
		fmt.Fprintf(&b, "  %s: %d\n", inv, len(list))
		for i, v := range list {
			if i == each {
				fmt.Fprintf(&b, "    … and %d more\n", len(list)-each)
				break
			}
			fmt.Fprintf(&b, "    %s  %s\n", v.At.Format("15:04:05.000"), v.Detail)
		}
	}
	return b.String()
}

// serverNames finds the servers a message names.
var serverNames = regexp.MustCompile(`server ([0-9a-f-]{36}|lab-bmc-[0-9]+-[a-z0-9]+)\b`)

// explain tells what is known of a server: its transitions, the lab's boots of it, its BMC's
// power-ons.
func explain(l *lab.Lab, obs *observer, name string) string {
	var b strings.Builder
	obs.mu.Lock()
	hist := append([]string(nil), obs.wipes.history[name]...)
	srv := obs.current[name]
	obs.mu.Unlock()
	fmt.Fprintf(&b, "    transitions: %s\n", strings.Join(hist, " → "))
	var boots []string
	for _, bt := range l.Boots.Boots() {
		if bt.Server == name {
			boots = append(boots, fmt.Sprintf("%s %s err=%v", bt.Time.Format("15:04:05.000"), bt.Purpose, bt.Err))
		}
	}
	if len(boots) > 6 {
		boots = boots[len(boots)-6:]
	}
	fmt.Fprintf(&b, "    last boots served: %s\n", strings.Join(boots, "; "))
	if srv != nil {
		sim, id := simSystem(l, srv)
		var ons []string
		for _, ev := range sim.BootLog(id) {
			ons = append(ons, ev.Time.Format("15:04:05.000")+" "+string(ev.Boot))
		}
		if len(ons) > 6 {
			ons = ons[len(ons)-6:]
		}
		target, once := sim.BootOverride(id)
		fmt.Fprintf(&b, "    BMC power-ons: %s; power %s, next boot %s/%s\n", strings.Join(ons, "; "), sim.PowerState(id), target, once)
		fmt.Fprintf(&b, "    status: %s (%s) since %v, probe boot %q, power delivery %+v, last install %+v\n",
			srv.Status.State, srv.Status.LastTransitionReason, srv.Status.LastTransitionTime, srv.Status.ProbeBoot, srv.Status.PowerDelivery, srv.Status.LastInstall)
		for _, c := range srv.Status.Conditions {
			fmt.Fprintf(&b, "    %s=%s %s at %s: %s\n", c.Type, c.Status, c.Reason, c.LastTransitionTime.Format("15:04:05"), c.Message)
		}
	}
	return b.String()
}

// checkManagerLog fails on a manager that panicked or exited by itself (it is only ever killed).
func checkManagerLog(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "manager: ") || strings.HasPrefix(line, "fatal error:") {
			t.Errorf("the manager did not just get killed: %s", line)
		}
	}
}

func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// dumpGoroutines saves the manager's goroutine stacks.
func dumpGoroutines(addr, path string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=2")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// explainServers logs what is known of the (first five) servers named in text.
func explainServers(t *testing.T, l *lab.Lab, obs *observer, text string) {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range serverNames.FindAllStringSubmatch(text, -1) {
		if !seen[name[1]] && len(seen) < 5 {
			seen[name[1]] = true
			t.Logf("server %s:\n%s", name[1], explain(l, obs, name[1]))
		}
	}
}

// claimNames finds the workload's claims a message names.
var claimNames = regexp.MustCompile(`(chaos-[0-9]{4})`)

// explainClaims tells what the workload did with the first few claims the text names.
func explainClaims(t *testing.T, wl *workload, text string) {
	t.Helper()
	seen := map[string]bool{}
	for _, name := range claimNames.FindAllStringSubmatch(text, -1) {
		if !seen[name[1]] && len(seen) < 5 {
			seen[name[1]] = true
			t.Logf("claim %s: %s", name[1], wl.history(name[1]))
		}
	}
}

// formatKills lists when the manager was killed and when it was started again.
func formatKills(kills []kill) string {
	parts := make([]string, len(kills))
	for i, k := range kills {
		parts[i] = k.at.Format("15:04:05.000") + " → " + k.restarted.Format("05.000")
	}
	return strings.Join(parts, ", ")
}
