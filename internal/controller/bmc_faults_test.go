package controller_test

import (
	"context"
	"crypto/x509"
	"maps"
	"math"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// The fault tests run the operator with a BMC poll of a second and a Redfish request timeout of
// a second, so that a window of seconds sees many polls and an injected hang costs one second.
// Retries back off as in the rest of the suite: 200ms doubling per failure up to 10s.
const (
	faultResync     = time.Second
	faultTimeout    = time.Second
	resyncJitter    = 0.9 // a poll comes at least 90% of the period after the last
	timingSlack     = 10 * time.Millisecond
	rotatedPassword = "rotated-battery-staple-789"
)

// reconcileLog records the operator's BMC reconciles. Each reconcile carries an ID in its
// context; the BMC reconciler's first API call is the Get of its BMC (other reconcilers begin
// with their own kind), and its status patch, when something changed, carries its conclusion.
// A reconcile that writes no status concluded what the BMC already said.
type reconcileLog struct {
	mu    sync.Mutex
	byBMC map[string][]*bmcReconcile
	byID  map[types.UID]*bmcReconcile // nil for reconciles of other kinds
	seen  map[types.UID]bool
}

type bmcReconcile struct {
	at    time.Time        // when it began
	ready metav1.Condition // the Ready condition it left
}

func (r bmcReconcile) failed() bool { return r.ready.Status != metav1.ConditionTrue }

func newReconcileLog() *reconcileLog {
	return &reconcileLog{byBMC: map[string][]*bmcReconcile{}, byID: map[types.UID]*bmcReconcile{}, seen: map[types.UID]bool{}}
}

func (l *reconcileLog) newClient(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.New(cfg, opts)
	if err != nil {
		return nil, err
	}
	return recordingClient{Client: c, log: l}, nil
}

func readyOf(b *m.BMC) metav1.Condition {
	if c := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// began notes a reconcile's first read.
func (l *reconcileLog) began(ctx context.Context, obj client.Object) {
	id := ctrlcontroller.ReconcileIDFromContext(ctx)
	l.mu.Lock()
	defer l.mu.Unlock()
	if id == "" || l.seen[id] {
		return
	}
	l.seen[id] = true
	if b, ok := obj.(*m.BMC); ok {
		r := &bmcReconcile{at: time.Now(), ready: readyOf(b)}
		l.byID[id] = r
		l.byBMC[b.Name] = append(l.byBMC[b.Name], r)
	}
}

// concluded notes the Ready condition a BMC reconcile writes.
func (l *reconcileLog) concluded(ctx context.Context, b *m.BMC) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.byID[ctrlcontroller.ReconcileIDFromContext(ctx)]; r != nil {
		r.ready = readyOf(b)
	}
}

// between returns the BMC's reconciles that began in [from, to).
func (l *reconcileLog) between(name string, from, to time.Time) []bmcReconcile {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []bmcReconcile
	for _, r := range l.byBMC[name] {
		if !r.at.Before(from) && r.at.Before(to) {
			out = append(out, *r)
		}
	}
	return out
}

// all returns every recorded reconcile of the BMC.
func (l *reconcileLog) all(name string) []bmcReconcile {
	return l.between(name, time.Time{}, time.Now().Add(time.Hour))
}

type recordingClient struct {
	client.Client
	log *reconcileLog
}

func (c recordingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Client.Get(ctx, key, obj, opts...)
	if err == nil {
		c.log.began(ctx, obj)
	}
	return err
}

func (c recordingClient) Status() client.SubResourceWriter {
	return recordingStatus{SubResourceWriter: c.Client.Status(), log: c.log}
}

type recordingStatus struct {
	client.SubResourceWriter
	log *reconcileLog
}

func (s recordingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	body := obj // the object written; a write answered with metadata only names it in its options
	for _, o := range opts {
		if p, ok := o.(*client.SubResourcePatchOptions); ok && p.SubResourceBody != nil {
			body = p.SubResourceBody
		}
	}
	if b, ok := body.(*m.BMC); ok {
		s.log.concluded(ctx, b)
	}
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// restartOperatorForFaults restarts the operator with the fault tests' settings and a client
// that records BMC reconciles, and restores the suite's operator when the test ends.
func restartOperatorForFaults(t *testing.T) *reconcileLog {
	t.Helper()
	rec := newReconcileLog()
	saved := operatorDeps
	roots := x509.NewCertPool() // the suite's simulators, for other tests' BMCs still polled
	for _, sim := range sims {
		roots.AppendCertsFromPEM(sim.CACertPEM())
	}
	require.NoError(t, stopOperator())
	operatorDeps.Settings.ResyncPeriod = faultResync
	operatorDeps.Connect = redfish.Connector(redfish.Options{Timeout: faultTimeout, RootCAs: roots})
	operatorClient = rec.newClient
	require.NoError(t, startOperator())
	t.Cleanup(func() {
		assert.NoError(t, stopOperator())
		operatorDeps, operatorClient = saved, nil
		assert.NoError(t, startOperator(), "restoring the suite's operator")
	})
	return rec
}

// startQuietPools starts one pool per name (systems simulated hosts, discovered), and waits
// until the fleet is quiet: each BMC Ready, each server Available and powered off, so that
// what the BMCs see from then on is polling alone. The BMCs are deleted when the test ends.
func startQuietPools(t *testing.T, names []string, first, systems int) []*pool {
	t.Helper()
	pools := make([]*pool, len(names))
	for i, name := range names {
		fixtures := make([]string, systems)
		for j := range fixtures {
			fixtures[j] = "small-vm"
		}
		pools[i] = startPool(t, name, first+i*systems, fixtures)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, p := range pools {
			p.sim.SetFaults(bmcsim.Faults{})
			assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: p.name}})))
		}
		for _, p := range pools {
			assert.Eventually(t, func() bool {
				return k8s.Get(ctx, client.ObjectKey{Name: p.name}, &m.BMC{}) != nil
			}, 20*time.Second, 50*time.Millisecond, "BMC %s goes", p.name)
		}
	})
	eventually(t, 20*time.Second, func() bool {
		for _, p := range pools {
			if readyReason(p.name) != m.BMCReasonConnected {
				return false
			}
			for _, s := range poolServers(t, p.name) {
				if s.Status.State != m.ServerStateAvailable || s.Status.PowerState != m.PowerStateOff {
					return false
				}
			}
		}
		return true
	}, "every BMC Ready, every server Available and off")
	return pools
}

// serverUIDs maps the names of the pools' servers to their UIDs; nil when the API fails.
func serverUIDs(pools []*pool) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range pools {
		var list m.ServerList
		if err := k8s.List(context.Background(), &list, client.MatchingLabels{m.LabelBMC: p.name}); err != nil {
			return nil
		}
		for _, s := range list.Items {
			if !s.DeletionTimestamp.IsZero() {
				continue // a server on its way out counts as lost
			}
			out[s.Name] = s.UID
		}
	}
	return out
}

// watchServers checks the pools' servers every 50ms until the deadline and fails the test if
// the set ever differs from want: none lost, none duplicated, none deleted and re-created.
func watchServers(t *testing.T, pools []*pool, want map[string]types.UID, until time.Time) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for now := time.Now(); now.Before(until); now = <-tick.C {
		got := serverUIDs(pools)
		if got == nil {
			continue // an API hiccup is not a lost server
		}
		require.Equal(t, want, got, "servers (name → UID) at %v", now.Format(time.StampMilli))
	}
}

// minGapAfter is the least time the operator may leave between the beginnings of reconcile i
// and the next, with no event in between (the next is queued only once i has ended): a resync
// after a success; after the n-th failure in a row, the rate limiter's base·2^(n-1), capped at
// its maximum.
func minGapAfter(history []bmcReconcile, i int) time.Duration {
	if !history[i].failed() {
		return time.Duration(resyncJitter * float64(faultResync))
	}
	n := 0
	for j := i; j >= 0 && history[j].failed(); j-- {
		n++
	}
	base, most := operatorDeps.Settings.BackoffBase, operatorDeps.Settings.BackoffMax
	if n > 30 || base<<(n-1) > most {
		return most
	}
	return base << (n - 1)
}

// assertBacksOff checks every reconcile of the BMC that began in [from, to) against the one
// before it: never sooner than minGapAfter allows, so never a hot loop.
func assertBacksOff(t *testing.T, rec *reconcileLog, name string, from, to time.Time) {
	t.Helper()
	history := rec.all(name)
	for i := 1; i < len(history); i++ {
		if history[i].at.Before(from) || !history[i].at.Before(to) {
			continue
		}
		gap, least := history[i].at.Sub(history[i-1].at), minGapAfter(history, i-1)
		assert.GreaterOrEqual(t, gap, least-timingSlack,
			"%s: reconcile %d came %v after one that ended with %s/%s; the least allowed is %v",
			name, i, gap, history[i-1].ready.Status, history[i-1].ready.Reason, least)
	}
}

// maxReconciles bounds the reconciles of one BMC in a window with no events. After a success
// the next comes ≥ 0.9·resync (0.9s) later; after the n-th failure in a row ≥ base·2^(n-1)
// (0.2s, 0.4s, …). Every run of gaps that begins after a success averages ≥ 0.5s (densest:
// success, failure, failure = 0.9s + 0.2s + 0.4s for three), so at most 2 per second, plus
// 2 for the window opening on a run of failures and on a reconcile under way.
func maxReconciles(window time.Duration) int {
	return int(2*window.Seconds()) + 2
}

// credentialsIn reports whether text holds any password the fault tests use.
func credentialsIn(text string) bool {
	for _, secret := range []string{goodPassword, wrongPassword, otherWrongPassword, rotatedPassword} {
		if strings.Contains(text, secret) {
			return true
		}
	}
	return false
}

// faultCause is what a failed poll's Ready condition must say for each injected fault: a 5xx
// is a ProtocolError naming the HTTP status, a hang an Unreachable BMC that timed out.
var faultCause = map[string]*regexp.Regexp{
	m.BMCReasonProtocolError: regexp.MustCompile(`HTTP 50[03]: `),
	m.BMCReasonUnreachable:   regexp.MustCompile(`Client\.Timeout exceeded|deadline exceeded`),
}

// TestBMCFaultsKeepServersBackOffAndRecover: two BMCs of three systems each answer 10% of
// requests with a 5xx, let 5% hang until the client gives up, and answer the rest slowly. The
// servers stay exactly the same objects, the failures show in the BMCs' Ready condition with
// their cause, retries back off, the BMCs are asked a bounded number of times, and when the
// faults stop both BMCs are Ready again and the servers' power is current.
func TestBMCFaultsKeepServersBackOffAndRecover(t *testing.T) {
	ctx := context.Background()
	rec := restartOperatorForFaults(t)
	pools := startQuietPools(t, []string{"flaky-a", "flaky-b"}, 300, 3)
	servers := serverUIDs(pools)
	require.Len(t, servers, 6)

	// Faults on.
	const window = 12 * time.Second
	const seed = 9002
	start := time.Now()
	for i, p := range pools {
		p.sim.ResetStats()
		f := bmcsim.Faults{Latency: 50 * time.Millisecond, ErrorRate: 0.10, TimeoutRate: 0.05, Seed: seed + int64(i)}
		t.Logf("%s: faults %+v", p.name, f)
		p.sim.SetFaults(f)
	}
	seen := map[string]metav1.Condition{} // Ready=False conditions seen through the API, by reason
	watchUntil := start.Add(window)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for now := time.Now(); now.Before(watchUntil); now = <-tick.C {
		got := serverUIDs(pools)
		require.True(t, got == nil || maps.Equal(servers, got), "servers (name → UID) at %v: %v, want %v", now.Format(time.StampMilli), got, servers)
		for _, p := range pools {
			var b m.BMC
			if k8s.Get(ctx, client.ObjectKey{Name: p.name}, &b) != nil {
				continue
			}
			if c := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady); c != nil && c.Status != metav1.ConditionTrue {
				seen[c.Reason] = *c
			}
		}
	}
	end := time.Now()

	failures := 0
	for _, p := range pools {
		rs := rec.between(p.name, start, end)
		stats := p.sim.Stats()
		var failed int
		for _, r := range rs {
			if !r.failed() {
				continue
			}
			failed++
			if cause, ok := faultCause[r.ready.Reason]; assert.True(t, ok, "%s: reason %q of a failed poll: %s", p.name, r.ready.Reason, r.ready.Message) {
				assert.Regexp(t, cause, r.ready.Message, "%s: the Ready message names the cause", p.name)
			}
			assert.LessOrEqual(t, len(r.ready.Message), 512, "%s: the Ready message is a sentence, not a dump: %q", p.name, r.ready.Message)
			assert.False(t, credentialsIn(r.ready.Message), "%s: no credential in the Ready message", p.name)
		}
		failures += failed
		t.Logf("%s: %d reconciles (%d failed) in %v; %d Redfish requests, %d logins, %d auth failures",
			p.name, len(rs), failed, end.Sub(start).Round(time.Millisecond), stats.Requests, stats.SessionsCreated, stats.AuthFailures)

		assert.LessOrEqual(t, len(rs), maxReconciles(window), "%s: reconciles in the window", p.name)
		assert.GreaterOrEqual(t, len(rs), 3, "%s: the BMC is still polled while it fails now and then", p.name)
		assertBacksOff(t, rec, p.name, start, end)
		// A poll reads the manager (collection and member) and the systems (collection and
		// three members): six requests at most, however it fails; one more poll's worth for a
		// poll under way when the window closes. A transient fault must not cost a new login.
		assert.LessOrEqual(t, stats.Requests, int64(6*(len(rs)+1)), "%s: Redfish requests in the window", p.name)
		assert.Zero(t, stats.SessionsCreated, "%s: a 5xx or a timeout does not make the operator log in again", p.name)
		assert.Zero(t, stats.AuthFailures, "%s: no request went out without a valid session", p.name)
	}
	assert.Positive(t, failures, "the faults surfaced in the Ready condition")
	assert.NotEmpty(t, seen, "a failed poll showed through the API")
	for reason, c := range seen {
		t.Logf("seen through the API: Ready=False %s: %s", reason, c.Message)
	}

	// Faults off: both BMCs come back within the longest backoff, a poll and a timeout.
	stopped := time.Now()
	for _, p := range pools {
		p.sim.SetFaults(bmcsim.Faults{})
	}
	recovered := map[string]time.Time{}
	eventually(t, operatorDeps.Settings.BackoffMax+2*faultResync+faultTimeout+3*time.Second, func() bool {
		for _, p := range pools {
			if _, ok := recovered[p.name]; ok {
				continue
			}
			for _, r := range rec.between(p.name, stopped, time.Now()) {
				if !r.failed() {
					recovered[p.name] = r.at
					break
				}
			}
		}
		return len(recovered) == len(pools)
	}, "every BMC Ready again once the faults stop")
	for _, p := range pools {
		t.Logf("%s: Ready %v after the faults stopped", p.name, recovered[p.name].Sub(stopped).Round(time.Millisecond))
		eventually(t, 5*time.Second, func() bool { return readyReason(p.name) == m.BMCReasonConnected }, "%s Ready through the API", p.name)
	}

	// The servers' status is current: a host powered on outside the operator shows On at the
	// next polls, the others stay Off.
	poweredOn := map[string]bool{}
	for _, p := range pools {
		s := poolServers(t, p.name)[0]
		p.sim.SetPowerState(systemID(t, &s), "On")
		poweredOn[s.Name] = true
	}
	eventually(t, 3*faultResync+faultTimeout, func() bool {
		for _, p := range pools {
			for _, s := range poolServers(t, p.name) {
				want := m.PowerStateOff
				if poweredOn[s.Name] {
					want = m.PowerStateOn
				}
				if s.Status.PowerState != want {
					return false
				}
			}
		}
		return true
	}, "the servers' power state follows the BMCs")
	for _, p := range pools {
		var b m.BMC
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: p.name}, &b))
		require.NotNil(t, b.Status.LastSeen)
		assert.WithinDuration(t, time.Now(), b.Status.LastSeen.Time, 7*faultResync, "%s: last seen within lastSeenEvery (6 polls) of now", p.name)
		assert.Equal(t, m.BMCStateEnabled, b.Status.State)
		// Healthy again, the BMC is polled at the resync period, not faster.
		for _, r := range rec.between(p.name, recovered[p.name].Add(time.Nanosecond), time.Now()) {
			assert.False(t, r.failed(), "%s: no failure after recovery: %s", p.name, r.ready.Message)
		}
		assertBacksOff(t, rec, p.name, recovered[p.name].Add(time.Nanosecond), time.Now())
	}
	assert.Equal(t, servers, serverUIDs(pools), "the same servers after recovery")
}

// TestBMCCredentialChangeMidRun: a BMC's password changes behind the operator's back. The BMC
// shows AuthenticationFailed, its servers stay, logins are retried with backoff; restoring the
// password, or pointing the BMC at a new BMCSecret as a user would, brings it back.
func TestBMCCredentialChangeMidRun(t *testing.T) {
	ctx := context.Background()
	rec := restartOperatorForFaults(t)
	pools := startQuietPools(t, []string{"rotate"}, 310, 3)
	p := pools[0]
	servers := serverUIDs(pools)
	require.Len(t, servers, 3)

	// The password changes: the operator's session dies with it.
	p.sim.ResetStats()
	changed := time.Now()
	p.sim.SetCredentials(goodUser, rotatedPassword)
	eventually(t, 2*faultResync+faultTimeout+time.Second, func() bool {
		return readyReason(p.name) == m.BMCReasonAuthenticationFailed
	}, "the BMC shows AuthenticationFailed")
	var firstFailure time.Time
	for _, r := range rec.between(p.name, changed, time.Now()) {
		if r.failed() {
			firstFailure = r.at
			break
		}
	}
	require.False(t, firstFailure.IsZero())

	// For a window, the servers stay and the operator retries with backoff. With a 200ms base
	// the k-th failed attempt comes ≥ 200ms·(2^(k-1) - 1) after the first, so a window of W
	// holds at most 1 + log2(W/200ms + 1) attempts: 5 in 6s, where a poll per second would
	// make 7 and a hot loop hundreds.
	const window = 6 * time.Second
	windowEnd := firstFailure.Add(window)
	watchServers(t, pools, servers, windowEnd)
	rs := rec.between(p.name, firstFailure, windowEnd)
	stats := p.sim.Stats()
	t.Logf("%s: %d reconciles in %v after the password change; %d Redfish requests, %d auth failures, %d logins",
		p.name, len(rs), window, stats.Requests, stats.AuthFailures, stats.SessionsCreated)
	maxAttempts := 1 + int(math.Log2(float64(window)/float64(operatorDeps.Settings.BackoffBase)+1))
	assert.LessOrEqual(t, len(rs), maxAttempts, "login attempts back off")
	assert.GreaterOrEqual(t, len(rs), 3, "the operator keeps trying")
	assertBacksOff(t, rec, p.name, firstFailure, windowEnd)
	for _, r := range rs {
		assert.Equal(t, m.BMCReasonAuthenticationFailed, r.ready.Reason, "%s: %s", p.name, r.ready.Message)
		assert.Contains(t, r.ready.Message, "refused the credentials")
		assert.False(t, credentialsIn(r.ready.Message), "no credential in the Ready message")
	}
	// Each attempt is refused once (the first also has its stale session's logout refused):
	// the operator does not hammer a BMC that refuses it.
	assert.LessOrEqual(t, stats.AuthFailures, int64(len(rs)+2), "refused requests")
	assert.Zero(t, stats.SessionsCreated)
	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: p.name}, &b))
	assert.Equal(t, m.BMCStateError, b.Status.State)

	// The password is put back on the BMC: the next retry logs in again.
	restored := time.Now()
	p.sim.SetCredentials(goodUser, goodPassword)
	eventually(t, operatorDeps.Settings.BackoffMax+faultResync+faultTimeout+2*time.Second, func() bool {
		return readyReason(p.name) == m.BMCReasonConnected
	}, "the BMC is Ready again once its password is restored")
	t.Logf("%s: Ready %v after the password was restored", p.name, time.Since(restored).Round(time.Millisecond))
	assert.Equal(t, servers, serverUIDs(pools), "the same servers")
	assert.Equal(t, int64(1), p.sim.Stats().ActiveSessions, "one session, no leaked ones")

	// The password changes again, and this time the user gives the operator the new one: a new
	// BMCSecret (they are immutable), and the BMC pointed at it. That is picked up at once.
	p.sim.SetCredentials(goodUser, rotatedPassword)
	eventually(t, 2*faultResync+faultTimeout+time.Second, func() bool {
		return readyReason(p.name) == m.BMCReasonAuthenticationFailed
	}, "AuthenticationFailed again")
	createSecret(t, p.name+"-rotated", goodUser, rotatedPassword)
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: p.name}, &b))
	before := b.DeepCopy()
	b.Spec.BMCSecretRef.Name = p.name + "-rotated"
	require.NoError(t, k8s.Patch(ctx, &b, client.MergeFrom(before)))
	updated := time.Now()
	eventually(t, 2*faultTimeout+time.Second, func() bool {
		return readyReason(p.name) == m.BMCReasonConnected
	}, "the BMC is Ready with its new credentials")
	t.Logf("%s: Ready %v after the BMC was pointed at the new BMCSecret", p.name, time.Since(updated).Round(time.Millisecond))
	watchServers(t, pools, servers, time.Now().Add(2*faultResync))
	assert.Equal(t, int64(1), p.sim.Stats().ActiveSessions, "one session, no leaked ones")

	// No password reached the manager's log or an event.
	assert.False(t, credentialsIn(logs.String()), "a password appears in the manager's log")
	var evs eventsv1.EventList
	require.NoError(t, k8s.List(ctx, &evs))
	for _, e := range evs.Items {
		assert.False(t, credentialsIn(e.Note), "a password appears in event %s", e.Name)
	}
}
