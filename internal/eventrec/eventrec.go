// Package eventrec records the operator's Events (events.k8s.io/v1) with a bounded memory.
//
// client-go's events broadcaster, which controller-runtime's GetEventRecorder uses, keeps a
// copy of every event it sent for six minutes, to count repeats of it as a series, and starts
// a goroutine per event. Its key names the object at its resourceVersion, so few events ever
// repeat, yet every one is kept: enrolling ten thousand servers (four events each) held
// about 30 MiB of events in the manager. This recorder sends the same Events, repeats as the
// same series, through a bounded queue and a few workers, and remembers only a bounded number
// of recent events' names and counts.
package eventrec

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/utils/lru"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

const (
	// queueSize bounds the events waiting to be sent (client-go's broadcaster queues 1,000
	// too), shared evenly by the senders; past it an event is dropped and counted, never
	// waited for.
	queueSize = 1000
	// senders is how many events are sent at once.
	senders = 8
	// recentEvents bounds how many events are remembered to count their repeats.
	recentEvents = 4096
	// seriesWindow: an event seen again within this long of its last sighting is a repeat, as
	// in client-go.
	seriesWindow = 6 * time.Minute
	// seriesUpdate: a series' count is sent at its first repeat, then at most this often, and
	// the count of repeats not sent yet is sent this long after the last update.
	seriesUpdate = time.Minute
	// NoteLimit is the longest note the API takes (events.k8s.io/v1); a longer one is cut.
	NoteLimit = 1024
	// sendAttempts bounds how often an event is tried when the API cannot be reached.
	sendAttempts = 3
)

var dropped = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "ironfleet_events_dropped_total",
	Help: "Events not recorded because too many were waiting to be sent.",
})

func init() { metrics.Registry.MustRegister(dropped) }

// Provider makes the recorders of one manager's controllers; they share its queue, its
// senders and its memory of recent events.
type Provider struct {
	sink   eventsv1client.EventsV1Interface
	scheme *runtime.Scheme
	host   string
	log    logr.Logger
	// queues are the senders' own: a series always goes through the same one (by its key), so
	// its update never overtakes the create of its first event.
	queues [senders]chan job
	// update is how often a series' count is sent at most (seriesUpdate; tests shorten it).
	update time.Duration

	mu     sync.Mutex
	recent *lru.Cache    // key → *seen
	unsent map[key]*seen // series with repeats counted but not sent yet
}

// job is one request to the API: an event to create, or a series' count to update.
type job struct {
	key    key
	event  *eventsv1.Event
	series bool
}

// seen is what is remembered of a recent event: where it is, and how often it happened.
type seen struct {
	name, namespace string
	firstTime       metav1.MicroTime
	count, sentAt   int32 // sentAt: the count last sent
	last, sent      time.Time
	// latest is the last repeat not sent yet: what the next update sends (created again if
	// the first event has gone meanwhile).
	latest *eventsv1.Event
}

// key is what makes two events one series, as client-go's (the note is not part of it):
// their type, action, reason, reporting controller and instance, and the objects they are
// about, at their versions. It is kept as a hash of those: a remembered event costs a few
// dozen bytes, not two object references' strings.
type key [sha256.Size]byte

func keyOf(ev *eventsv1.Event) key {
	h := sha256.New()
	for _, s := range []string{ev.Type, ev.Action, ev.Reason, ev.ReportingController, ev.ReportingInstance} {
		writeField(h, s)
	}
	for _, ref := range []*corev1.ObjectReference{&ev.Regarding, ev.Related} {
		if ref == nil {
			ref = &corev1.ObjectReference{}
		}
		for _, s := range []string{ref.Kind, ref.Namespace, ref.Name, string(ref.UID), ref.APIVersion, ref.ResourceVersion, ref.FieldPath} {
			writeField(h, s)
		}
	}
	var k key
	h.Sum(k[:0])
	return k
}

// writeField writes s with its length, so that no two lists of fields hash alike.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

var (
	providersMu sync.Mutex
	providers   = map[manager.Manager]*Provider{}
)

// For returns mgr's provider, made and added to mgr (it sends while mgr runs) on first use.
func For(mgr manager.Manager) (*Provider, error) {
	providersMu.Lock()
	defer providersMu.Unlock()
	if p, ok := providers[mgr]; ok {
		return p, nil
	}
	sink, err := eventsv1client.NewForConfigAndClient(mgr.GetConfig(), mgr.GetHTTPClient())
	if err != nil {
		return nil, fmt.Errorf("an events client: %w", err)
	}
	p := New(sink, mgr.GetScheme(), mgr.GetLogger().WithName("events"))
	if err := mgr.Add(runnable{p, mgr}); err != nil {
		return nil, err
	}
	providers[mgr] = p
	return p, nil
}

// New makes a provider that sends to sink once started (Run).
func New(sink eventsv1client.EventsV1Interface, scheme *runtime.Scheme, log logr.Logger) *Provider {
	host, _ := os.Hostname()
	p := &Provider{sink: sink, scheme: scheme, host: host, log: log, update: seriesUpdate, unsent: map[key]*seen{}}
	for i := range p.queues {
		p.queues[i] = make(chan job, queueSize/senders)
	}
	// A series forgotten with repeats not sent yet sends them as it goes.
	p.recent = lru.NewWithEvictionFunc(recentEvents, func(k lru.Key, v any) {
		if j, ok := p.pending(k.(key), v.(*seen), time.Now()); ok {
			p.enqueue(j)
		}
	})
	return p
}

// Recorder is the recorder of one controller (the events' reportingController).
func (p *Provider) Recorder(controller string) events.EventRecorder {
	return &recorder{p: p, controller: controller, instance: controller + "-" + p.host}
}

// Run sends events until ctx ends, and the counts of series whose repeats were only counted
// once they are due.
func (p *Provider) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range p.queues {
		queue := p.queues[i]
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case j := <-queue:
					p.send(ctx, j)
				}
			}
		})
	}
	wg.Go(func() {
		tick := time.NewTicker(p.update)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				for _, j := range p.due(now) {
					p.enqueue(j)
				}
			}
		}
	})
	wg.Wait()
}

// due are the updates of the series whose counted repeats are due to be sent.
func (p *Provider) due(now time.Time) []job {
	p.mu.Lock()
	defer p.mu.Unlock()
	var jobs []job
	for k, s := range p.unsent {
		if now.Sub(s.sent) < p.update {
			continue
		}
		if j, ok := p.pending(k, s, now); ok {
			jobs = append(jobs, j)
		}
	}
	return jobs
}

// pending is the update that sends s's counted repeats (p.mu held), and marks them sent.
func (p *Provider) pending(k key, s *seen, now time.Time) (job, bool) {
	delete(p.unsent, k)
	if s.latest == nil || s.count == s.sentAt {
		return job{}, false
	}
	ev := s.latest
	s.latest, s.sent, s.sentAt = nil, now, s.count
	ev.Series = &eventsv1.EventSeries{Count: s.count, LastObservedTime: metav1.NewMicroTime(s.last)}
	return job{key: k, event: ev, series: true}, true
}

type runnable struct {
	p   *Provider
	mgr manager.Manager
}

func (r runnable) Start(ctx context.Context) error {
	r.p.Run(ctx)
	providersMu.Lock()
	delete(providers, r.mgr)
	providersMu.Unlock()
	return nil
}

// NeedLeaderElection: a replica that is not the leader runs no controller and records no
// event, but one that records must send.
func (runnable) NeedLeaderElection() bool { return false }

type recorder struct {
	p                    *Provider
	controller, instance string
}

var _ events.EventRecorder = (*recorder)(nil)

// Eventf records an event about regarding (and related, if not nil), as client-go's does.
func (r *recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	p := r.p
	message := fmt.Sprintf(note, args...)
	ref, err := reference.GetReference(p.scheme, regarding)
	if err != nil {
		p.log.Error(err, "no event: cannot refer to its object", "reason", reason, "note", message)
		return
	}
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		p.log.Error(nil, "no event: its type is neither Normal nor Warning", "type", eventtype, "reason", reason)
		return
	}
	var relRef *corev1.ObjectReference
	if related != nil {
		if relRef, err = reference.GetReference(p.scheme, related); err != nil {
			relRef = nil // as client-go: the event goes without it
		}
	}
	now := time.Now()
	ev := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ref.Namespace},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: r.controller,
		ReportingInstance:   r.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relRef,
		Note:                truncate(message, NoteLimit),
		Type:                eventtype,
	}
	if ev.Namespace == "" {
		ev.Namespace = metav1.NamespaceDefault
	}
	p.log.V(1).Info("event", "object", ref.Name, "namespace", ref.Namespace, "kind", ref.Kind, "type", eventtype, "reason", reason, "note", ev.Note)
	if j, ok := p.observe(ev, now); ok {
		p.enqueue(j)
	}
}

// observe remembers ev and says what to send: ev itself when it is new, a series' count when
// it repeats one (at its first repeat, then at most once per update: repeats in between are
// counted, and Run sends the count when it is due), or nothing.
func (p *Provider) observe(ev *eventsv1.Event, now time.Time) (job, bool) {
	k := keyOf(ev)
	p.mu.Lock()
	defer p.mu.Unlock()
	if v, ok := p.recent.Get(k); ok {
		if s := v.(*seen); now.Sub(s.last) < seriesWindow {
			s.count++
			s.last = now
			ev.Name, ev.Namespace, ev.EventTime = s.name, s.namespace, s.firstTime
			s.latest = ev
			if now.Sub(s.sent) < p.update {
				p.unsent[k] = s // counted; Run's next tick sends it
				return job{}, false
			}
			return p.pending(k, s, now)
		}
		if j, ok := p.pending(k, v.(*seen), now); ok { // the last repeats of the series that ended
			p.enqueue(j)
		}
	}
	p.recent.Add(k, &seen{name: ev.Name, namespace: ev.Namespace, firstTime: ev.EventTime, count: 1, sentAt: 1, last: now})
	return job{key: k, event: ev}, true
}

func (p *Provider) enqueue(j job) {
	select {
	case p.queues[int(j.key[0])%senders] <- j:
	default:
		dropped.Inc()
		p.log.V(1).Info("event dropped: too many waiting to be sent", "object", j.event.Regarding.Name, "reason", j.event.Reason)
	}
}

// send creates the event, or updates its series (creating it again if it expired meanwhile);
// only an API that cannot be reached is tried again.
func (p *Provider) send(ctx context.Context, j job) {
	for attempt := 1; ; attempt++ {
		err := p.sendOnce(ctx, j)
		var status apierrors.APIStatus
		if err == nil || errors.As(err, &status) || ctx.Err() != nil {
			if err != nil && !apierrors.IsAlreadyExists(err) && ctx.Err() == nil { // not at shutdown
				p.log.Info("event not recorded", "object", j.event.Regarding.Name, "reason", j.event.Reason, "error", err.Error())
			}
			return
		}
		if attempt == sendAttempts {
			p.log.Info("event not recorded: the API cannot be reached", "object", j.event.Regarding.Name, "reason", j.event.Reason, "error", err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(attempt) * time.Second):
		}
	}
}

func (p *Provider) sendOnce(ctx context.Context, j job) error {
	api := p.sink.Events(j.event.Namespace)
	if j.series {
		patch := fmt.Sprintf(`{"series":{"count":%d,"lastObservedTime":%q}}`, j.event.Series.Count, j.event.Series.LastObservedTime.UTC().Format(metav1.RFC3339Micro))
		_, err := api.Patch(ctx, j.event.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err := api.Create(ctx, j.event, metav1.CreateOptions{})
	return err
}

// truncate cuts s to at most n bytes, on a character boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}
