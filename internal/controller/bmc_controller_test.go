package controller_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func createSecret(t *testing.T, name, user, password string) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &m.BMCSecret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: m.BMCSecretSpec{Username: user, Password: password}}))
}

func createDirectBMC(t *testing.T, name, address, secret string) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &m.BMC{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       m.BMCSpec{Access: &m.BMCAccess{Address: address}, BMCSecretRef: m.LocalObjectReference{Name: secret}},
	}))
}

func readyReason(name string) string {
	var b m.BMC
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b) != nil {
		return ""
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func simAddress(sim *bmcsim.BMC) string {
	return "redfish+https://" + sim.Host() + "/redfish/v1"
}

// TestDirectBMCCreatesOneServerPerSystem: a BMC given by address becomes Ready and yields one
// Server per system, named by UUID, with identity and inventory from Redfish.
func TestDirectBMCCreatesOneServerPerSystem(t *testing.T) {
	ctx := context.Background()
	sim := sims["direct"]
	createSecret(t, "direct", goodUser, goodPassword)
	createDirectBMC(t, "direct", simAddress(sim), "direct")

	eventually(t, 20*time.Second, func() bool { return readyReason("direct") == m.BMCReasonConnected }, "BMC becomes Ready")
	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "direct"}, &b))
	assert.Equal(t, m.BMCStateEnabled, b.Status.State)
	assert.Equal(t, "Contoso", b.Status.Manufacturer)
	assert.Equal(t, "BMC-9000", b.Status.Model)
	assert.Equal(t, "1.2.3", b.Status.FirmwareVersion)
	assert.Equal(t, "BMC-direct", b.Status.SerialNumber)
	assert.NotNil(t, b.Status.LastSeen)
	assert.Contains(t, b.Finalizers, m.BMCFinalizer)

	for _, spec := range []bmcsim.SystemSpec{testSystem(0), testSystem(1)} {
		name := strings.ToLower(spec.UUID)
		var s m.Server
		// The BMC looks at the system first (identity, inventory); the lifecycle then takes it in.
		eventually(t, 20*time.Second, func() bool {
			return k8s.Get(ctx, client.ObjectKey{Name: name}, &s) == nil && s.Status.Inventory != nil && s.Status.State != ""
		}, "server %s named by its UUID gets its inventory, and the lifecycle takes it in", name)
		assert.Equal(t, name, s.Spec.SystemUUID)
		assert.Equal(t, "direct", s.Spec.BMCRef.Name)
		assert.NotEmpty(t, s.Spec.SystemURI)
		assert.Equal(t, spec.Manufacturer, s.Status.Manufacturer)
		assert.Equal(t, spec.Model, s.Status.Model)
		assert.Equal(t, spec.SerialNumber, s.Status.SerialNumber)
		assert.Equal(t, spec.BIOSVersion, s.Status.BIOSVersion)
		assert.Equal(t, "direct", s.Labels[m.LabelBMC])

		inv := s.Status.Inventory
		var cores, sockets int32
		for _, p := range spec.Processors {
			if p.ProcessorType == "CPU" {
				cores += int32(p.TotalCores)
				sockets++
			}
		}
		assert.Equal(t, sockets, inv.CPU.Sockets)
		assert.Equal(t, cores, inv.CPU.Cores)
		assert.Equal(t, m.SummarizeInventory(inv), s.Status.Hardware, "kubectl get servers shows the summary")
		var memMiB int64
		for _, d := range spec.Memory {
			if !d.Absent {
				memMiB += int64(d.CapacityMiB)
			}
		}
		require.NotNil(t, inv.Memory.Total)
		assert.Equal(t, memMiB<<20, inv.Memory.Total.Value())
		wantDisks, gotDisks := map[string]int64{}, map[string]int64{}
		for _, d := range spec.Drives {
			wantDisks[d.SerialNumber] = d.CapacityBytes
		}
		for _, d := range inv.Storage {
			gotDisks[d.SerialNumber] = d.Size.Value()
		}
		assert.Equal(t, wantDisks, gotDisks, "each disk's serial and size")
		var wantMACs, gotMACs []string
		for _, n := range spec.NICs {
			wantMACs = append(wantMACs, strings.ToLower(n.MACAddress))
		}
		for _, n := range inv.NetworkInterfaces {
			gotMACs = append(gotMACs, n.MACAddress)
		}
		assert.ElementsMatch(t, wantMACs, gotMACs, "each NIC's MAC")
	}
}

// TestSessionsAreReusedAcrossReconciles: 20 reconciles open no new Redfish session.
func TestSessionsAreReusedAcrossReconciles(t *testing.T) {
	ctx := context.Background()
	sim := sims["reuse"]
	createSecret(t, "reuse", goodUser, goodPassword)
	createDirectBMC(t, "reuse", simAddress(sim), "reuse")
	eventually(t, 20*time.Second, func() bool { return readyReason("reuse") == m.BMCReasonConnected })

	before := sim.Stats()
	for i := 0; i < 20; i++ {
		requests := sim.Stats().Requests
		// A change to the BMC's secret re-queues the BMC (a label change keeps the credentials).
		var secret m.BMCSecret
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "reuse"}, &secret))
		secret.Labels = map[string]string{"touch": fmt.Sprint(i)}
		require.NoError(t, k8s.Update(ctx, &secret))
		eventually(t, 10*time.Second, func() bool { return sim.Stats().Requests > requests }, "reconcile %d reaches the BMC", i)
	}
	after := sim.Stats()
	// Each touch waited for a request of its own; under load a reconcile may still be under
	// way at the next touch, and two touches then share one poll: at least one request each is
	// what the loop above guarantees (it flaked at 58 of "20×3" in a busy full run).
	assert.GreaterOrEqual(t, after.Requests-before.Requests, int64(20), "each reconcile talked to the BMC")
	assert.Equal(t, before.SessionsCreated, after.SessionsCreated, "no new session across 20 reconciles")
}

// TestWrongCredentialsGiveAuthenticationFailed through a BMC given by address.
func TestWrongCredentialsGiveAuthenticationFailed(t *testing.T) {
	createSecret(t, "wrongcreds", wrongUser, wrongPassword)
	createDirectBMC(t, "wrongcreds", simAddress(sims["allwrong"]), "wrongcreds")
	eventually(t, 20*time.Second, func() bool { return readyReason("wrongcreds") == m.BMCReasonAuthenticationFailed })
	var b m.BMC
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "wrongcreds"}, &b))
	assert.Equal(t, m.BMCStateError, b.Status.State)
}

// TestUnreachableBacksOffExponentially: a BMC that never answers is retried at growing
// intervals, never in a hot loop.
func TestUnreachableBacksOffExponentially(t *testing.T) {
	start := time.Now()
	createSecret(t, "unreachable", goodUser, goodPassword)
	createDirectBMC(t, "unreachable", fmt.Sprintf("redfish+https://127.0.0.1:%d/redfish/v1", deadForBMC.port), "unreachable")
	eventually(t, 20*time.Second, func() bool { return readyReason("unreachable") == m.BMCReasonUnreachable })

	var attempts []time.Time
	eventually(t, 30*time.Second, func() bool {
		attempts = deadForBMC.since(start)
		return len(attempts) >= 6
	}, "six connection attempts")
	// With a 200ms base the gaps are ~200, 400, 800, 1600, 3200ms. A late attempt (a loaded
	// machine) lengthens one gap and shortens the next, so each gap is held to its least
	// (allowing one attempt from the creation's events rather than the backoff), and growth is
	// judged over the whole run: a constant or linear retry fails it, a noisy one does not.
	gap := func(i int) time.Duration { return attempts[i].Sub(attempts[i-1]) }
	for i := 2; i < 6; i++ {
		least := testSettingBase << (i - 2)
		assert.GreaterOrEqual(t, gap(i), least-timingSlack, "gap %d (%v) is at least %v", i, gap(i), least)
	}
	assert.Greater(t, gap(5), 2*gap(2), "the wait grows: gap 5 (%v) against gap 2 (%v)", gap(5), gap(2))
	assert.GreaterOrEqual(t, gap(5), 8*testSettingBase, "by the fifth retry the wait is at least 8× the base")
}

// TestUnsupportedSchemeIsReportedNotCrashed.
func TestUnsupportedSchemeIsReportedNotCrashed(t *testing.T) {
	createSecret(t, "ilo4", goodUser, goodPassword)
	createDirectBMC(t, "ilo4", "ilo4://10.0.0.8", "ilo4")
	createSecret(t, "libvirt", goodUser, goodPassword)
	createDirectBMC(t, "libvirt", "libvirt://10.0.0.6:623", "libvirt")
	for _, name := range []string{"ilo4", "libvirt"} {
		eventually(t, 20*time.Second, func() bool { return readyReason(name) == m.BMCReasonUnsupportedProtocol }, name)
		var b m.BMC
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b))
		c := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady)
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Contains(t, c.Message, "not supported")
	}
}

// TestDeletingABMCKeepsClaimedServers: unclaimed Servers go with their BMC, claimed ones stay.
func TestDeletingABMCKeepsClaimedServers(t *testing.T) {
	ctx := context.Background()
	createSecret(t, "deleteme", goodUser, goodPassword)
	createDirectBMC(t, "deleteme", simAddress(sims["deleteme"])+"/Systems/1", "deleteme")

	var servers m.ServerList
	eventually(t, 20*time.Second, func() bool {
		_ = k8s.List(ctx, &servers, client.MatchingLabels{m.LabelBMC: "deleteme"})
		return len(servers.Items) == 1
	}, "one server (the address names one system)")
	// A tenant's claim holds the server (bound by hand here: the server never gets discovered).
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "tenant"},
		Spec: m.ServerClaimSpec{ServerRef: &m.LocalObjectReference{Name: "no-such-server"}}}
	require.NoError(t, k8s.Create(ctx, claim))
	claimed := servers.Items[0]
	before := claimed.DeepCopy()
	claimed.Spec.ServerClaimRef = &m.ObjectReference{Namespace: "default", Name: "tenant", UID: string(claim.UID)}
	require.NoError(t, k8s.Patch(ctx, &claimed, client.MergeFrom(before)))

	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "deleteme"}, &b))
	require.NoError(t, k8s.Delete(ctx, &b))
	eventually(t, 20*time.Second, func() bool { return k8s.Get(ctx, client.ObjectKey{Name: "deleteme"}, &b) != nil }, "BMC goes")
	var kept m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: claimed.Name}, &kept), "the claimed server stays")
}
