package registry_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// hardwareReport is a report of a host with disks (name=serial) and NICs.
func hardwareReport(uuid string, disks []string, macs ...string) []byte {
	rep := report.Report{SystemUUID: uuid, ProbeVersion: "test", CollectedAt: time.Now(), Inventory: m.Inventory{CPU: m.CPUSummary{Cores: 4}}}
	for _, d := range disks {
		rep.Inventory.Storage = append(rep.Inventory.Storage, m.StorageDevice{Name: d, SerialNumber: "SN-" + d, Size: resource.NewQuantity(1<<40, resource.BinarySI)})
	}
	for _, mac := range macs {
		rep.Inventory.NetworkInterfaces = append(rep.Inventory.NetworkInterfaces, m.NetworkInterface{MACAddress: mac})
	}
	data, _ := json.Marshal(rep)
	return data
}

// inState puts the server in state, its Cleaned condition as given.
func inState(t *testing.T, name string, state m.ServerState, cleaned metav1.ConditionStatus) {
	t.Helper()
	s := server(t, name)
	s.Status.State = state
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: m.ConditionCleaned, Status: cleaned, Reason: "Test"})
	require.NoError(t, env.Client.Status().Update(context.Background(), s))
	require.Eventually(t, func() bool {
		var c m.Server
		return cache.Get(context.Background(), client.ObjectKey{Name: name}, &c) == nil && c.ResourceVersion == s.ResourceVersion
	}, 10*time.Second, 20*time.Millisecond, "the registry's cache shows the server in %s", state)
}

func hardwareRecord(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	return meta.FindStatusCondition(server(t, name).Status.Conditions, m.ConditionHardwareRecord)
}

// TestReportsOutsideADiscoveryDoNotRewriteTheRecord: the disks and NICs a discovery recorded
// stay the server's whatever a later report lists; the registry says what differs.
func TestReportsOutsideADiscoveryDoNotRewriteTheRecord(t *testing.T) {
	const uuid = "5b2e9c14-8d3a-4f71-a6e0-3c9b1d7e2f58"
	token := signer.Token(uuid, boot)
	newServer(t, uuid, uuid)
	status, msg := post(t, "/v1/reports", token, hardwareReport(uuid, []string{"sda", "sdb"}, "02:00:00:00:00:01", "02:00:00:00:00:02"))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool {
		s := server(t, uuid)
		return s.Status.Inventory != nil && len(s.Status.Inventory.Storage) == 2
	}, 10*time.Second, 20*time.Millisecond)

	inState(t, uuid, m.ServerStateCleanup, metav1.ConditionFalse)
	status, msg = post(t, "/v1/reports", token, hardwareReport(uuid, []string{"sda"}, "02:00:00:00:00:01", "52:54:00:66:66:66"))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool { c := hardwareRecord(t, uuid); return c != nil && c.Status == metav1.ConditionFalse }, 10*time.Second, 20*time.Millisecond)
	c := hardwareRecord(t, uuid)
	assert.Equal(t, m.ReasonHardwareChanged, c.Reason)
	assert.Contains(t, c.Message, "disk sdb (serial SN-sdb, 1.0 TiB) missing")
	assert.Contains(t, c.Message, "NIC 02:00:00:00:00:02 missing")
	assert.Contains(t, c.Message, "NIC 52:54:00:66:66:66 added")
	inv := server(t, uuid).Status.Inventory
	assert.Len(t, inv.Storage, 2, "the record stands")
	assert.Equal(t, "02:00:00:00:00:02", inv.NetworkInterfaces[1].MACAddress)

	// The same hardware again: it matches.
	status, msg = post(t, "/v1/reports", token, hardwareReport(uuid, []string{"sdb", "sda"}, "02:00:00:00:00:02", "02:00:00:00:00:01"))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool { c := hardwareRecord(t, uuid); return c != nil && c.Status == metav1.ConditionTrue }, 10*time.Second, 20*time.Millisecond)
	assert.Equal(t, m.ReasonHardwareMatches, hardwareRecord(t, uuid).Reason)

	// A dirty server's discovery is a wipe: judged against the record, which stands.
	inState(t, uuid, m.ServerStateDiscovery, metav1.ConditionFalse)
	status, msg = post(t, "/v1/reports", token, hardwareReport(uuid, nil, "02:00:00:00:00:01"))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool { c := hardwareRecord(t, uuid); return c != nil && c.Status == metav1.ConditionFalse }, 10*time.Second, 20*time.Millisecond)
	assert.Len(t, server(t, uuid).Status.Inventory.Storage, 2)

	// A clean server's discovery records what it finds.
	inState(t, uuid, m.ServerStateDiscovery, metav1.ConditionTrue)
	status, msg = post(t, "/v1/reports", token, hardwareReport(uuid, []string{"sda", "sdb", "sdc"}, "02:00:00:00:00:01"))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, func() bool { return len(server(t, uuid).Status.Inventory.Storage) == 3 }, 10*time.Second, 20*time.Millisecond)
}

// bootModeReport is a report of a host whose firmware booted in mode ("" for unknown).
func bootModeReport(uuid string, mode m.BootMode) []byte {
	rep := report.Report{SystemUUID: uuid, ProbeVersion: "test", CollectedAt: time.Now(),
		Inventory: m.Inventory{CPU: m.CPUSummary{Cores: 4}, BootMode: mode}}
	data, _ := json.Marshal(rep)
	return data
}

// TestAReportsBootModeWinsOverTheBMCs: the mode a report read from the firmware's variables is
// the server's (source Probe), whatever its BMC said, and whatever the report's inventory does
// to the record; a report that could not tell changes nothing.
func TestAReportsBootModeWinsOverTheBMCs(t *testing.T) {
	const uuid = "7e4a2c91-5b3d-4e8f-a1c6-9d0b2f7e3a45"
	token := signer.Token(uuid, boot)
	newServer(t, uuid, uuid)
	s := server(t, uuid)
	s.Status.BootMode, s.Status.BootModeSource = m.BootModeUEFI, m.BootModeSourceBMC
	require.NoError(t, env.Client.Status().Update(context.Background(), s))
	bootModeIs := func(mode m.BootMode, source string) func() bool {
		return func() bool {
			s := server(t, uuid)
			return s.Status.BootMode == mode && s.Status.BootModeSource == source
		}
	}
	require.Eventually(t, func() bool {
		var c m.Server
		return cache.Get(context.Background(), client.ObjectKey{Name: uuid}, &c) == nil && c.Status.BootModeSource == m.BootModeSourceBMC
	}, 10*time.Second, 20*time.Millisecond)

	status, msg := post(t, "/v1/reports", token, bootModeReport(uuid, m.BootModeUEFISecureBoot))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, bootModeIs(m.BootModeUEFISecureBoot, m.BootModeSourceProbe), 10*time.Second, 20*time.Millisecond,
		"the probe's word replaces the BMC's")

	// Outside a discovery the record of the hardware stands, but the firmware's mode is news.
	inState(t, uuid, m.ServerStateCleanup, metav1.ConditionFalse)
	status, msg = post(t, "/v1/reports", token, bootModeReport(uuid, m.BootModeUEFI))
	require.Equal(t, http.StatusNoContent, status, msg)
	require.Eventually(t, bootModeIs(m.BootModeUEFI, m.BootModeSourceProbe), 10*time.Second, 20*time.Millisecond,
		"a later report's mode is the server's")

	// The registry answers once the report is stored (or found to change nothing).
	status, msg = post(t, "/v1/reports", token, bootModeReport(uuid, ""))
	require.Equal(t, http.StatusNoContent, status, msg)
	assert.True(t, bootModeIs(m.BootModeUEFI, m.BootModeSourceProbe)(), "a report without a mode keeps the one known")
}
