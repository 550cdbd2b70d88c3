package controller_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/report"
	"github.com/ironfleet/ironfleet/metalprobe/post"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
)

// cleanupToken waits until the server is in Cleanup with its wipe boot Ready, and returns the
// ignition that boot serves: what an attacker who fetched it would hold.
func cleanupToken(t *testing.T, name string) ignition.Config {
	t.Helper()
	ctx := context.Background()
	var cfg ignition.Config
	eventually(t, 30*time.Second, func() bool {
		var s m.Server
		if k8s.Get(ctx, client.ObjectKey{Name: name}, &s) != nil || s.Status.State != m.ServerStateCleanup || s.Status.ProbeBoot == "" {
			return false
		}
		var sbcs m.ServerBootConfigurationList
		require.NoError(t, k8s.List(ctx, &sbcs, client.InNamespace(systemNamespace), client.MatchingLabels{m.LabelServer: name}))
		for _, sbc := range sbcs.Items {
			if sbc.Spec.Purpose != m.BootPurposeCleanup || sbc.Annotations[m.AnnotationProbeBoot] != s.Status.ProbeBoot || sbc.Spec.IgnitionSecretRef == nil {
				continue
			}
			var secret corev1.Secret
			if k8s.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: sbc.Spec.IgnitionSecretRef.Name}, &secret) != nil {
				return false
			}
			c, err := ignition.Parse(secret.Data[ignition.SecretKey])
			require.NoError(t, err)
			cfg = c
			return true
		}
		return false
	}, "server %s in Cleanup with its wipe boot's ignition", name)
	return cfg
}

// forgeReport sends, with the wipe boot's token, a report made from the server's recorded
// inventory as forge changes it, claiming every disk it lists wiped as the policy asks.
func forgeReport(t *testing.T, name string, cfg ignition.Config, forge func(inv *m.Inventory)) {
	t.Helper()
	var s m.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	require.NotNil(t, s.Status.Inventory)
	inv := *s.Status.Inventory.DeepCopy()
	inv.Source, inv.ReportedAt = "", nil
	forge(&inv)
	policy := cfg.WipePolicy
	// The method a probe reports for the policy: erase reports what ran, here a zero-fill.
	method := string(policy)
	if policy == m.WipeErase {
		method = string(m.WipeZero)
	}
	rep := &report.Report{SystemUUID: s.Spec.SystemUUID, CollectedAt: time.Now(), ProbeVersion: "forged", Inventory: inv,
		Wipe: &m.WipeReport{Policy: policy}}
	for _, d := range inv.Storage {
		if !d.Removable {
			rep.Wipe.Disks = append(rep.Wipe.Disks, m.DiskWipe{Name: d.Name, SerialNumber: d.SerialNumber, Method: method, Succeeded: true, Message: "forged"})
		}
	}
	pool, err := ignition.CertPool([]byte(cfg.RegistryCA))
	require.NoError(t, err)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}}}
	require.NoError(t, post.Send(context.Background(), c, cfg.RegistryURL, cfg.Token, rep, post.DefaultBackoff), "the registry takes the forged report")
}

// outOfThePool waits until the server leaves Cleanup, and says it went to Error, not Available,
// with the reason and a message naming each of names.
func outOfThePool(t *testing.T, name, reason string, names ...string) *m.Server {
	t.Helper()
	var s m.Server
	eventually(t, 30*time.Second, func() bool {
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
		return s.Status.State == m.ServerStateError || s.Status.State == m.ServerStateAvailable
	}, "server %s leaves Cleanup", name)
	require.Equal(t, m.ServerStateError, s.Status.State, "a forged report pooled server %s: %s", name, s.Status.LastTransitionReason)
	assert.Equal(t, reason, s.Status.LastTransitionReason)
	ready := meta.FindStatusCondition(s.Status.Conditions, m.ConditionReady)
	require.NotNil(t, ready)
	for _, n := range names {
		assert.Contains(t, ready.Message, n)
	}
	cleaned := meta.FindStatusCondition(s.Status.Conditions, m.ConditionCleaned)
	require.NotNil(t, cleaned)
	assert.Equal(t, metav1.ConditionFalse, cleaned.Status, "not cleaned: %s", cleaned.Message)
	return &s
}

// TestForgedCleanupReportsNeverPoolTheServer plays a host that holds a wipe boot's token (its
// ignition) and reports in the real probe's stead during Cleanup: no disk at all, one disk
// fewer, every disk removable, or a NIC of its own in place of one of the server's. Each time the
// server goes to Error, naming what the report got wrong, and is never Available.
func TestForgedCleanupReportsNeverPoolTheServer(t *testing.T) {
	cases := []struct {
		name   string
		system int
		forge  func(inv *m.Inventory)
		reason string
		names  []string
	}{
		{"no-disks", 640, func(inv *m.Inventory) { inv.Storage = nil }, m.ReasonHardwareChanged, []string{"sda", "sdf", "missing"}},
		{"fewer-disks", 642, func(inv *m.Inventory) {
			inv.Storage = slicesDelete(inv.Storage, "sdc")
		}, m.ReasonHardwareChanged, []string{"sdc", "ZA1B2C03", "missing"}},
		{"all-removable", 644, func(inv *m.Inventory) {
			for i := range inv.Storage {
				inv.Storage[i].Removable = true
			}
		}, m.ReasonWipeFailed, []string{"sda", "sde", "not reported"}},
		{"changed-macs", 646, func(inv *m.Inventory) {
			inv.NetworkInterfaces[1].MACAddress = "52:54:00:66:66:66"
		}, m.ReasonHardwareChanged, []string{"52:54:00:66:66:66", "added", "missing"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := "forged-" + tc.name
			p := startPool(t, ns, tc.system, []string{"storage-1u"})
			createNamespace(t, ns)
			var name string
			for n := range p.hosts {
				name = n
			}
			claim := claimServer(t, ns, "tenant", name, nil)
			boots.Hold(p.hosts[name].UUID) // the real probe never reports
			releaseAndWait(t, claim)
			forgeReport(t, name, cleanupToken(t, name), tc.forge)
			s := outOfThePool(t, name, tc.reason, tc.names...)
			// The record stands: the server's disks and NICs are still those discovered.
			assert.Len(t, s.Status.Inventory.Storage, 6)
			assert.Len(t, s.Status.Inventory.NetworkInterfaces, 2)
			for _, nic := range s.Status.Inventory.NetworkInterfaces {
				assert.NotEqual(t, "52:54:00:66:66:66", nic.MACAddress)
			}
		})
	}
}

func slicesDelete(disks []m.StorageDevice, name string) []m.StorageDevice {
	var out []m.StorageDevice
	for _, d := range disks {
		if d.Name != name {
			out = append(out, d)
		}
	}
	return out
}

// TestReleaseWipesTheRemovableDevice: a tenant's marker on the server's removable device (the
// storage-1u host's 14 GiB USB module, sdf) is gone after release, as on every other disk.
func TestReleaseWipesTheRemovableDevice(t *testing.T) {
	p := startPool(t, "removable", 620, []string{"storage-1u"})
	createNamespace(t, "removable")
	var name string
	for n := range p.hosts {
		name = n
	}
	host := p.hosts[name]
	var s m.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	var removable string
	for _, d := range s.Status.Inventory.Storage {
		if d.Removable {
			removable = d.Name
		}
	}
	require.Equal(t, "sdf", removable, "the fixture's removable device")

	claim := claimServer(t, "removable", "tenant", name, nil)
	marker := bytes.Repeat([]byte("tenant marker "), 1024)
	for _, disk := range host.Disks {
		f, err := os.OpenFile(wipe.DevicePath(host.Root, disk), os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(marker, 4096)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	releaseAndWait(t, claim)
	s = *waitServer(t, name, m.ServerStateAvailable, 60*time.Second)
	for _, disk := range host.Disks {
		data, err := os.ReadFile(wipe.DevicePath(host.Root, disk))
		require.NoError(t, err)
		assert.False(t, bytes.Contains(data, marker), "disk %s still holds the tenant's marker", disk)
	}
	var listed []string
	for _, d := range s.Status.LastWipe.Disks {
		listed = append(listed, d.Name)
	}
	assert.Contains(t, strings.Join(listed, ","), removable, "the wipe report lists the removable device")
}
