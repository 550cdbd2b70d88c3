package bench

import (
	"fmt"
	"strings"
)

// The sizes whose runs Scaling compares.
const (
	scalingFrom = 1000
	scalingTo   = 10000
)

// Scaling is how each phase's cost grows from the N = 1,000 run to the N = 10,000 one, against
// how the object-model floor's grows on the same machine: the operator's work per server
// should not grow with the fleet. Both runs' reports carry the same Scaling.
type Scaling struct {
	FromServers int          `json:"fromServers"`
	ToServers   int          `json:"toServers"`
	FromCommit  string       `json:"fromCommit"`
	ToCommit    string       `json:"toCommit"`
	Enrollment  ScalingPhase `json:"enrollment"`
	Claims      ScalingPhase `json:"claims"`
	Release     ScalingPhase `json:"release"`
}

// ScalingPhase is one phase's growth from FromServers to ToServers; 0 where a run did not
// measure what it needs.
type ScalingPhase struct {
	// TimeRatio is the operator's time for the phase at ToServers ÷ at FromServers, and
	// ObjectModelFloorTimeRatio the object-model floor's.
	TimeRatio                 float64 `json:"timeRatio,omitempty"`
	ObjectModelFloorTimeRatio float64 `json:"objectModelFloorTimeRatio,omitempty"`
	// TimeRatioOverObjectModelFloor is TimeRatio ÷ ObjectModelFloorTimeRatio: 1 when the
	// operator's time grows as the least the object model needs does.
	TimeRatioOverObjectModelFloor float64 `json:"timeRatioOverObjectModelFloor,omitempty"`
	// ManagerCPUSecondsPerServerRatio is the manager's CPU-seconds per server of the fleet in
	// the phase at ToServers ÷ at FromServers: 1 when its work per server is the same.
	ManagerCPUSecondsPerServerRatio float64 `json:"managerCPUSecondsPerServerRatio,omitempty"`
}

// phaseSeconds is the operator's time for a phase and its object-model floor's.
func (r Result) phaseSeconds(phase string) (operator, objectModelFloor float64) {
	switch phase {
	case phaseEnrollment:
		return r.Enrollment.Seconds, r.Enrollment.ObjectModelFloorSeconds
	case phaseClaims:
		return r.Claims.AllBoundSeconds, r.Claims.ObjectModelFloorSeconds
	case phaseRelease:
		return r.Release.Seconds, r.Release.ObjectModelFloorSeconds
	}
	return 0, 0
}

// managerCPUPerServer is the manager's CPU-seconds in a phase over the fleet's size.
func (r Result) managerCPUPerServer(phase string) float64 {
	if r.Servers == 0 {
		return 0
	}
	return r.CPU[phase].Seconds[procManager] / float64(r.Servers)
}

func scalePhase(from, to Result, phase string) ScalingPhase {
	if !from.has(phase) || !to.has(phase) {
		return ScalingPhase{}
	}
	fromOp, fromFloor := from.phaseSeconds(phase)
	toOp, toFloor := to.phaseSeconds(phase)
	p := ScalingPhase{TimeRatio: ratio(toOp, fromOp), ObjectModelFloorTimeRatio: ratio(toFloor, fromFloor),
		ManagerCPUSecondsPerServerRatio: ratio(to.managerCPUPerServer(phase), from.managerCPUPerServer(phase))}
	p.TimeRatioOverObjectModelFloor = ratio(p.TimeRatio, p.ObjectModelFloorTimeRatio)
	return p
}

// computeScaling compares the N = 1,000 and N = 10,000 runs among results, or is nil when one
// of them is missing.
func computeScaling(results []Result) *Scaling {
	var from, to *Result
	for i := range results {
		switch results[i].Servers {
		case scalingFrom:
			from = &results[i]
		case scalingTo:
			to = &results[i]
		}
	}
	if from == nil || to == nil {
		return nil
	}
	return &Scaling{FromServers: scalingFrom, ToServers: scalingTo, FromCommit: from.Commit, ToCommit: to.Commit,
		Enrollment: scalePhase(*from, *to, phaseEnrollment), Claims: scalePhase(*from, *to, phaseClaims), Release: scalePhase(*from, *to, phaseRelease)}
}

// scalingMaxRatio is the bound on each scaling ratio: within 15% of linear.
const scalingMaxRatio = 1.15

// scalingMarkdown is a table of s's ratios against their bound, or nothing without s.
func scalingMarkdown(s *Scaling) string {
	if s == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| N = %d ÷ N = %d (`%s` ÷ `%s`) | enrollment | claims | release |\n|---|---|---|---|\n", s.ToServers, s.FromServers, s.ToCommit, s.FromCommit)
	phases := []ScalingPhase{s.Enrollment, s.Claims, s.Release}
	row := func(name string, v func(ScalingPhase) float64, bound bool) {
		fmt.Fprintf(&b, "| %s |", name)
		for _, p := range phases {
			switch x := v(p); {
			case x == 0:
				b.WriteString(" not measured |")
			case !bound:
				fmt.Fprintf(&b, " %.2f |", x)
			case x <= scalingMaxRatio:
				fmt.Fprintf(&b, " %.2f ✓ |", x)
			default:
				fmt.Fprintf(&b, " %.2f ✗ missed |", x)
			}
		}
		b.WriteString("\n")
	}
	row("operator's time", func(p ScalingPhase) float64 { return p.TimeRatio }, false)
	row("object-model floor's time", func(p ScalingPhase) float64 { return p.ObjectModelFloorTimeRatio }, false)
	row(fmt.Sprintf("operator's ÷ object-model floor's ≤ %.2f", scalingMaxRatio), func(p ScalingPhase) float64 { return p.TimeRatioOverObjectModelFloor }, true)
	row(fmt.Sprintf("manager CPU-seconds per server ≤ %.2f", scalingMaxRatio), func(p ScalingPhase) float64 { return p.ManagerCPUSecondsPerServerRatio }, true)
	return b.String()
}
