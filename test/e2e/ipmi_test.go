package e2e

import (
	"context"
	"os"
	"os/exec"
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

// assertIPMIVMLifecycle checks what the tour did with its IPMI VM, whose BMC is OpenIPMI's
// ipmi_sim, speaking only IPMI. Its Endpoint was matched by the MAC-prefix database's IPMI
// entry, whose wrong default credential was refused (RMCP+ authentication) before the right one
// logged in; its Server is named by the System GUID, which is the VM's SMBIOS UUID; the operator
// set the boot device to PXE and powered it on over IPMI, and the VM booted the probe from the
// boot service and was discovered with exactly its hardware. The tour then installed the tenant
// image on it (its OS reported the claim's ignition) and released it: it is wiped (its disk read
// back) and off. ipmitool, a third-party client, sees the same power state, GUID and FRU; the
// BMC says it reads no inventory.
func assertIPMIVMLifecycle(t *testing.T, l *lab.Lab, h *lab.VMHost) {
	t.Helper()
	ctx := context.Background()
	require.Nil(t, h.BMC, "no Redfish BMC behind the IPMI host")
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	bmcName := l.IPMIBMCName(h)

	// Enrolled and discovered, by PXE, with exactly its hardware.
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

	// Installed, released: wiped by a probe PXE-booted over IPMI, then off.
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	require.NotNil(t, server.Status.LastInstall, "the tour installed on the IPMI VM")
	assert.True(t, server.Status.LastInstall.Succeeded, "%+v", server.Status.LastInstall)
	waitWipedAndOff(t, l, name)
	disks := h.Machine.DiskFiles()
	assertZero(t, disks[0], 0, 1<<20, "the first MiB of the installed disk")
	assertZero(t, disks[0], fileSize(t, disks[0])-1<<20, 1<<20, "its last MiB")
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
