package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// firmwareVersion is the BIOS version the e2e baseline brings its VM to.
const firmwareVersion = "2.0.0-e2e"

// startFirmwareUpdate has a FirmwareBaseline raise the BIOS of VM h (an Available pool server)
// and set one of its BIOS attributes, and returns the check to call once the rest of the test
// is done: the update runs meanwhile. The check waits for the update to succeed and proves it
// on the VM: the server was taken out of service, its BMC installed the image it fetched from
// Ironfleet's boot service (which fetched it from its origin) and
// staged the attribute, the VM was restarted by the BMC with the new firmware (a new QEMU
// publishing the new SMBIOS type 0), its probe reported that version from inside the host, and
// the server is back Available, untainted, FirmwareCompliant.
func startFirmwareUpdate(t *testing.T, l *lab.Lab, h *lab.VMHost) (check func()) {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	var s m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &s))
	require.Equal(t, m.ServerStateAvailable, s.Status.State)
	before := h.BMC.BIOSVersion(h.SystemID)
	require.NotEqual(t, firmwareVersion, before)
	require.NotNil(t, s.Status.Inventory.DMI)
	assert.Equal(t, before, s.Status.Inventory.DMI.BIOS.Version, "VM %s: before the update the host reports its BMC's BIOS version", h.Def.Name)

	patch := client.MergeFrom(s.DeepCopy())
	metav1.SetMetaDataLabel(&s.ObjectMeta, "e2e.ironfleet.dev/firmware", "bios")
	require.NoError(t, l.Client.Patch(ctx, &s, patch))
	url, checksum := l.Images.Add("e2e-bios.bin", bmcsim.FirmwareImage("BIOS", firmwareVersion))
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "e2e-bios"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: metav1.LabelSelector{MatchLabels: map[string]string{"e2e.ironfleet.dev/firmware": "bios"}},
		// Served to the BMC by Ironfleet's boot service, which fetches it from the origin.
		Components: []m.BaselineComponent{{Component: "BIOS", Version: firmwareVersion,
			Image: m.FirmwareImage{URL: url, Checksum: checksum, ServedBy: m.ImageServedByBootService}}},
		Settings: &m.BaselineSettings{BIOS: map[string]string{"ProcVirtualization": "Disabled"}},
	}}
	require.NoError(t, l.Client.Create(ctx, b))
	started := time.Now()
	fetchedBefore := counter(t, "ironfleet_boot_firmware_fetches_total", "result", "ok")

	// What the server goes through, seen every 200 ms until the update ends (it holds the
	// server out of service for tens of seconds: a VM's power-off, the BMC's task, its boot).
	var mu sync.Mutex
	var states []m.ServerState
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			var cur m.Server
			if l.Client.Get(ctx, client.ObjectKey{Name: name}, &cur) == nil {
				mu.Lock()
				if len(states) == 0 || states[len(states)-1] != cur.Status.State {
					states = append(states, cur.Status.State)
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()

	return func() {
		t.Helper()
		var sfw m.ServerFirmware
		err := lab.Poll(ctx, 8*time.Minute, "VM "+h.Def.Name+"'s firmware update succeeds", func() (bool, error) {
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &sfw); err != nil {
				return false, nil
			}
			u := sfw.Status.Update
			if u != nil && u.State == m.FirmwareUpdateFailed {
				return false, fmt.Errorf("the update failed: %s: %s", u.Reason, u.Message)
			}
			return u != nil && u.State == m.FirmwareUpdateSucceeded, nil
		})
		close(stop)
		<-done
		require.NoError(t, err, "last seen: %+v", sfw.Status.Update)
		t.Logf("VM %s: BIOS %s → %s and ProcVirtualization set in %v", h.Def.Name, before, firmwareVersion, time.Since(started).Round(time.Second))
		u := sfw.Status.Update
		assert.True(t, u.HostReset)
		assert.Contains(t, u.Message, "the host's own SMBIOS agrees (BIOS "+firmwareVersion+")")
		mu.Lock()
		assert.Contains(t, states, m.ServerStateMaintenance, "VM %s was taken out of service: %v", h.Def.Name, states)
		assert.Equal(t, m.ServerStateAvailable, states[len(states)-1], "and is back in the pool: %v", states)
		mu.Unlock()

		assert.Equal(t, firmwareVersion, h.BMC.BIOSVersion(h.SystemID), "the BMC runs the new BIOS")
		assert.Equal(t, firmwareVersion, h.Machine.BIOSVersion(), "the VM was started anew with it (SMBIOS type 0)")
		assert.Equal(t, firmwareVersion, sfw.Status.BIOSVersion)
		require.NotNil(t, sfw.Status.BIOS)
		assert.Equal(t, "Disabled", sfw.Status.BIOS.Attributes["ProcVirtualization"], "the staged attribute applied at the reset")

		var s m.Server
		require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &s))
		assert.Equal(t, m.ServerStateAvailable, s.Status.State)
		assert.Empty(t, s.Spec.Taints, "the update's taint is gone")
		require.NotNil(t, s.Status.Inventory.DMI)
		assert.Equal(t, firmwareVersion, s.Status.Inventory.DMI.BIOS.Version, "the probe read the new BIOS version from inside the host")
		assert.True(t, s.Status.Inventory.ReportedAt.After(started), "from a report after the update began")
		assert.True(t, meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionServerFirmwareCompliant), "FirmwareCompliant: %+v",
			meta.FindStatusCondition(s.Status.Conditions, m.ConditionServerFirmwareCompliant))
		assert.Greater(t, counter(t, "ironfleet_boot_firmware_fetches_total", "result", "ok"), fetchedBefore,
			"the boot service fetched the image from its origin")
		var images corev1.SecretList
		require.NoError(t, l.Client.List(ctx, &images, client.MatchingLabels{m.LabelFirmwareImage: "true", m.LabelServer: name}))
		assert.Empty(t, images.Items, "the Secret asking the boot service for the image, and its URL, are gone")
		var maints m.ServerMaintenanceList
		require.NoError(t, l.Client.List(ctx, &maints))
		for _, sm := range maints.Items {
			assert.NotEqual(t, name, sm.Spec.ServerRef.Name, "no maintenance is left holding VM %s", h.Def.Name)
		}
		require.NoError(t, l.Client.Delete(ctx, b))
	}
}
