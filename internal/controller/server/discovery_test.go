package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// TestDirtyRediscoveryWithoutAWipeReportTimesOut: a server taken from its tenant and
// re-discovered with the wipe probe, whose last inventory (the boot before the tenant's) was
// reported in the second this attempt began, and whose wipe never reports (its boot
// configuration deleted, found by TestDeletionNeverPoolsAnUnwipedMachine), is not taken as
// reported: its attempt times out like any other (it waited for ever, "inventory received").
func TestDirtyRediscoveryWithoutAWipeReportTimesOut(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 10, 0, 0, 600_000_000, time.UTC)
	server := &m.Server{
		Spec: m.ServerSpec{SystemURI: "/redfish/v1/Systems/1"},
		Status: m.ServerStatus{State: m.ServerStateDiscovery, LastTransitionTime: &metav1.Time{Time: start}, DiscoveryAttempts: 1,
			Inventory:  &m.Inventory{Source: "Probe", ReportedAt: &metav1.Time{Time: start.Truncate(time.Second)}},
			Conditions: []metav1.Condition{{Type: m.ConditionCleaned, Status: metav1.ConditionFalse, Reason: m.ReasonTakenFromTenant}}},
	}
	now := start.Add(time.Second)
	r := Reconciler{Discovery: DiscoverySettings{Timeout: 4 * time.Second, Attempts: 2}, Now: func() time.Time { return now },
		Client: fake.NewClientBuilder().WithScheme(testenv.Scheme()).Build(), Probe: probeboot.Config{Namespace: "system"}}
	st, err := r.discovery(ctx, server)
	require.NoError(t, err)
	assert.Empty(t, st.event, "the attempt goes on")
	assert.Equal(t, m.ReasonAwaitingReport, st.reason)
	assert.Contains(t, st.message, "waiting for the wipe report until")
	assert.Equal(t, 3*time.Second, st.requeueAfter, "looked at again at its deadline")

	now = start.Add(5 * time.Second)
	st, err = r.discovery(ctx, server)
	require.NoError(t, err)
	assert.Equal(t, fsm.EventDiscoveryTimedOut, st.event, "no wipe report by the deadline: the attempt timed out")
}

// A probe boot the boot service will not serve says why, in the Server's Ready condition: that
// is what a person must fix, not "waiting".
func TestWaitingForTheBootServiceSaysWhatItFoundWrong(t *testing.T) {
	sbc := &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-discovery"}}
	st := waitForBootService(sbc)
	assert.Equal(t, m.ReasonWaitingForBootService, st.reason)
	assert.Equal(t, "waiting for the boot service to mark system/s1-discovery Ready", st.message)

	sbc.Status.Conditions = []metav1.Condition{{Type: m.ConditionReady, Status: metav1.ConditionFalse, Reason: "MACsUnknown", Message: "server s1 has no NIC MAC address"}}
	st = waitForBootService(sbc)
	assert.Equal(t, m.ReasonWaitingForBootService, st.reason)
	assert.Equal(t, "boot configuration system/s1-discovery is not Ready: MACsUnknown: server s1 has no NIC MAC address", st.message)
}

// A probe's report that replaces the BMC's out-of-band inventory in the same second (stamps are
// whole seconds; in the lab both come within one) wakes the server: its discovery waited for
// the attempt's timeout before (found by the tour).
func TestAReportInTheSecondOfTheBMCsInventoryWakesTheServer(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC))
	old := &m.Server{Status: m.ServerStatus{State: m.ServerStateDiscovery, Inventory: &m.Inventory{Source: "Redfish", ReportedAt: &at}}}
	now := old.DeepCopy()
	now.Status.Inventory.Source = "Probe"
	assert.True(t, serverChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: now}), "the probe's report is news")
	assert.False(t, serverChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: old.DeepCopy()}), "nothing new is not")
}

// An install's boot configuration that does not become Ready shows in Provisioned (Ready is not
// written in Reserved, and the claim mirrors Provisioned): at once when the boot service found
// something wrong, after bootServiceGrace when it says nothing, and never in the moment the
// boot service usually takes.
func TestAnInstallWaitingForTheBootServiceShowsInProvisioned(t *testing.T) {
	made := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	now := made.Add(2 * time.Second)
	r := Reconciler{Now: func() time.Time { return now }}
	sbc := &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "s1-provision", CreationTimestamp: metav1.NewTime(made)}}
	provisioned := func(st step) *metav1.Condition {
		s := &m.Server{}
		if st.apply != nil {
			st.apply(s)
		}
		return meta.FindStatusCondition(s.Status.Conditions, m.ConditionProvisioned)
	}

	st := r.installWaitsForBootService(sbc)
	assert.Nil(t, provisioned(st), "a moment's wait is not shown")
	assert.Equal(t, bootServiceGrace-2*time.Second, st.requeueAfter, "looked at again when the grace is over")

	now = made.Add(bootServiceGrace)
	c := provisioned(r.installWaitsForBootService(sbc))
	if assert.NotNil(t, c, "a long wait is shown") {
		assert.Equal(t, m.ReasonWaitingForBootService, c.Reason)
		assert.Equal(t, "waiting for the boot service to mark system/s1-provision Ready", c.Message)
	}

	now = made.Add(time.Second)
	sbc.Status.Conditions = []metav1.Condition{{Type: m.ConditionReady, Status: metav1.ConditionFalse, Reason: "ArtifactMissing", Message: "no probe kernel"}}
	c = provisioned(r.installWaitsForBootService(sbc))
	if assert.NotNil(t, c, "what the boot service found wrong is shown at once") {
		assert.Equal(t, metav1.ConditionFalse, c.Status)
		assert.Equal(t, "boot configuration system/s1-provision is not Ready: ArtifactMissing: no probe kernel", c.Message)
	}
}

// TestLoaderNotRunSaysWhyABootTimedOut: a boot whose loader DHCP offered in this attempt, and
// of which nothing was asked for after, timed out because the firmware did not run the loader;
// for iPXE on a UEFI server the message says to set spec.bootMode to UEFISecureBoot. Anything
// asked for after the offer, or an offer from an earlier attempt, says nothing.
func TestLoaderNotRunSaysWhyABootTimedOut(t *testing.T) {
	started := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	offer := func(reason, msg string, at time.Time) *m.ServerBootConfiguration {
		sbc := &m.ServerBootConfiguration{}
		sbc.Status.Conditions = []metav1.Condition{{Type: m.ConditionLoaderOffered, Status: metav1.ConditionTrue,
			Reason: reason, Message: msg, LastTransitionTime: metav1.NewTime(at)}}
		return sbc
	}
	ipxe := "DHCP offered snponly.efi (iPXE, unsigned: a firmware with Secure Boot on refuses it) to 52:54:00:1f:00:02"
	uefi := &m.Server{Status: m.ServerStatus{BootMode: m.BootModeUEFI, BootModeSource: m.BootModeSourceBMC}}

	why := loaderNotRun(uefi, offer(m.ReasonLoaderIPXE, ipxe, started.Add(20*time.Second)), started)
	assert.Equal(t, ipxe+" at 2026-11-28T09:00:20Z, and nothing of the boot was asked for after it: the firmware did not run the loader (its console says why); "+
		`a firmware with Secure Boot on refuses unsigned iPXE: if this server's is on, set spec.bootMode to UEFISecureBoot (its boot mode is "UEFI", as its BMC reports)`, why)

	legacy := &m.Server{Spec: m.ServerSpec{BootMode: m.BootModeLegacy}}
	why = loaderNotRun(legacy, offer(m.ReasonLoaderIPXE, ipxe, started.Add(time.Second)), started)
	assert.NotEmpty(t, why)
	assert.NotContains(t, why, "set spec.bootMode", "a legacy BIOS has no Secure Boot")

	why = loaderNotRun(uefi, offer(m.ReasonLoaderSignedChain, "DHCP offered shimx64.efi (shim, the signed chain for Secure Boot) to x", started.Add(time.Second)), started)
	assert.Contains(t, why, "Verification failed")

	assert.Empty(t, loaderNotRun(uefi, offer(m.ReasonLoaderIPXE, ipxe, started.Add(-time.Minute)), started), "an offer of an earlier attempt")
	assert.Empty(t, loaderNotRun(uefi, &m.ServerBootConfiguration{}, started), "no offer recorded")
	scripted := offer(m.ReasonLoaderIPXE, ipxe, started.Add(time.Second))
	scripted.Status.Secrets = &m.BootSecrets{Boot: "b", HostAddress: "10.0.0.5"}
	assert.Empty(t, loaderNotRun(uefi, scripted, started), "the script was asked for: the loader ran")
	served := offer(m.ReasonLoaderIPXE, ipxe, started.Add(time.Second))
	meta.SetStatusCondition(&served.Status.Conditions, metav1.Condition{Type: m.ConditionIgnitionServed, Status: metav1.ConditionTrue, Reason: m.ReasonIgnitionServedOnce})
	assert.Empty(t, loaderNotRun(uefi, served, started), "the ignition was served")
	progressed := offer(m.ReasonLoaderIPXE, ipxe, started.Add(time.Second))
	progressed.Status.Conditions = append(progressed.Status.Conditions, metav1.Condition{Type: m.ConditionBootProgress, Status: metav1.ConditionTrue,
		Reason: "InitStarted", LastTransitionTime: metav1.NewTime(started.Add(time.Minute))})
	assert.Empty(t, loaderNotRun(uefi, progressed, started), "the probe reported progress")
}
