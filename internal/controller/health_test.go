package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller"
	"github.com/ironfleet/ironfleet/internal/controller/health"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// restartOperatorWithHealth restarts the operator reading health every second, restoring the
// suite's operator (health off) when the test ends.
func restartOperatorWithHealth(t *testing.T) {
	t.Helper()
	restartOperatorWith(t, func(d *controller.Dependencies) { d.Health = health.Settings{Poll: time.Second} })
}

func serverHealth(name string) (*m.ServerHealth, *metav1.Condition, []m.Taint) {
	var s m.Server
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s) != nil {
		return nil, nil, nil
	}
	return s.Status.Health, meta.FindStatusCondition(s.Status.Conditions, m.ConditionHealthy), s.Spec.Taints
}

// TestAFailingPartTaintsItsServer: a server's health is read from its BMC: OK and Healthy; a
// DIMM gone Critical makes it Critical, naming the DIMM, and taints it unhealthy, so that a
// claim that does not tolerate the taint waits; a drive in Warning shows too, after the DIMM;
// repaired, the server is Healthy again, untainted, and the waiting claim binds it.
func TestAFailingPartTaintsItsServer(t *testing.T) {
	ctx := context.Background()
	p, server := startOneServerWith(t, "health", 890, bmcsim.Options{})
	restartOperatorWithHealth(t)
	eventually(t, 30*time.Second, func() bool {
		h, c, _ := serverHealth(server)
		return h != nil && h.State == m.HealthOK && c != nil && c.Status == metav1.ConditionTrue && c.Reason == m.ReasonHealthOK
	}, "the server is read OK and Healthy")

	system := p.sim.SystemIDs()[0]
	require.NoError(t, p.sim.SetHealth(system, "Memory/DIMM1", "Critical"))
	require.NoError(t, p.sim.SetHealth(system, "Storage/1/Drives/Disk1", "Warning"))
	eventually(t, 30*time.Second, func() bool {
		h, c, taints := serverHealth(server)
		return h != nil && h.State == m.HealthCritical && c != nil && c.Reason == m.ReasonHealthCritical &&
			m.HasTaint(taints, m.TaintUnhealthy, m.TaintNoClaim)
	}, "Critical, and tainted")
	h, c, _ := serverHealth(server)
	assert.Equal(t, []m.HealthPart{{Kind: "Memory", Name: "DIMM1", Health: m.HealthCritical}, {Kind: "Drive", Name: "Disk1", Health: m.HealthWarning}}, h.Parts, "the worst first")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Contains(t, c.Message, "Memory DIMM1 is Critical")

	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "health", Name: "wants-it"},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: server}}}
	require.NoError(t, k8s.Create(ctx, claim))
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		b := meta.FindStatusCondition(claim.Status.Conditions, m.ConditionBound)
		return b != nil && strings.Contains(b.Message, "NoClaim taints")
	}, "the claim waits: the server is tainted unhealthy")
	assert.Nil(t, claim.Status.ServerRef)

	require.NoError(t, p.sim.SetHealth(system, "Memory/DIMM1", "OK"))
	require.NoError(t, p.sim.SetHealth(system, "Storage/1/Drives/Disk1", "OK"))
	eventually(t, 30*time.Second, func() bool {
		h, c, taints := serverHealth(server)
		return h != nil && h.State == m.HealthOK && c != nil && c.Status == metav1.ConditionTrue && len(taints) == 0
	}, "repaired: Healthy, untainted")
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
		return claim.Status.ServerRef != nil && claim.Status.ServerRef.Name == server
	}, "the waiting claim binds the server")
}
