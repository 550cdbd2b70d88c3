package controller_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc/ipmi"
	"github.com/ironfleet/ironfleet/test/ipmisim"
)

// IPMI passwords are at most 20 bytes (RMCP+); these are the IPMI BMCs' own.
const ipmiPassword, ipmiWrongPassword = "ipmi-Good-pw-7", "ipmi-Wrong-pw-9"

// startIPMISim starts OpenIPMI's ipmi_sim for a test (ipmisim.RequireTools: it fails in CI,
// and skips outside, when it is missing).
func startIPMISim(t *testing.T, o ipmisim.Options) *ipmisim.BMC {
	t.Helper()
	ipmisim.RequireTools(t)
	o.Dir = t.TempDir()
	sim, err := ipmisim.Start(context.Background(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sim.Close() })
	return sim
}

// TestAnIPMIBMCYieldsOneServerNamedByItsGUIDAndIsBootedOverIPMI: a BMC given as ipmi:// (OpenIPMI's
// ipmi_sim) is Connected over RMCP+, says it is IPMI and reads no inventory, and yields one
// Server named by its System GUID with identity from FRU; the lifecycle then PXE-boots it for
// discovery over IPMI (boot device, then power on). The same BMC with a wrong password is
// AuthenticationFailed.
func TestAnIPMIBMCYieldsOneServerNamedByItsGUIDAndIsBootedOverIPMI(t *testing.T) {
	ctx := context.Background()
	const uuid = "4c4c4544-0031-3910-8051-b7c04f4e4a32"
	sim := startIPMISim(t, ipmisim.Options{Username: "admin", Password: ipmiPassword, GUID: uuid,
		FRU: ipmisim.FRU{Manufacturer: "Ironfleet Labs", Product: "IF-1000", Serial: "SN-IPMI-0001"},
		MAC: "3c:ec:ef:12:34:56", FirmwareMajor: 2, FirmwareMinor: 14, ManufacturerID: 10876, ProductID: 0x1b1})
	createSecret(t, "ipmi-good", "admin", ipmiPassword)
	createDirectBMC(t, "ipmi-good", sim.Address(), "ipmi-good")
	createSecret(t, "ipmi-wrong", "admin", ipmiWrongPassword)
	createDirectBMC(t, "ipmi-wrong", sim.Address(), "ipmi-wrong")

	eventually(t, 30*time.Second, func() bool { return readyReason("ipmi-good") == m.BMCReasonConnected }, "the IPMI BMC is Connected")
	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "ipmi-good"}, &b))
	assert.Equal(t, m.BMCProtocolIPMI, b.Status.Protocol)
	assert.Equal(t, sim.Address(), b.Status.Address)
	assert.Equal(t, "Supermicro", b.Status.Manufacturer, "Get Device ID's IANA number, named")
	assert.Equal(t, "2.14", b.Status.FirmwareVersion)
	assert.Equal(t, "3c:ec:ef:12:34:56", b.Status.MACAddress, "the LAN channel's MAC")
	inv := meta.FindStatusCondition(b.Status.Conditions, m.ConditionOutOfBandInventory)
	require.NotNil(t, inv)
	assert.Equal(t, metav1.ConditionFalse, inv.Status)
	assert.Equal(t, m.ReasonInventoryUnsupported, inv.Reason)

	var s m.Server
	eventually(t, 30*time.Second, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Name: uuid}, &s) == nil && s.Status.State != ""
	}, "one Server, named by the System GUID, taken in by the lifecycle")
	assert.Equal(t, ipmi.SystemURI, s.Spec.SystemURI)
	assert.Equal(t, "ipmi-good", s.Spec.BMCRef.Name)
	assert.Equal(t, "Ironfleet Labs", s.Status.Manufacturer)
	assert.Equal(t, "IF-1000", s.Status.Model)
	assert.Equal(t, "SN-IPMI-0001", s.Status.SerialNumber)
	assert.Nil(t, s.Status.Inventory, "no out-of-band inventory: discovery brings it")
	var servers m.ServerList
	require.NoError(t, k8s.List(ctx, &servers, client.MatchingLabels{m.LabelBMC: "ipmi-good"}))
	assert.Len(t, servers.Items, 1, "one Server per IPMI BMC")

	// Discovery boots the probe over IPMI: the boot device is set to PXE, then the host is
	// powered on.
	eventually(t, 30*time.Second, func() bool {
		log := strings.Join(sim.Log(), "\n")
		boot := strings.Index(log, "set boot pxe")
		return boot >= 0 && strings.Contains(log[boot:], "set power 1")
	}, "ipmi_sim is told PXE, then power on")
	assert.Equal(t, "On", sim.PowerState())

	// IPMI has no firmware management: the server's ServerFirmware says so.
	sfw := firmwareRead(t, uuid, m.ReasonFirmwareManagementUnsupported, nil)
	assert.Empty(t, sfw.Status.Components)
	assert.Nil(t, sfw.Status.BIOS)

	eventually(t, 30*time.Second, func() bool { return readyReason("ipmi-wrong") == m.BMCReasonAuthenticationFailed },
		"a wrong password is AuthenticationFailed")

	for _, name := range []string{"ipmi-good", "ipmi-wrong"} {
		require.NoError(t, k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: name}}))
	}
}

// TestAnIPMIBMCThatDropsEverythingIsUnreachableThenRecovers: an IPMI BMC behind a UDP proxy
// that black-holes every packet is Unreachable within its call timeout (no reconcile hangs on
// it), is retried with backoff, and is Connected once packets flow again; single lost packets
// after that cost nothing (resent).
func TestAnIPMIBMCThatDropsEverythingIsUnreachableThenRecovers(t *testing.T) {
	const uuid = "4c4c4544-0031-3910-8051-b7c04f4e4a33"
	sim := startIPMISim(t, ipmisim.Options{Username: "admin", Password: ipmiPassword, GUID: uuid})
	proxy, err := ipmisim.NewProxy(sim.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })
	proxy.Blackhole(true)
	_, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	createSecret(t, "ipmi-lossy", "admin", ipmiPassword)
	createDirectBMC(t, "ipmi-lossy", "ipmi://127.0.0.1:"+port, "ipmi-lossy")

	eventually(t, 30*time.Second, func() bool { return readyReason("ipmi-lossy") == m.BMCReasonUnreachable },
		"a BMC that answers nothing is Unreachable")
	proxy.Blackhole(false)
	proxy.DropRequests(1)
	proxy.DropResponses(1)
	eventually(t, 40*time.Second, func() bool { return readyReason("ipmi-lossy") == m.BMCReasonConnected },
		"retried, and Connected once packets flow")
	eventually(t, 30*time.Second, func() bool {
		return strings.Contains(strings.Join(sim.Log(), "\n"), "set power 1")
	}, "its server is booted for discovery over IPMI")
	require.NoError(t, k8s.Delete(context.Background(), &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "ipmi-lossy"}}))
}
