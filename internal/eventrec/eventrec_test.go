package eventrec

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if env, err = testenv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	return m.Run(), nil
}

// started is a provider sending to the test's control plane until the test ends.
func started(t *testing.T) *Provider {
	t.Helper()
	sink, err := eventsv1client.NewForConfig(env.Config)
	require.NoError(t, err)
	p := New(sink, env.Scheme, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// objects makes a cluster-scoped Server and a namespaced claim, with unique names.
func objects(t *testing.T) (*metalv1alpha1.Server, *metalv1alpha1.ServerClaim) {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.ReplaceAll(t.Name(), "_", "-"))
	server := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: metalv1alpha1.ServerSpec{SystemUUID: "00000000-0000-4000-8000-000000000001"}}
	require.NoError(t, env.Client.Create(ctx, server))
	claim := &metalv1alpha1.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-claim"}, Spec: metalv1alpha1.ServerClaimSpec{Power: metalv1alpha1.PowerOn}}
	require.NoError(t, env.Client.Create(ctx, claim))
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), server)
		_ = env.Client.Delete(context.Background(), claim)
	})
	return server, claim
}

// eventsAbout lists the Events about the object named name, in namespace ns (none when the
// API cannot be read: the caller polls again).
func eventsAbout(ns, name string) []eventsv1.Event {
	var list eventsv1.EventList
	if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name {
			out = append(out, e)
		}
	}
	return out
}

// waitFor polls until ok holds, for at most 30 seconds.
func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	require.Eventually(t, ok, 30*time.Second, 50*time.Millisecond, "waiting for %s", what)
}

func TestAnEventReachesTheAPIAsClientGosWould(t *testing.T) {
	p := started(t)
	server, claim := objects(t)
	p.Recorder("server-controller").Eventf(server, claim, corev1.EventTypeNormal, "Bound", "Bind", "taken by claim %s", claim.Name)
	// A cluster-scoped object's events go to the default namespace.
	var got []eventsv1.Event
	waitFor(t, "the event", func() bool { got = eventsAbout("default", server.Name); return len(got) == 1 })
	e := got[0]
	assert.Equal(t, "Server", e.Regarding.Kind)
	assert.Equal(t, server.UID, e.Regarding.UID)
	require.NotNil(t, e.Related)
	assert.Equal(t, "ServerClaim", e.Related.Kind)
	assert.Equal(t, claim.UID, e.Related.UID)
	assert.Equal(t, corev1.EventTypeNormal, e.Type)
	assert.Equal(t, "Bound", e.Reason)
	assert.Equal(t, "Bind", e.Action)
	assert.Equal(t, "taken by claim "+claim.Name, e.Note)
	assert.Equal(t, "server-controller", e.ReportingController)
	assert.True(t, strings.HasPrefix(e.ReportingInstance, "server-controller-"), e.ReportingInstance)
	assert.Nil(t, e.Series)
	assert.False(t, e.EventTime.IsZero())

	// A namespaced object's go to its namespace.
	p.Recorder("serverclaim-controller").Eventf(claim, nil, corev1.EventTypeWarning, "NoMatch", "Bind", "no server matches")
	waitFor(t, "the claim's event", func() bool { return len(eventsAbout(claim.Namespace, claim.Name)) == 1 })
}

func TestARepeatIsCountedOnTheFirstEvent(t *testing.T) {
	p := started(t)
	server, _ := objects(t)
	rec := p.Recorder("bmc-controller")
	rec.Eventf(server, nil, corev1.EventTypeWarning, "Unreachable", "Connect", "dial: refused")
	waitFor(t, "the first event", func() bool { return len(eventsAbout("default", server.Name)) == 1 })
	rec.Eventf(server, nil, corev1.EventTypeWarning, "Unreachable", "Connect", "dial: refused")
	waitFor(t, "the series", func() bool {
		got := eventsAbout("default", server.Name)
		return len(got) == 1 && got[0].Series != nil && got[0].Series.Count == 2
	})
	// Another reason is another event.
	rec.Eventf(server, nil, corev1.EventTypeNormal, "Connected", "Connect", "session opened")
	waitFor(t, "a second event", func() bool { return len(eventsAbout("default", server.Name)) == 2 })
}

func TestALongNoteIsCutToWhatTheAPITakes(t *testing.T) {
	p := started(t)
	server, _ := objects(t)
	p.Recorder("server-controller").Eventf(server, nil, corev1.EventTypeWarning, "BMCError", "Power", "%s", strings.Repeat("é", 1500))
	var got []eventsv1.Event
	waitFor(t, "the event", func() bool { got = eventsAbout("default", server.Name); return len(got) == 1 })
	assert.LessOrEqual(t, len(got[0].Note), NoteLimit)
	assert.True(t, strings.HasSuffix(got[0].Note, "…"))
	assert.True(t, strings.HasPrefix(got[0].Note, "éé"))
}

func TestAnEventOfNoKnownTypeIsNotSent(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	server := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: "s", UID: "u"}}
	p.Recorder("c").Eventf(server, nil, "Info", "R", "A", "n")
	for _, q := range p.queues {
		assert.Empty(t, q)
	}
}

// ev is an event as a recorder makes it, about server s.
func ev(s, reason string, at time.Time) *eventsv1.Event {
	return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: s + "." + fmt.Sprint(at.UnixNano()), Namespace: "default"},
		EventTime: metav1.NewMicroTime(at), Type: corev1.EventTypeWarning, Reason: reason, Action: "A", ReportingController: "c",
		Regarding: corev1.ObjectReference{Kind: "Server", Name: s, UID: types.UID("uid-" + s), ResourceVersion: "7"}}
}

func TestRepeatsAreSentAtTheFirstThenAtMostOnceAMinute(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	t0 := time.Now()
	first, ok := p.observe(ev("a", "R", t0), t0)
	require.True(t, ok)
	assert.False(t, first.series)

	at := t0.Add(time.Second)
	second, ok := p.observe(ev("a", "R", at), at)
	require.True(t, ok, "the first repeat is sent")
	require.True(t, second.series)
	assert.Equal(t, first.event.Name, second.event.Name, "a series updates the first event")
	assert.Equal(t, first.event.EventTime, second.event.EventTime)
	assert.EqualValues(t, 2, second.event.Series.Count)

	at = t0.Add(30 * time.Second)
	_, ok = p.observe(ev("a", "R", at), at)
	assert.False(t, ok, "a repeat within a minute of the last update is only counted")

	at = t0.Add(62 * time.Second)
	third, ok := p.observe(ev("a", "R", at), at)
	require.True(t, ok)
	assert.EqualValues(t, 4, third.event.Series.Count, "the count includes the repeats not sent")

	// Not seen for longer than the window: a new event.
	at = at.Add(seriesWindow)
	fresh, ok := p.observe(ev("a", "R", at), at)
	require.True(t, ok)
	assert.False(t, fresh.series)

	// Another object, or another reason: not a repeat.
	other, ok := p.observe(ev("b", "R", at), at)
	require.True(t, ok)
	assert.False(t, other.series)
	other, ok = p.observe(ev("a", "S", at), at)
	require.True(t, ok)
	assert.False(t, other.series)
}

func TestMemoryIsBounded(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	now := time.Now()
	for i := range recentEvents + 500 {
		p.observe(ev(fmt.Sprint(i), "R", now), now)
	}
	assert.Equal(t, recentEvents, p.recent.Len(), "only the most recent events are remembered")

	// A full queue drops, and counts, rather than blocking the reconcile that records.
	before := testutil.ToFloat64(dropped)
	one := job{key: keyOf(ev("q", "Q", now)), event: ev("q", "Q", now)}
	done := make(chan struct{})
	go func() {
		for range queueSize/senders + 3 {
			p.enqueue(one)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocked on a full queue")
	}
	assert.Len(t, p.queues[int(one.key[0])%senders], queueSize/senders)
	assert.InDelta(t, before+3, testutil.ToFloat64(dropped), 0.1)
}

func TestRepeatsOnlyCountedAreSentWhenDue(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	t0 := time.Now()
	_, ok := p.observe(ev("a", "R", t0), t0)
	require.True(t, ok)
	_, ok = p.observe(ev("a", "R", t0), t0.Add(time.Second))
	require.True(t, ok, "the first repeat is sent")
	for _, at := range []time.Duration{10 * time.Second, 20 * time.Second} {
		_, ok = p.observe(ev("a", "R", t0), t0.Add(at))
		require.False(t, ok, "counted")
	}
	assert.Empty(t, p.due(t0.Add(30*time.Second)), "not due within a minute of the last update")
	jobs := p.due(t0.Add(62 * time.Second))
	require.Len(t, jobs, 1, "the repeats only counted are sent once due, though no repeat follows")
	assert.True(t, jobs[0].series)
	assert.EqualValues(t, 4, jobs[0].event.Series.Count)
	assert.Equal(t, t0.Add(20*time.Second).UnixMicro(), jobs[0].event.Series.LastObservedTime.UnixMicro())
	assert.Empty(t, p.due(t0.Add(200*time.Second)), "sent once")
}

func TestAForgottenSeriesSendsItsCount(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	t0 := time.Now()
	a := ev("a", "R", t0)
	p.observe(a, t0)
	p.observe(ev("a", "R", t0), t0.Add(time.Second))
	_, ok := p.observe(ev("a", "R", t0), t0.Add(2*time.Second))
	require.False(t, ok)
	for i := range recentEvents {
		p.observe(ev(fmt.Sprint(i), "R", t0), t0.Add(3*time.Second)) // their creates are not queued here
	}
	queue := p.queues[int(keyOf(a)[0])%senders]
	require.Len(t, queue, 1, "the series pushed out of memory sent its last count")
	j := <-queue
	assert.True(t, j.series)
	assert.EqualValues(t, 3, j.event.Series.Count)
	assert.Equal(t, a.Name, j.event.Name)
}

func TestASeriesKeepsToOneSender(t *testing.T) {
	p := New(nil, env.Scheme, logr.Discard())
	t0 := time.Now()
	first, _ := p.observe(ev("a", "R", t0), t0)
	repeat, _ := p.observe(ev("a", "R", t0), t0.Add(time.Second))
	p.enqueue(first)
	p.enqueue(repeat)
	queue := p.queues[int(first.key[0])%senders]
	require.Len(t, queue, 2, "the create and its series' update wait for the same sender, in order")
	assert.False(t, (<-queue).series)
	assert.True(t, (<-queue).series)
}

func TestRepeatsCountedBetweenUpdatesReachTheAPI(t *testing.T) {
	sink, err := eventsv1client.NewForConfig(env.Config)
	require.NoError(t, err)
	p := New(sink, env.Scheme, logr.Discard())
	p.update = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	server, _ := objects(t)
	rec := p.Recorder("bmc-controller")
	for range 4 {
		rec.Eventf(server, nil, corev1.EventTypeWarning, "Unreachable", "Connect", "dial: refused")
	}
	waitFor(t, "the series' last count", func() bool {
		got := eventsAbout("default", server.Name)
		return len(got) == 1 && got[0].Series != nil && got[0].Series.Count == 4
	})
}
