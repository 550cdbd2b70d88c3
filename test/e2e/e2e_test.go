// Package e2e drives the whole lifecycle through the lab: the same control plane, simulated
// fleet, boot service and operator wiring that `make lab` runs.
package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/ipmisim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/syncbuf"
)

// operatorLog collects the log of every operator the tests run (controller-runtime takes one
// logger per process), so the secrets test can read it all.
var operatorLog = &syncbuf.Buffer{}

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(operatorLog), zap.UseDevMode(true)))
	os.Exit(m.Run())
}

func startLab(t *testing.T, servers int) *lab.Lab {
	t.Helper()
	l, err := lab.Start(context.Background(), lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: servers, BMCs: 2})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	return l
}

// TestTour is `make lab ARGS=--scenario=tour` as a test, with a Redfish VM and an IPMI one (as
// make lab runs by default): enroll → discover → claim → release → wipe → available, and the
// IPMI VM installs the tenant image and boots it from disk. It is also the IPMI VM's whole
// lifecycle without Redfish, checked afterwards (assertIPMIVMLifecycle): one lab for both, as a
// VM's boots cost minutes under TCG.
func TestTour(t *testing.T) {
	requireVMs(t)
	ipmisim.RequireTools(t)
	requireTenantImage(t)
	l, err := lab.Start(context.Background(), lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 4, BMCs: 2, VMs: 1, IPMIVMs: 1})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	hosts := l.IPMIHosts()
	require.Len(t, hosts, 1)
	t.Cleanup(func() {
		if t.Failed() {
			for _, h := range l.VMs {
				logConsole(t, h)
			}
			t.Logf("ipmi_sim chassis commands: %q", hosts[0].IPMI.Log())
			logOperator(t, 150)
		}
	})
	var said syncbuf.Buffer
	out := io.MultiWriter(&testWriter{t: t}, &said)
	require.NoError(t, l.Tour(context.Background(), out))
	assert.Contains(t, said.String(), "behind IPMI (ipmi_sim at ", "the tour installs on the IPMI VM")
	assertIPMIVMLifecycle(t, l, hosts[0])
	// kubectl works against the lab, as the lab prints it.
	_, err = os.Stat(l.Kubectl)
	require.NoError(t, err)
}

// TestMaintenanceAndRestartMidLifecycle: a claimed server taken into Enforced maintenance while
// the manager is restarted returns to its claim; a server discovered across a restart ends
// Available; nothing is lost.
func TestMaintenanceAndRestartMidLifecycle(t *testing.T) {
	ctx := context.Background()
	l := startLab(t, 4)

	// Restart while the fleet is being enrolled and discovered.
	require.Eventually(t, func() bool {
		var servers m.ServerList
		return l.Client.List(ctx, &servers) == nil && len(servers.Items) > 0
	}, time.Minute, 50*time.Millisecond)
	require.NoError(t, l.RestartManager())
	require.NoError(t, l.WaitForServers(ctx, 4, m.ServerStateAvailable, 3*time.Minute))

	server, err := l.ClaimAndWait(ctx, l.SampleClaim("db"), 2*time.Minute)
	require.NoError(t, err)

	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "firmware"},
		Spec: m.ServerMaintenanceSpec{ServerRef: m.LocalObjectReference{Name: server}, Reason: "BIOS update", Policy: m.MaintenanceEnforced, Power: m.PowerOff}}
	require.NoError(t, l.Client.Create(ctx, sm))
	require.NoError(t, l.RestartManager(), "restart with the maintenance in flight")
	waitState(t, l, server, m.ServerStateMaintenance)

	require.NoError(t, l.Client.Delete(ctx, sm))
	s := waitState(t, l, server, m.ServerStateReserved)
	require.NotNil(t, s.Spec.ServerClaimRef)
	assert.Equal(t, "db", s.Spec.ServerClaimRef.Name, "the server returns to its claim")

	// Release across a restart: the server is wiped and Available, and nothing else moved.
	var claim m.ServerClaim
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "db"}, &claim))
	require.NoError(t, l.Client.Delete(ctx, &claim))
	require.NoError(t, l.RestartManager())
	s = waitState(t, l, server, m.ServerStateAvailable)
	assert.True(t, meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned))
	require.NoError(t, l.WaitForServers(ctx, 4, m.ServerStateAvailable, time.Minute))
	var sbcs m.ServerBootConfigurationList
	require.NoError(t, l.Client.List(ctx, &sbcs))
	assert.Empty(t, sbcs.Items, "no boot configuration is left behind")
}

func waitState(t *testing.T, l *lab.Lab, name string, state m.ServerState) *m.Server {
	t.Helper()
	var s m.Server
	require.Eventually(t, func() bool {
		return l.Client.Get(context.Background(), client.ObjectKey{Name: name}, &s) == nil && s.Status.State == state
	}, 2*time.Minute, 50*time.Millisecond, "server %s reaches %s", name, state)
	return &s
}

// logOperator logs the last n lines the tests' operators wrote (at a failure: what they did
// last).
func logOperator(t *testing.T, n int) {
	lines := strings.Split(strings.TrimSpace(operatorLog.String()), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	t.Logf("operator log (last %d lines):\n%s", len(lines), strings.Join(lines, "\n"))
}

type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
