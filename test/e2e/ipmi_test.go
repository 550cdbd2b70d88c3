package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/ipmisim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// TestAnIPMIVMIsEnrolledDiscoveredInstalledAndWipedWithoutRedfish: a real VM whose BMC is
// OpenIPMI's ipmi_sim, speaking only IPMI, goes through the whole lifecycle. Its Endpoint is
// matched by the MAC-prefix database's IPMI entry, whose wrong default credential is refused
// (RMCP+ authentication) before the right one logs in; its Server is named by the System GUID,
// which is the VM's SMBIOS UUID; the operator sets the boot device to PXE and powers it on
// over IPMI, and the VM boots the probe from the boot service and is discovered with exactly
// its hardware; it is claimed, the image installed to its disk and booted from there (the OS
// reports the claim's ignition), then wiped (its disk read back). ipmitool, a third-party
// client, sees the same power state, GUID and FRU; the BMC says it reads no inventory.
func TestAnIPMIVMIsEnrolledDiscoveredInstalledAndWipedWithoutRedfish(t *testing.T) {
	requireVMs(t)
	ipmisim.RequireTools(t)
	requireTenantImage(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, IPMIVMs: 1,
		DiscoveryTimeout: 5 * time.Minute, VMDiskBytes: 256 << 20})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	hosts := l.IPMIHosts()
	require.Len(t, hosts, 1)
	h := hosts[0]
	require.Nil(t, h.BMC, "no Redfish BMC behind the IPMI host")
	t.Cleanup(func() {
		if t.Failed() {
			logConsole(t, h)
			t.Logf("ipmi_sim chassis commands: %q", h.IPMI.Log())
		}
	})
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	bmcName := l.IPMIBMCName(h)

	// Enrolled and discovered, by PXE, with exactly its hardware.
	require.NoError(t, l.WaitForServers(ctx, 2, m.ServerStateAvailable, 8*time.Minute))
	var server m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server), "the Server is named by the System GUID")
	assertInventoryIsTheDefinition(t, h.Def, &server)
	require.NotNil(t, server.Spec.BMCRef)
	assert.Equal(t, bmcName, server.Spec.BMCRef.Name)
	assert.Equal(t, "ipmi:system", server.Spec.SystemURI)
	assert.Equal(t, h.Def.SMBIOS.Manufacturer, server.Status.Manufacturer, "FRU product manufacturer")
	assert.Equal(t, h.Def.SMBIOS.Product, server.Status.Model, "FRU product name")
	assert.Equal(t, h.Def.SMBIOS.Serial, server.Status.SerialNumber, "FRU product serial")

	var b m.BMC
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: bmcName}, &b))
	assert.Equal(t, m.BMCProtocolIPMI, b.Status.Protocol)
	assert.Equal(t, h.IPMI.Address(), b.Status.Address)
	require.NotNil(t, b.Spec.EndpointRef, "enrolled through its Endpoint")
	ready := meta.FindStatusCondition(b.Status.Conditions, m.ConditionReady)
	require.NotNil(t, ready)
	assert.Equal(t, m.BMCReasonConnected, ready.Reason)
	inv := meta.FindStatusCondition(b.Status.Conditions, m.ConditionOutOfBandInventory)
	require.NotNil(t, inv, "the BMC says what IPMI cannot read")
	assert.Equal(t, metav1.ConditionFalse, inv.Status)
	assert.Equal(t, m.ReasonInventoryUnsupported, inv.Reason)
	assert.NotEmpty(t, b.Status.FirmwareVersion, "Get Device ID's firmware")
	var secret m.BMCSecret
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: b.Spec.BMCSecretRef.Name}, &secret))
	assert.Equal(t, "1", secret.Annotations[m.AnnotationCredentialIndex], "the wrong default credential was refused, the second logged in")
	assert.Contains(t, h.IPMI.Log(), "set boot pxe", "the operator set the PXE boot device over IPMI")
	assert.Contains(t, h.IPMI.Log(), "set power 1", "and powered the VM on")

	// ipmitool, a third-party client, sees what the operator sees.
	// ipmitool decodes the GUID as SMBIOS orders it, as Ironfleet does: the VM's UUID.
	witness := ipmitool(t, h.IPMI, "mc", "guid")
	assert.Contains(t, strings.ToLower(witness), name, "ipmitool reads the GUID the Server is named by")
	assert.Contains(t, ipmitool(t, h.IPMI, "fru", "print", "0"), h.Def.SMBIOS.Serial)

	// Claimed and installed: the probe, PXE-booted again over IPMI, writes the image; the VM
	// boots it from its disk. Released: wiped by a probe PXE-booted over IPMI, then off.
	installAndWipe(t, l, h, "ipmi-tenant", "IPMI", func() {
		assert.Contains(t, ipmitool(t, h.IPMI, "chassis", "power", "status"), "is on", "ipmitool sees the claimed VM on")
	})
	assert.Contains(t, ipmitool(t, h.IPMI, "chassis", "power", "status"), "is off", "ipmitool sees the wiped VM off")
	assert.Equal(t, "Off", h.IPMI.PowerState())
}

// ipmitool runs ipmitool against an IPMI BMC of the lab, over RMCP+ with cipher suite 3, and
// returns its output.
func ipmitool(t *testing.T, b *ipmisim.BMC, args ...string) string {
	t.Helper()
	host, port, ok := strings.Cut(strings.TrimPrefix(b.Address(), "ipmi://"), ":")
	require.True(t, ok, b.Address())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ipmitool", append([]string{"-I", "lanplus", "-C", "3", "-H", host, "-p", port,
		"-U", "admin", "-E"}, args...)...)
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD="+lab.Password)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "ipmitool %s: %s", strings.Join(args, " "), out)
	return string(out)
}
