package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/tenantimage"
)

// TestACAPIMachineOnAVMBootsItsBootstrapData: Cluster API's core controllers and Ironfleet's
// provider on a lab with a real BIOS VM. A MachineDeployment of 1 whose template selects the VM
// and names the tenant test image gets that VM: the probe installs the image with the Machine's
// bootstrap data on a config drive, SeaBIOS boots the disk, and the OS there reports the
// bootstrap data byte for byte and meta.server, its Server's name. The IronfleetMachine's and
// the Machine's providerID name that server, and its addresses hold the VM's address on the
// lab's bridge as the probe saw it. Scaled to 0, the claim goes, the VM is wiped (its disk read
// back by the host) and Available again.
func TestACAPIMachineOnAVMBootsItsBootstrapData(t *testing.T) {
	requireVMs(t)
	requireTenantImage(t)
	ctx := context.Background()
	started := time.Now()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 1, ClusterAPI: true,
		DiscoveryTimeout: 5 * time.Minute, VMDiskBytes: 256 << 20,
		// A boot lost on the way (an iPXE download that stalls under TCG) is retried, not fatal.
		Manager: func(o *manager.Options) { o.Discovery.InstallAttempts = 2 }})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 1)
	h := l.VMs[0]
	t.Cleanup(func() {
		if t.Failed() {
			logConsole(t, h)
		}
	})
	vmServer := strings.ToLower(h.Def.SMBIOS.UUID)
	require.NoError(t, l.WaitForServers(ctx, 2, m.ServerStateAvailable, 5*time.Minute))
	t.Logf("2 servers Available %v after the lab started", time.Since(started).Round(time.Second))

	tenants, err := l.ServeTenants()
	require.NoError(t, err)
	checksum, err := tenants.Checksum(tenantimage.DiskGzFile)
	require.NoError(t, err)
	d := lab.NewCAPIDemo("vm")
	// The bootstrap data: the tenant OS's instructions to report, and bytes no text would carry.
	d.BootstrapData, err = tenants.UserData(map[string]any{"cluster": d.Cluster}, []byte("\n# \x00\x01\xff bootstrap bytes\n"))
	require.NoError(t, err)
	d.Machine = &infrav1.IronfleetMachineSpec{
		ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{lab.LabelVM: "true"}},
		Image:          tenants.URL(tenantimage.DiskGzFile),
		ImageChecksum:  checksum,
		// SeaBIOS boots only the first disk: the hints name it.
		RootDeviceHints: &m.RootDeviceHints{SerialNumber: h.Def.Disks[0].Serial},
	}
	created := time.Now()
	require.NoError(t, l.CreateCAPIDemo(ctx, d, 1))
	machines, err := l.WaitForCAPIMachines(ctx, d, 1, 10*time.Minute)
	require.NoError(t, err, "machines: %+v", machines)
	im := machines[0]
	t.Logf("Machine provisioned %v after the MachineDeployment was created: %s, addresses %v",
		time.Since(created).Round(time.Second), im.Spec.ProviderID, im.Status.Addresses)

	// The claim, named after the IronfleetMachine, holds the VM.
	var claim m.ServerClaim
	require.NoError(t, l.Client.Get(ctx, client.ObjectKeyFromObject(&im), &claim), "the machine's claim has its name")
	assert.Equal(t, im.Name, claim.Labels[infrav1.LabelMachine])
	require.NotNil(t, claim.Status.ServerRef)
	require.Equal(t, vmServer, claim.Status.ServerRef.Name, "the template's selector picks the VM")
	assert.True(t, meta.IsStatusConditionTrue(im.Status.Conditions, infrav1.ConditionReady))

	var server m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: vmServer}, &server))
	require.NotNil(t, server.Status.LastInstall)
	assert.True(t, server.Status.LastInstall.Succeeded, "%+v", server.Status.LastInstall)
	assert.Equal(t, "vda", server.Status.LastInstall.Disk, "the hints named the virtio disk's serial")

	// providerID: the IronfleetMachine's names the VM's server; Cluster API copied it.
	assert.Equal(t, infrav1.ProviderIDPrefix+vmServer, im.Spec.ProviderID)
	owner := metav1.GetControllerOf(&im)
	require.NotNil(t, owner, "Cluster API's machine controller owns the IronfleetMachine")
	var machine clusterv1.Machine
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Namespace: im.Namespace, Name: owner.Name}, &machine))
	assert.Equal(t, im.Spec.ProviderID, machine.Spec.ProviderID, "the Machine's providerID")

	// Addresses: the hostname, and the VM's address on the lab's bridge as the probe saw it.
	assert.Contains(t, im.Status.Addresses, clusterv1.MachineAddress{Type: clusterv1.MachineHostName, Address: im.Name})
	var inventoryIPs []string
	require.NotNil(t, server.Status.Inventory)
	for _, nic := range server.Status.Inventory.NetworkInterfaces {
		for _, ip := range nic.IPAddresses {
			inventoryIPs = append(inventoryIPs, strings.SplitN(ip, "/", 2)[0])
		}
	}
	subnet := l.VMNetwork().Subnet()
	var onBridge []string
	for _, a := range im.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == clusterv1.MachineInternalIP && err == nil &&
			subnet.Contains(ip) && slices.Contains(inventoryIPs, a.Address) {
			onBridge = append(onBridge, a.Address)
		}
	}
	assert.NotEmpty(t, onBridge, "an InternalIP of the VM's inventory on the lab bridge %s: addresses %v, inventory %v", subnet, im.Status.Addresses, inventoryIPs)

	// The OS installed on the VM's disk reports what it read from its config drive: the
	// Machine's bootstrap data, byte for byte, and meta.server.
	require.NotNil(t, machine.Spec.Bootstrap.DataSecretName)
	var bootstrap corev1.Secret
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Namespace: machine.Namespace, Name: *machine.Spec.Bootstrap.DataSecretName}, &bootstrap))
	require.Equal(t, d.BootstrapData, bootstrap.Data[infrav1.BootstrapDataKey])
	rep := nextReport(t, tenants)
	t.Logf("the tenant OS reported %v after the MachineDeployment was created: kernel %s, config drive %s, address %s",
		time.Since(created).Round(time.Second), rep.Kernel, rep.ConfigDrive, rep.Address)
	assert.Equal(t, bootstrap.Data[infrav1.BootstrapDataKey], rep.UserData, "the installed OS reads the Machine's bootstrap data from its config drive")
	assert.Contains(t, rep.Cmdline, "BOOT_IMAGE=", "booted by the disk's boot loader")
	assert.Equal(t, "vda2", rep.ConfigDrive)
	var md struct {
		Hostname string            `json:"hostname"`
		Meta     map[string]string `json:"meta"`
	}
	require.NoError(t, json.Unmarshal(rep.MetaData, &md), "meta_data.json: %s", rep.MetaData)
	assert.Equal(t, vmServer, md.Meta["server"], "meta.server names the VM's server, for the kubelet's providerID")
	assert.Equal(t, im.Name, md.Hostname, "the hostname is the machine's name")

	// Scale to 0: Cluster API deletes the Machine; the claim goes and the VM is wiped.
	scaled := time.Now()
	require.NoError(t, l.ScaleCAPIDemo(ctx, d, 0))
	require.NoError(t, lab.Poll(ctx, 3*time.Minute, "no IronfleetMachine left", func() (bool, error) {
		left, err := l.CAPIMachines(ctx, d)
		return len(left) == 0, err
	}))
	for _, obj := range []client.Object{&claim, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: im.Namespace, Name: im.Name + "-bootstrap-data"}}} {
		require.NoError(t, lab.Poll(ctx, 2*time.Minute, obj.GetName()+" gone", func() (bool, error) {
			err := l.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}))
	}
	err = lab.Poll(ctx, 8*time.Minute, "server "+vmServer+" wiped, Available and off", func() (bool, error) {
		if err := l.Client.Get(ctx, client.ObjectKey{Name: vmServer}, &server); err != nil {
			return false, err
		}
		return server.Status.State == m.ServerStateAvailable && meta.IsStatusConditionTrue(server.Status.Conditions, m.ConditionCleaned) &&
			server.Status.LastWipe != nil && server.Status.PowerState == m.PowerStateOff, nil
	})
	require.NoError(t, err, "server %s: %s %s %v", vmServer, server.Status.State, server.Status.LastTransitionReason, server.Status.Conditions)
	t.Logf("wiped and Available %v after the scale to 0: %d disks, policy %s", time.Since(scaled).Round(time.Second),
		len(server.Status.LastWipe.Disks), server.Status.LastWipe.Policy)
	disks := h.Machine.DiskFiles()
	assertZero(t, disks[0], 0, 1<<20, "the first MiB of vda (its partition table)")
	assertZero(t, disks[0], fileSize(t, disks[0])-1<<20, 1<<20, "the last MiB of vda")
	require.NoError(t, l.WaitForServers(ctx, 2, m.ServerStateAvailable, time.Minute))
}
