package controller_test

import (
	"context"
	"crypto/x509"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc/redfish"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// The hostile-BMC tests play a BMC its tenant has compromised in-band: it answers a system with
// a gigabyte, or lists ten thousand systems. The manager is this test process: it must keep
// running with its heap bounded, and say on the BMC what the BMC did.

// heapGrowthBound is how much the process's heap may grow while a hostile BMC is polled: a few
// responses at the size limit and the garbage between collections, not the BMC's gigabyte.
const heapGrowthBound = 128 << 20

// heapPeak samples the process's heap every 10ms until the test ends, and returns a function
// that reads its peak so far. The collector runs as in the manager (--gc-percent), whose
// garbage allowance is what bounds the heap between collections.
func heapPeak(t *testing.T) (baseline uint64, peak func() uint64) {
	t.Helper()
	old := debug.SetGCPercent(manager.DefaultGCPercent)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	baseline = ms.HeapAlloc
	var top atomic.Uint64
	top.Store(baseline)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > top.Load() {
				top.Store(ms.HeapAlloc)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		debug.SetGCPercent(old)
	})
	return baseline, top.Load
}

// startHostileBMC starts a simulated BMC of one system misbehaving as faults say, and a BMC
// object for it; both go when the test ends.
func startHostileBMC(t *testing.T, name string, system int, faults bmcsim.Faults) *bmcsim.BMC {
	t.Helper()
	sim, err := bmcsim.Start(bmcsim.Options{Username: goodUser, Password: goodPassword, Systems: []bmcsim.SystemSpec{testSystem(system)}})
	require.NoError(t, err)
	sim.SetFaults(faults)
	createSecret(t, name, goodUser, goodPassword)
	createDirectBMC(t, name, "redfish+http://"+sim.Host()+"/redfish/v1", name)
	t.Cleanup(func() {
		ctx := context.Background()
		assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: name}})))
		assert.Eventually(t, func() bool { return k8s.Get(ctx, client.ObjectKey{Name: name}, &m.BMC{}) != nil },
			20*time.Second, 50*time.Millisecond, "BMC %s goes", name)
		assert.NoError(t, k8s.Delete(ctx, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		_ = sim.Close()
	})
	return sim
}

// restartOperatorWithBMCTimeout restarts the operator with Redfish requests bounded by timeout,
// restoring the suite's operator when the test ends. The hostile tests give the manager's
// default (30s) and more, not the suite's 5s: on a loaded machine under the race detector,
// reading a response up to the limit can take seconds, and it is the limit, not the timeout,
// that must stop it.
func restartOperatorWithBMCTimeout(t *testing.T, timeout time.Duration) {
	t.Helper()
	restartOperatorWith(t, func(d *controller.Dependencies) {
		d.Connect = redfish.Connector(redfish.Options{Timeout: timeout, RootCAs: suiteRoots()})
	})
}

// restartOperatorWith restarts the operator with the suite's dependencies as change leaves
// them, restoring the suite's operator when the test ends.
func restartOperatorWith(t *testing.T, change func(*controller.Dependencies)) {
	t.Helper()
	saved := operatorDeps
	require.NoError(t, stopOperator())
	change(&operatorDeps)
	require.NoError(t, startOperator())
	t.Cleanup(func() {
		assert.NoError(t, stopOperator())
		operatorDeps = saved
		assert.NoError(t, startOperator(), "restoring the suite's operator")
	})
}

// suiteRoots are the CAs of the suite's simulators, for a restarted operator's Redfish
// connector: other tests' BMCs are still polled.
func suiteRoots() *x509.CertPool {
	roots := x509.NewCertPool()
	for _, sim := range sims {
		roots.AppendCertsFromPEM(sim.CACertPEM())
	}
	return roots
}

// readyCondition is the BMC's Ready condition; the zero condition when it has none yet.
func readyCondition(name string) metav1.Condition {
	var b m.BMC
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b) == nil {
		if c := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady); c != nil {
			return *c
		}
	}
	return metav1.Condition{}
}

// assertManagerRunning fails the test if the operator's manager has stopped.
func assertManagerRunning(t *testing.T) {
	t.Helper()
	select {
	case err := <-managerDone:
		managerDone <- err // for stopOperator
		t.Fatalf("the manager stopped: %v", err)
	default:
	}
}

// TestHostileBMCGigabyteSystemIsRefused: a BMC answers its system's GET with 1 GiB, announced
// in its Content-Length or sent chunked without one. The manager reads at most the response
// limit of it, its heap stays bounded, it keeps running, and the BMC's Ready condition names
// the resource and the limit; no Server is made from the half-read system.
func TestHostileBMCGigabyteSystemIsRefused(t *testing.T) {
	restartOperatorWithBMCTimeout(t, time.Minute)
	for i, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%v", chunked), func(t *testing.T) {
			name := fmt.Sprintf("hostile-huge-%d", i)
			baseline, peak := heapPeak(t)
			sim := startHostileBMC(t, name, 900+i, bmcsim.Faults{HugeSystem: 1 << 30, HugeSystemChunked: chunked})

			var ready metav1.Condition
			eventually(t, time.Minute, func() bool {
				ready = readyCondition(name)
				return ready.Reason != "" && ready.Reason != m.BMCReasonConnected
			}, "BMC %s fails its poll", name)
			assert.Equal(t, m.BMCReasonProtocolError, ready.Reason, ready.Message)
			assert.Equal(t, metav1.ConditionFalse, ready.Status)
			assert.Contains(t, ready.Message, "/redfish/v1/Systems/1", "names the resource")
			assert.Contains(t, ready.Message, fmt.Sprintf("%d MiB", redfish.DefaultMaxResponseBytes>>20), "names the limit")
			assert.False(t, credentialsIn(ready.Message))

			// Two more polls (four requests each: managers, manager, systems, the system), each
			// refused the same way.
			asked := sim.Stats().Requests
			eventually(t, time.Minute, func() bool { return sim.Stats().Requests >= asked+8 }, "two more polls")
			assert.Equal(t, m.BMCReasonProtocolError, readyCondition(name).Reason)
			assert.Empty(t, poolServers(t, name), "no server from a system that was never read")
			assertManagerRunning(t)
			grew := int64(peak()) - int64(baseline)
			t.Logf("heap: %d MiB before, peak %d MiB", baseline>>20, peak()>>20)
			assert.Less(t, grew, int64(heapGrowthBound), "the heap grew by %d MiB", grew>>20)
		})
	}
}

// TestHostileBMCTenThousandSystemsAreCapped: a BMC lists 10,001 systems, far more than a BMC
// may have. Its Ready condition says TooManySystems with the count and the cap, no Server is
// made for any of them (not even the first 64), the members are never read, and the manager's
// heap stays bounded.
func TestHostileBMCTenThousandSystemsAreCapped(t *testing.T) {
	const name = "hostile-many"
	baseline, peak := heapPeak(t)
	sim := startHostileBMC(t, name, 910, bmcsim.Faults{ExtraSystems: 10_000})

	var ready metav1.Condition
	eventually(t, time.Minute, func() bool {
		ready = readyCondition(name)
		return ready.Reason != "" && ready.Reason != m.BMCReasonConnected
	}, "BMC %s fails its poll", name)
	assert.Equal(t, m.BMCReasonTooManySystems, ready.Reason, ready.Message)
	assert.Equal(t, metav1.ConditionFalse, ready.Status)
	assert.Contains(t, ready.Message, "10001 systems")
	assert.Contains(t, ready.Message, fmt.Sprint(redfish.DefaultMaxSystems))
	var b m.BMC
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b))
	assert.Equal(t, m.BMCStateError, b.Status.State)

	assert.Empty(t, poolServers(t, name), "no servers, not even the first few")
	assert.Less(t, sim.Stats().Requests, int64(100), "the members were not read")
	assertManagerRunning(t)
	grew := int64(peak()) - int64(baseline)
	t.Logf("heap: %d MiB before, peak %d MiB", baseline>>20, peak()>>20)
	assert.Less(t, grew, int64(heapGrowthBound), "the heap grew by %d MiB", grew>>20)
}
