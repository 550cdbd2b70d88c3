package bench

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// Result is one benchmark run, as written to docs/bench/<N>.json.
type Result struct {
	Servers  int      `json:"servers"`
	Date     string   `json:"date"`
	Commit   string   `json:"commit"`
	Machine  Machine  `json:"machine"`
	Settings Settings `json:"settings"`

	Enrollment          Enrollment `json:"enrollment"`
	Floor               Floor      `json:"floor"`
	EnrollmentOverFloor float64    `json:"enrollmentOverFloor"`
	Claims              Claims     `json:"claims"`
	Release             Release    `json:"release"`
	// LegacyReleaseSeconds is where runs before the release floor kept release's time; loading
	// such a run moves it to Release.Seconds.
	LegacyReleaseSeconds float64 `json:"releaseSeconds,omitempty"`
	Cost                 Cost    `json:"cost"`
	// APIServerRequestsPerServer is, per phase (and per object-model floor, "object-model floor
	// enrollment", …), the apiserver's count of requests by "VERB resource[/subresource]" (all
	// clients, watches left out) over N; every LIST is kept (perServer).
	APIServerRequestsPerServer map[string]map[string]float64 `json:"apiserverRequestsPerServer,omitempty"`
	// CPU is where the machine's CPU went, per phase, and per floor ("floor enrollment", …,
	// "object-model floor enrollment", …).
	CPU map[string]PhaseCPU `json:"cpu,omitempty"`
	// ObjectModelFloorMismatch says, per phase, how the apiserver's count of the object-model
	// floor's requests differed from its list (objectModelRequests); absent when it did not.
	ObjectModelFloorMismatch map[string]string `json:"objectModelFloorMismatch,omitempty"`
	// Scaling compares the N = 1,000 and N = 10,000 runs, when both are in the directory.
	Scaling *Scaling `json:"scaling,omitempty"`
	// Completed lists the phases measured, in order: a run stopped part-way (a deadline, a
	// person) still leaves the figures it got, and says which.
	Completed []string `json:"completed"`
}

// Phases of a run, in order.
const (
	phaseEnrollment = "enrollment"
	phaseClaims     = "claims"
	phaseRelease    = "release"
	phaseIdle       = "idle"
	// phaseSingleClaims is claims made one after another in the idle fleet.
	phaseSingleClaims = "single claims"
)

func (r Result) has(phase string) bool { return slices.Contains(r.Completed, phase) }

// ifHas is v when the phase was measured, else a dash.
func (r Result) ifHas(phase, v string) string {
	if r.has(phase) {
		return v
	}
	return "— (not reached)"
}

// Machine is where the run was made.
type Machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB int    `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

// Settings are the knobs the run used; the manager flags are the ones it was started with.
type Settings struct {
	KubeAPIQPS         float64 `json:"kubeApiQPS"`
	KubeAPIBurst       int     `json:"kubeApiBurst"`
	DefaultConcurrency int     `json:"defaultConcurrency"`
	ResyncPeriod       string  `json:"bmcResyncPeriod"`
	IdleWindow         string  `json:"idleWindow"`
	BMCs               int     `json:"bmcs"`
	// LabGOGC is the garbage-collection target of kube-apiserver, etcd and the simulated fleet,
	// not the manager's (0: Go's default, 100).
	LabGOGC int `json:"labGOGC,omitempty"`
	// LabMemoryLimitMiB is their soft memory limit (GOMEMLIMIT; 0: none).
	LabMemoryLimitMiB int      `json:"labMemoryLimitMiB,omitempty"`
	ManagerFlags      []string `json:"managerFlags"`
}

func (s Settings) labGOGC() int {
	if s.LabGOGC <= 0 {
		return 100
	}
	return s.LabGOGC
}

func (s Settings) memoryLimit() string {
	if s.LabMemoryLimitMiB <= 0 {
		return ""
	}
	return fmt.Sprintf(" with a %d MiB soft memory limit", s.LabMemoryLimitMiB)
}

// Enrollment is N Endpoints → N Servers Available.
type Enrollment struct {
	Seconds          float64 `json:"seconds"`
	ServersPerSecond float64 `json:"serversPerSecond"`
	// ObjectModelFloorSeconds is a plain client making the object model's least requests for
	// N servers (ObjectModelFloorRequestsPerServer each: objectModelRequests), with the
	// manager's QPS and workers; OverObjectModelFloor is Seconds ÷ ObjectModelFloorSeconds.
	ObjectModelFloorSeconds           float64 `json:"objectModelFloorSeconds,omitempty"`
	ObjectModelFloorRequestsPerServer int     `json:"objectModelFloorRequestsPerServer,omitempty"`
	OverObjectModelFloor              float64 `json:"overObjectModelFloor,omitempty"`
}

// Floor is the plain client loop: the minimum writes of an enrollment, same QPS and workers.
type Floor struct {
	Seconds         float64 `json:"seconds"`
	WritesPerServer int     `json:"writesPerServer"`
	Workers         int     `json:"workers"`
}

// Claims are N/2 claims created at once, then released.
type Claims struct {
	Count           int     `json:"count"`
	P50Seconds      float64 `json:"p50Seconds"`
	P95Seconds      float64 `json:"p95Seconds"`
	P99Seconds      float64 `json:"p99Seconds"`
	AllBoundSeconds float64 `json:"allBoundSeconds"`
	// FloorSeconds is the plain client binding as many claims (claim status and server
	// reference: FloorWritesPerClaim), with the manager's QPS and workers; OverFloor is
	// AllBoundSeconds ÷ FloorSeconds.
	FloorSeconds        float64 `json:"floorSeconds,omitempty"`
	FloorWritesPerClaim int     `json:"floorWritesPerClaim,omitempty"`
	OverFloor           float64 `json:"overFloor,omitempty"`
	// ObjectModelFloorSeconds is the object-model floor binding as many claims
	// (ObjectModelFloorRequestsPerClaim each); OverObjectModelFloor is AllBoundSeconds ÷ it.
	ObjectModelFloorSeconds          float64 `json:"objectModelFloorSeconds,omitempty"`
	ObjectModelFloorRequestsPerClaim int     `json:"objectModelFloorRequestsPerClaim,omitempty"`
	OverObjectModelFloor             float64 `json:"overObjectModelFloor,omitempty"`
	// Single* are SingleCount claims made one after another in the idle fleet, each waited for
	// until Bound: create → Bound as one user feels it.
	SingleCount      int     `json:"singleCount,omitempty"`
	SingleP50Seconds float64 `json:"singleP50Seconds,omitempty"`
	SingleP99Seconds float64 `json:"singleP99Seconds,omitempty"`
	SingleMaxSeconds float64 `json:"singleMaxSeconds,omitempty"`
}

// Release is every claim deleted → every server wiped, verified and Available again; its floor
// is the plain client's release, wipe report and return (FloorWritesPerServer) for as many
// servers.
type Release struct {
	Seconds              float64 `json:"seconds"`
	FloorSeconds         float64 `json:"floorSeconds,omitempty"`
	FloorWritesPerServer int     `json:"floorWritesPerServer,omitempty"`
	OverFloor            float64 `json:"overFloor,omitempty"`
	// ObjectModelFloorSeconds is the object-model floor releasing as many servers
	// (ObjectModelFloorRequestsPerServer each); OverObjectModelFloor is Seconds ÷ it.
	ObjectModelFloorSeconds           float64 `json:"objectModelFloorSeconds,omitempty"`
	ObjectModelFloorRequestsPerServer int     `json:"objectModelFloorRequestsPerServer,omitempty"`
	OverObjectModelFloor              float64 `json:"overObjectModelFloor,omitempty"`
}

// Cost is what the manager process spent.
type Cost struct {
	PeakRSSMiB                      float64 `json:"peakRssMiB"`
	CPUSeconds                      float64 `json:"cpuSeconds"`
	APIRequestsPerServerEnrollment  float64 `json:"apiRequestsPerServerEnrollment"`
	APIRequestsPerServerLifecycle   float64 `json:"apiRequestsPerServerLifecycle"`
	IdleRedfishPerServerPerMinute   float64 `json:"idleRedfishRequestsPerServerPerMinute"`
	IdleReconcilesPerMinute         float64 `json:"idleReconcilesPerMinute"`
	IdleReconcilesPerMinuteExpected float64 `json:"idleReconcilesPerMinuteExpected"`
	// IdleReconcilesByController breaks the idle reconciles down per controller (per minute).
	IdleReconcilesByController map[string]float64 `json:"idleReconcilesByController"`
}

// PhaseCPU is where the machine's CPU went during one phase: a phase that keeps every core busy
// is bound by the CPU (the control plane's, the manager's, the simulated fleet's), one that
// leaves cores idle by something else (a client's rate limiter, a wait).
type PhaseCPU struct {
	// MachineBusy is the share of all cores' time spent busy (1: every core, the whole phase).
	MachineBusy float64 `json:"machineBusy"`
	// Seconds is each process's CPU time over the phase (sampleCPU): manager, kube-apiserver,
	// etcd and lab (this process: the simulated fleet, the boot service, the benchmark's clients).
	Seconds map[string]float64 `json:"seconds"`
}

// floorPhase is the key of a phase's floor in Result.CPU.
func floorPhase(phase string) string { return "floor " + phase }

// busyFigure is "99% (floor 47%)" for a phase and its floor: the share of the machine's cores
// each kept busy.
func (r Result) busyFigure(phase string) string {
	op, ok := r.CPU[phase]
	if !ok {
		return "not measured (run before the CPU figures)"
	}
	s := fmt.Sprintf("%.0f%%", 100*op.MachineBusy)
	if fl, ok := r.CPU[floorPhase(phase)]; ok {
		s += fmt.Sprintf(" (floor %.0f%%)", 100*fl.MachineBusy)
	}
	return s
}

// cpuFigure is the phase's CPU-seconds by process, the most first: "kube-apiserver 61,
// manager 27, lab 24, etcd 10".
func (r Result) cpuFigure(phase string) string {
	op, ok := r.CPU[phase]
	if !ok {
		return "not measured (run before the CPU figures)"
	}
	names := slices.Collect(maps.Keys(op.Seconds))
	slices.SortFunc(names, func(a, b string) int { return cmp.Or(cmp.Compare(op.Seconds[b], op.Seconds[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.0f", name, op.Seconds[name])
	}
	return strings.Join(parts, ", ")
}

// target is one row of the targets table, checked against a result.
type target struct {
	figure, want string
	value        string
	met          bool
}

// verdict is "met", "MISSED", or nothing for a figure the run did not reach.
func (t target) verdict(met, missed string) string {
	switch {
	case t.value == notReached:
		return ""
	case t.met:
		return met
	default:
		return missed
	}
}

const notReached = "not reached"

// peakRSSTargetMiB is the manager's memory target at n servers: below the ironcore
// metal-operator's 93 MiB on the same fleet at 1,000, and 300 MiB at 10,000.
func peakRSSTargetMiB(n int) float64 {
	if n <= 1000 {
		return 90
	}
	return 300
}

// ratio is a ÷ b, or 0 (not measured) when either is.
func ratio(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	return a / b
}

// overFloor renders a ratio to a floor, or says the run had no floor for it.
func overFloor(v float64) string {
	if v == 0 {
		return "no floor measured"
	}
	return fmt.Sprintf("%.2f", v)
}

func (r Result) targets() []target {
	rssTarget := peakRSSTargetMiB(r.Servers)
	ts := []target{
		{"enrollment ÷ floor", "≤ 2.0", overFloor(r.EnrollmentOverFloor), r.EnrollmentOverFloor > 0 && r.EnrollmentOverFloor <= 2.0},
		{"all claims Bound ÷ floor", "≤ 2.0", overFloor(r.Claims.OverFloor), r.Claims.OverFloor > 0 && r.Claims.OverFloor <= 2.0},
		{"release ÷ floor", "≤ 2.0", overFloor(r.Release.OverFloor), r.Release.OverFloor > 0 && r.Release.OverFloor <= 2.0},
		{"claim latency p99", "≤ 1 s", fmt.Sprintf("%.2f s", r.Claims.P99Seconds), r.Claims.P99Seconds <= 1.0},
		{"enrollment ÷ object-model floor", "≤ 1.3", overFloor(r.Enrollment.OverObjectModelFloor), r.Enrollment.OverObjectModelFloor > 0 && r.Enrollment.OverObjectModelFloor <= 1.3},
		{"all claims Bound ÷ object-model floor", "≤ 1.3", overFloor(r.Claims.OverObjectModelFloor), r.Claims.OverObjectModelFloor > 0 && r.Claims.OverObjectModelFloor <= 1.3},
		{"release ÷ object-model floor", "≤ 1.3", overFloor(r.Release.OverObjectModelFloor), r.Release.OverObjectModelFloor > 0 && r.Release.OverObjectModelFloor <= 1.3},
		{"one claim at a time, idle fleet: p99", "≤ 1 s", fmt.Sprintf("%.2f s", r.Claims.SingleP99Seconds), r.Claims.SingleCount > 0 && r.Claims.SingleP99Seconds <= 1.0},
		{"manager peak RSS", fmt.Sprintf("≤ %.0f MiB", rssTarget), fmt.Sprintf("%.0f MiB", r.Cost.PeakRSSMiB), r.Cost.PeakRSSMiB <= rssTarget},
		{"idle Redfish requests / server / min", "≤ 1", fmt.Sprintf("%.3f", r.Cost.IdleRedfishPerServerPerMinute), r.Cost.IdleRedfishPerServerPerMinute <= 1},
		{"idle reconciles / min", fmt.Sprintf("≤ N / resync = %.0f", r.Cost.IdleReconcilesPerMinuteExpected),
			fmt.Sprintf("%.0f", r.Cost.IdleReconcilesPerMinute), r.Cost.IdleReconcilesPerMinute <= r.Cost.IdleReconcilesPerMinuteExpected},
	}
	for i, phase := range []string{phaseEnrollment, phaseClaims, phaseRelease, phaseClaims,
		phaseEnrollment, phaseClaims, phaseRelease, phaseSingleClaims, "", phaseIdle, phaseIdle} {
		if phase != "" && !r.has(phase) {
			ts[i].value, ts[i].met = notReached, false
		}
	}
	return ts
}

// rows are the figures in display order.
func (r Result) rows() [][2]string {
	return [][2]string{
		{"servers (BMCs)", fmt.Sprintf("%d (%d)", r.Servers, r.Settings.BMCs)},
		{"enrollment: N Endpoints → N Available", r.ifHas(phaseEnrollment, fmt.Sprintf("%.1f s (%.1f servers/s)", r.Enrollment.Seconds, r.Enrollment.ServersPerSecond))},
		{"floor: plain client, same QPS & workers", fmt.Sprintf("%.1f s (%d writes/server, %d workers)", r.Floor.Seconds, r.Floor.WritesPerServer, r.Floor.Workers)},
		{"enrollment ÷ floor", r.ifHas(phaseEnrollment, fmt.Sprintf("%.2f", r.EnrollmentOverFloor))},
		{"object-model floor: enrollment", objectModelFigure(r.Enrollment.ObjectModelFloorSeconds, r.Enrollment.ObjectModelFloorRequestsPerServer, "server")},
		{"enrollment ÷ object-model floor", r.ifHas(phaseEnrollment, overFloor(r.Enrollment.OverObjectModelFloor))},
		{"claims created at once", r.ifHas(phaseClaims, fmt.Sprint(r.Claims.Count))},
		{"claim → Bound p50 / p95 / p99", r.ifHas(phaseClaims, fmt.Sprintf("%.2f / %.2f / %.2f s", r.Claims.P50Seconds, r.Claims.P95Seconds, r.Claims.P99Seconds))},
		{"all claims Bound", r.ifHas(phaseClaims, fmt.Sprintf("%.1f s", r.Claims.AllBoundSeconds))},
		{"claims floor: plain client binds as many", r.ifHas(phaseClaims, floorFigure(r.Claims.FloorSeconds, r.Claims.FloorWritesPerClaim, "claim"))},
		{"all claims Bound ÷ floor", r.ifHas(phaseClaims, overFloor(r.Claims.OverFloor))},
		{"object-model floor: claims", objectModelFigure(r.Claims.ObjectModelFloorSeconds, r.Claims.ObjectModelFloorRequestsPerClaim, "claim")},
		{"all claims Bound ÷ object-model floor", r.ifHas(phaseClaims, overFloor(r.Claims.OverObjectModelFloor))},
		{"release: all servers Available again", r.ifHas(phaseRelease, fmt.Sprintf("%.1f s", r.Release.Seconds))},
		{"release floor: plain client releases as many", r.ifHas(phaseRelease, floorFigure(r.Release.FloorSeconds, r.Release.FloorWritesPerServer, "server"))},
		{"release ÷ floor", r.ifHas(phaseRelease, overFloor(r.Release.OverFloor))},
		{"object-model floor: release", objectModelFigure(r.Release.ObjectModelFloorSeconds, r.Release.ObjectModelFloorRequestsPerServer, "server")},
		{"release ÷ object-model floor", r.ifHas(phaseRelease, overFloor(r.Release.OverObjectModelFloor))},
		{"one claim at a time, idle fleet: → Bound p50 / p99 / max", r.ifHas(phaseSingleClaims, fmt.Sprintf("%.2f / %.2f / %.2f s (%d claims)",
			r.Claims.SingleP50Seconds, r.Claims.SingleP99Seconds, r.Claims.SingleMaxSeconds, r.Claims.SingleCount))},
		{"machine CPU busy: enrollment (its floor)", r.ifHas(phaseEnrollment, r.busyFigure(phaseEnrollment))},
		{"machine CPU busy: claims (their floor)", r.ifHas(phaseClaims, r.busyFigure(phaseClaims))},
		{"machine CPU busy: release (its floor)", r.ifHas(phaseRelease, r.busyFigure(phaseRelease))},
		{"CPU-seconds in enrollment, by process", r.ifHas(phaseEnrollment, r.cpuFigure(phaseEnrollment))},
		{"manager peak RSS", fmt.Sprintf("%.0f MiB", r.Cost.PeakRSSMiB)},
		{"manager CPU", fmt.Sprintf("%.0f s", r.Cost.CPUSeconds)},
		{"API requests / server: enrollment", r.ifHas(phaseEnrollment, fmt.Sprintf("%.1f", r.Cost.APIRequestsPerServerEnrollment))},
		{"API requests / server: whole lifecycle", r.ifHas(phaseRelease, fmt.Sprintf("%.1f", r.Cost.APIRequestsPerServerLifecycle))},
		{"idle Redfish requests / server / min", r.ifHas(phaseIdle, fmt.Sprintf("%.3f", r.Cost.IdleRedfishPerServerPerMinute))},
		{"idle reconciles / min", r.ifHas(phaseIdle, fmt.Sprintf("%.0f (N / resync = %.0f)%s", r.Cost.IdleReconcilesPerMinute, r.Cost.IdleReconcilesPerMinuteExpected, byController(r.Cost.IdleReconcilesByController)))},
		{"phases measured", strings.Join(r.Completed, ", ")},
	}
}

// floorFigure is "3.4 s (2 writes/claim)", or says the run had no such floor.
func floorFigure(seconds float64, writes int, per string) string {
	if seconds == 0 {
		return "not measured (run before the phase floors)"
	}
	return fmt.Sprintf("%.1f s (%d writes/%s)", seconds, writes, per)
}

// objectModelFigure is "20.1 s (13 requests/server)", or says the run had no such floor.
func objectModelFigure(seconds float64, requests int, per string) string {
	if seconds == 0 {
		return "not measured (run before the object-model floors)"
	}
	return fmt.Sprintf("%.1f s (%d requests/%s)", seconds, requests, per)
}

// byController lists the controllers that reconciled, e.g. ": bmc 200, server 3".
func byController(m map[string]float64) string {
	var parts []string
	for name, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", name, v))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	slices.Sort(parts)
	return ": " + strings.Join(parts, ", ")
}

// writeTable prints the figures and the targets.
func (r Result) writeTable(out io.Writer) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "Ironfleet benchmark, N = %d, commit %s, %s\n", r.Servers, r.Commit, r.Date)
	for _, row := range r.rows() {
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], row[1])
	}
	fmt.Fprintln(tw, "\n  target\twant\tgot\t")
	for _, t := range r.targets() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", t.figure, t.want, t.value, t.verdict("met", "MISSED"))
	}
	_ = tw.Flush()
}

// thisMachine describes the host.
func thisMachine() Machine {
	m := Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(data), "MemTotal: %d kB", &kb); err == nil {
			m.MemoryGiB = int((kb + 1<<19) >> 20)
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(data))
	}
	return m
}

// commit is the checked-out commit, marked -dirty when the tree has changes outside
// docs/bench: the figures a benchmark writes there (make bench runs three in a row) are not a
// change of what is measured.
func commit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if status, err := exec.Command("git", "-C", root, "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs/bench").Output(); err == nil && len(strings.TrimSpace(string(status))) > 0 {
		c += "-dirty"
	}
	return c
}
