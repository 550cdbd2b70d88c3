package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/test/lab"
)

// tracker mirrors one kind through a watch (re-listing when the watch expires), so that the
// benchmark can wait on thousands of objects without listing them all every second: polling
// lists would load the very apiserver being measured.
type tracker[T client.Object] struct {
	mu      sync.Mutex
	objects map[string]T
	onEvent func(watch.EventType, T, time.Time)
}

// track starts mirroring list's kind in namespace ns ("" for all) until ctx ends. onEvent, when
// set, sees every event with the time it arrived, under the tracker's lock.
func track[T client.Object](ctx context.Context, c client.WithWatch, newList func() client.ObjectList, ns string, onEvent func(watch.EventType, T, time.Time)) (*tracker[T], error) {
	t := &tracker[T]{objects: map[string]T{}, onEvent: onEvent}
	rv, err := t.relist(ctx, c, newList, ns)
	if err != nil {
		return nil, err
	}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, newList(), client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
			if err != nil {
				if rv, err = t.relist(ctx, c, newList, ns); err != nil && ctx.Err() == nil {
					fmt.Fprintln(os.Stderr, "bench: relisting:", err)
					select { // the apiserver is struggling: do not add to it
					case <-ctx.Done():
					case <-time.After(time.Second):
					}
				}
				continue
			}
			rv = t.consume(w, rv)
			if rv == "" { // expired: start over from a fresh list
				rv, _ = t.relist(ctx, c, newList, ns)
			}
		}
	}()
	return t, nil
}

func (t *tracker[T]) relist(ctx context.Context, c client.WithWatch, newList func() client.ObjectList, ns string) (string, error) {
	list := newList()
	if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return "", err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return "", err
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.objects = map[string]T{}
	for _, item := range items {
		obj := item.(T)
		t.objects[obj.GetName()] = obj
		if t.onEvent != nil {
			t.onEvent(watch.Added, obj, now)
		}
	}
	return list.GetResourceVersion(), nil
}

// consume applies events until the watch ends; it returns the last resource version seen, or
// "" when the watch expired.
func (t *tracker[T]) consume(w watch.Interface, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		now := time.Now()
		if ev.Type == watch.Error {
			if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
				return ""
			}
			continue
		}
		obj, ok := ev.Object.(T)
		if !ok {
			continue
		}
		t.mu.Lock()
		if ev.Type == watch.Deleted {
			delete(t.objects, obj.GetName())
		} else {
			t.objects[obj.GetName()] = obj
		}
		if t.onEvent != nil {
			t.onEvent(ev.Type, obj, now)
		}
		t.mu.Unlock()
		rv = obj.GetResourceVersion()
	}
	return rv
}

// count is how many tracked objects satisfy pred.
func (t *tracker[T]) count(pred func(T) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, o := range t.objects {
		if pred(o) {
			n++
		}
	}
	return n
}

// persist sends a request until the apiserver takes it. At 10,000 servers on 2 cores the
// apiserver sheds load (a 429, or a request timing out while it may still be working on it):
// what the benchmark itself sends must not fail the run for that.
func persist(request func() error) error {
	overloaded := func(err error) bool {
		return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
	}
	return retry.OnError(wait.Backoff{Duration: time.Second, Factor: 2, Steps: 8, Cap: 30 * time.Second}, overloaded, request)
}

// waitFor polls (lab.Poll) until status says done, or fails after timeout saying what it
// waited for and where things stood.
func waitFor(ctx context.Context, timeout time.Duration, what string, status func() (bool, string)) error {
	var state string
	err := lab.Poll(ctx, timeout, what, func() (bool, error) {
		var ok bool
		ok, state = status()
		return ok, nil
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("%w (%s)", err, state)
	}
	return err
}

// metrics is one scrape of a Prometheus text endpoint.
type metrics string

func scrape(url string) (metrics, error) {
	resp, err := http.Get(url) //nolint:gosec,noctx // the lab's own loopback metrics endpoint
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	return metrics(data), err
}

// sum adds up every sample of the named metric whose labels contain each of the given
// name="value" pairs.
func (m metrics) sum(name string, labels ...string) float64 {
	total := 0.0
	sc := bufio.NewScanner(strings.NewReader(string(m)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var lbls string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.Index(rest, "}")
			if end < 0 {
				continue
			}
			lbls, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer metric name with this prefix
		}
		if !hasLabels(lbls, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			total += v
		}
	}
	return total
}

func hasLabels(lbls string, want []string) bool {
	for _, w := range want {
		if !strings.Contains(","+lbls+",", ","+w+",") {
			return false
		}
	}
	return true
}

// procStats reads a process's peak resident memory (VmHWM) and CPU time from /proc.
func procStats(pid int) (peakRSSBytes int64, cpu time.Duration, err error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("VmHWM %q: %w", v, err)
			}
			peakRSSBytes = kb << 10
		}
	}
	_, _, cpu, err = procStat(pid)
	return peakRSSBytes, cpu, err
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports here.
const clockTicks = 100

// procStat reads a process's command name, parent and CPU time (user and system) from
// /proc/<pid>/stat.
func procStat(pid int) (comm string, ppid int, cpu time.Duration, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, 0, err
	}
	open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
	if open < 0 || end < open {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	// Fields after the parenthesised command: state is field 3, ppid 4, utime 14, stime 15.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	parent, err0 := strconv.Atoi(fields[1])
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err0 != nil || err1 != nil || err2 != nil {
		return "", 0, 0, fmt.Errorf("/proc/%d/stat: ppid/utime/stime unreadable", pid)
	}
	return string(stat[open+1 : end]), parent, time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// cpuSample is, at one moment, how long all the machine's cores have been busy and in all
// (/proc/stat), and the CPU time of each of the run's processes: the manager, kube-apiserver and
// etcd (this process's children), and this process, "lab": the simulated fleet, the boot
// service and the benchmark's own clients (the floors' plain client among them).
type cpuSample struct {
	busy, total time.Duration
	procs       map[string]time.Duration
}

// Processes a cpuSample names.
const (
	procManager   = "manager"
	procAPIServer = "kube-apiserver"
	procEtcd      = "etcd"
	procLab       = "lab"
)

// sampleCPU takes a cpuSample; managerPID 0 means no manager runs yet.
func sampleCPU(managerPID int) (cpuSample, error) {
	s := cpuSample{procs: map[string]time.Duration{}}
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s, err
	}
	// cpu  user nice system idle iowait irq softirq steal (guest time is in user already)
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return s, fmt.Errorf("/proc/stat: unexpected first line %q", line)
	}
	var total, idle int64
	for i, f := range fields[1:9] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return s, fmt.Errorf("/proc/stat: %q: %w", f, err)
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	s.total, s.busy = time.Duration(total)*time.Second/clockTicks, time.Duration(total-idle)*time.Second/clockTicks
	self := os.Getpid()
	if _, _, s.procs[procLab], err = procStat(self); err != nil {
		return s, err
	}
	if managerPID != 0 {
		if _, _, s.procs[procManager], err = procStat(managerPID); err != nil {
			return s, err
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return s, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid, cpu, err := procStat(pid)
		if err != nil || ppid != self || (comm != procAPIServer && comm != procEtcd) {
			continue // gone meanwhile, or not the control plane this run started
		}
		s.procs[comm] += cpu
	}
	return s, nil
}

// since is where the CPU went between an earlier sample and this one.
func (s cpuSample) since(before cpuSample) PhaseCPU {
	p := PhaseCPU{Seconds: map[string]float64{}}
	if d := s.total - before.total; d > 0 {
		p.MachineBusy = float64(s.busy-before.busy) / float64(d)
	}
	for name, cpu := range s.procs {
		p.Seconds[name] = (cpu - before.procs[name]).Seconds()
	}
	return p
}

// percentile is the nearest-rank p-th percentile of ds (p in (0, 100]).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// setSingle records the latencies of claims made one at a time: how many, the nearest-rank p50
// and p99, and the longest.
func (c *Claims) setSingle(ds []time.Duration) {
	c.SingleCount = len(ds)
	c.SingleP50Seconds, c.SingleP99Seconds = percentile(ds, 50).Seconds(), percentile(ds, 99).Seconds()
	c.SingleMaxSeconds = percentile(ds, 100).Seconds()
}
