package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Markers delimit the generated part of docs/bench/README.md; the rest is written by people.
const (
	beginFigures = "<!-- BEGIN GENERATED FIGURES (make bench) -->"
	endFigures   = "<!-- END GENERATED FIGURES -->"
)

// writeDocs writes <dir>/<N>.json and regenerates the figures section of <dir>/README.md
// from every <M>.json there, keeping the hand-written text around it. When the N = 1,000 and
// N = 10,000 runs are both there, both get their Scaling anew.
func writeDocs(dir string, r Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := writeResult(dir, r); err != nil {
		return err
	}
	results, err := loadResults(dir)
	if err != nil {
		return err
	}
	if s := computeScaling(results); s != nil {
		for i := range results {
			if results[i].Servers == s.FromServers || results[i].Servers == s.ToServers {
				results[i].Scaling = s
				if err := writeResult(dir, results[i]); err != nil {
					return err
				}
			}
		}
	}
	readme := filepath.Join(dir, "README.md")
	old, err := os.ReadFile(readme)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(readme, []byte(spliceFigures(string(old), figuresMarkdown(results))), 0o644)
}

func writeResult(dir string, r Result) error {
	_, err := writeFigures(dir, fmt.Sprintf("%d.json", r.Servers), r)
	return err
}

// writeFigures writes v, indented JSON, as <dir>/<name> (making dir), and returns its path.
func writeFigures(dir, name string, v any) (string, error) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	return path, os.WriteFile(path, append(data, '\n'), 0o644)
}

func loadResults(dir string) ([]Result, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "[0-9]*.json")) // <N>.json; boot.json is the boot benchmark's
	if err != nil {
		return nil, err
	}
	var results []Result
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var r Result
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if r.Release.Seconds == 0 {
			r.Release.Seconds, r.LegacyReleaseSeconds = r.LegacyReleaseSeconds, 0
		}
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b Result) int { return a.Servers - b.Servers })
	return results, nil
}

// spliceFigures replaces the generated section of a README (or starts one).
func spliceFigures(readme, figures string) string {
	section := beginFigures + "\n" + figures + endFigures
	begin, end := strings.Index(readme, beginFigures), strings.Index(readme, endFigures)
	if begin < 0 || end < begin {
		if readme == "" {
			readme = "# Benchmarks\n\n`make bench` (N = 1,000) and `BENCH_SERVERS=10000 make bench` write these figures.\n\n"
		}
		return strings.TrimRight(readme, "\n") + "\n\n" + section + "\n"
	}
	return readme[:begin] + section + readme[end+len(endFigures):]
}

// figuresMarkdown is one table with a column per run, then each run's machine and settings.
func figuresMarkdown(results []Result) string {
	var b strings.Builder
	b.WriteString("| figure |")
	for _, r := range results {
		fmt.Fprintf(&b, " N = %d |", r.Servers)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(results)) + "\n")
	if len(results) == 0 {
		return b.String()
	}
	for i, row := range results[0].rows() {
		fmt.Fprintf(&b, "| %s |", row[0])
		for _, r := range results {
			fmt.Fprintf(&b, " %s |", r.rows()[i][1])
		}
		b.WriteString("\n")
	}
	b.WriteString("\n| target |")
	for _, r := range results {
		fmt.Fprintf(&b, " N = %d |", r.Servers)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(results)) + "\n")
	for i, t := range results[0].targets() {
		var wants []string // one per run when they differ (memory: 90 MiB at 1,000, 300 at 10,000)
		for _, r := range results {
			if w := strings.NewReplacer("N / resync", "N/resync").Replace(strings.SplitN(r.targets()[i].want, " =", 2)[0]); !slices.Contains(wants, w) {
				wants = append(wants, w)
			}
		}
		fmt.Fprintf(&b, "| %s %s |", t.figure, strings.Join(wants, " / "))
		for _, r := range results {
			rt := r.targets()[i]
			fmt.Fprintf(&b, " %s %s |", rt.value, rt.verdict("✓", "✗ missed"))
		}
		b.WriteString("\n")
	}
	b.WriteString(scalingMarkdown(computeScaling(results)))
	for _, r := range results {
		fmt.Fprintf(&b, "\n**N = %d**: %s, commit `%s`. Machine: %s, %d cores, %d GiB, %s, %s. "+
			"Settings: kube-api-qps %g, burst %d, default-concurrency %d, BMC resync %s, idle window %s, lab GOGC %d%s (every manager flag: %d.json).\n",
			r.Servers, r.Date, r.Commit, r.Machine.CPU, r.Machine.Cores, r.Machine.MemoryGiB, r.Machine.Kernel, r.Machine.Go,
			r.Settings.KubeAPIQPS, r.Settings.KubeAPIBurst, r.Settings.DefaultConcurrency, r.Settings.ResyncPeriod, r.Settings.IdleWindow, r.Settings.labGOGC(), r.Settings.memoryLimit(), r.Servers)
	}
	return b.String()
}
