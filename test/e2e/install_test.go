package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
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
	"github.com/ironfleet/ironfleet/internal/lab"
	"github.com/ironfleet/ironfleet/internal/vm"
	"github.com/ironfleet/ironfleet/test/tenantimage"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
)

// TestVMInstallsTheClaimsImageBootsItFromDiskAndIsWiped: a claim with the tenant test image
// (served over HTTP, gzip-compressed, with its checksum) and an ignition Secret, on a real BIOS
// VM. The probe installs the image onto the disk the hints name, with a config drive; the VM
// reboots from that disk through its firmware and the installed OS reports the claim's
// ignition byte for byte; powering the claim off and on boots the disk again with no DHCP from
// the VM; deleting the claim wipes the disk, which the host reads back, and the server is
// Available again.
func TestVMInstallsTheClaimsImageBootsItFromDiskAndIsWiped(t *testing.T) {
	requireVMs(t)
	tenantDir := requireTenantImage(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 1, DiscoveryTimeout: 5 * time.Minute})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.Len(t, l.VMs, 1)
	h := l.VMs[0]
	t.Cleanup(func() {
		if t.Failed() {
			logConsole(t, h)
		}
	})
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	require.NoError(t, l.WaitForServers(ctx, 2, m.ServerStateAvailable, 5*time.Minute))

	network := l.VMNetwork()
	imageBase, err := l.ServeToVMs(tenantDir, 8081)
	require.NoError(t, err)
	checksum := tenantChecksum(t, tenantDir, tenantimage.DiskGzFile)
	reports := listenForTenant(t, network)
	dhcpSeen, err := network.WatchDHCP()
	require.NoError(t, err)
	t.Cleanup(dhcpSeen.Close)

	// The ignition: the test's instructions to the tenant OS, and bytes no text would carry.
	tenantAddr := vmAddress(network, 200)
	userData, err := contract.UserData(contract.TestConfig{Address: tenantAddr + "/24", ReportURL: reports.url},
		map[string]any{"tenant": "vm-tenant"}, []byte("\n# \x00\x01\xff tenant bytes\n"))
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-tenant-ignition"},
		Data: map[string][]byte{m.IgnitionSecretKey: userData}}
	require.NoError(t, l.Client.Create(ctx, secret))
	vdSerial := h.Def.Disks[0].Serial
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-tenant"},
		Spec: m.ServerClaimSpec{
			ServerSelector:    &m.ServerSelector{MatchLabels: map[string]m.LabelValue{lab.LabelVM: "true"}},
			Power:             m.PowerOn,
			Image:             imageBase + "/" + tenantimage.DiskGzFile,
			ImageChecksum:     checksum,
			RootDeviceHints:   &m.RootDeviceHints{SerialNumber: vdSerial},
			IgnitionSecretRef: &m.LocalObjectReference{Name: secret.Name},
		}}
	installStart := time.Now()
	require.NoError(t, l.Client.Create(ctx, claim))

	// Installed, then booted from disk: the installed OS reports the ignition, byte for byte.
	waitForClaim(t, l, claim, 8*time.Minute, func(c *m.ServerClaim) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, m.ConditionProvisioned)
	})
	var server m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	last := server.Status.LastInstall
	require.NotNil(t, last)
	assert.True(t, last.Succeeded, "%+v", last)
	assert.Equal(t, "vda", last.Disk, "the hints named the virtio disk's serial")
	assert.Equal(t, checksum, last.ServedDigest)
	assert.Equal(t, "vda2", last.ConfigDrive)
	installed := time.Now()
	t.Logf("installed in %v: %+v", installed.Sub(installStart).Round(time.Second), last)

	first := reports.next(t, 5*time.Minute)
	assert.Equal(t, userData, first.UserData, "the installed OS reads the claim's ignition from its config drive")
	assert.Contains(t, first.Cmdline, "BOOT_IMAGE=", "booted by the disk's boot loader, not by -kernel")
	assert.Equal(t, "vda2", first.ConfigDrive)
	// The install's own network boot sent DHCP; nothing since the probe reported.
	assert.Empty(t, seenAfter(dhcpSeen.Seen(h.Def.NICs[0].MAC), last.ReportedAt.Time), "the OS booted from disk with its static address: no DHCP")
	bootedAt := time.Now()

	// Off and on through the claim: the disk boots again; nothing network-boots.
	setClaimPower(t, l, claim, m.PowerOff)
	waitForServer(t, l, name, 3*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
	setClaimPower(t, l, claim, m.PowerOn)
	second := reports.next(t, 5*time.Minute)
	assert.Equal(t, userData, second.UserData)
	assert.Empty(t, seenAfter(dhcpSeen.Seen(h.Def.NICs[0].MAC), last.ReportedAt.Time), "a power cycle of an installed server boots its disk, never the network (since %s)", bootedAt.Format(time.RFC3339))

	// Deleting the claim wipes the disk (metadata policy): the host reads its ends back.
	require.NoError(t, l.Client.Delete(ctx, claim))
	waitForServer(t, l, name, 6*time.Minute, func(s *m.Server) bool {
		return s.Status.State == m.ServerStateAvailable && meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned)
	})
	waitForServer(t, l, name, 2*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
	disk := h.Machine.DiskFiles()[0]
	assertZero(t, disk, 0, 1<<20, "the first MiB of vda (its partition table)")
	st, err := os.Stat(disk)
	require.NoError(t, err)
	assertZero(t, disk, st.Size()-1<<20, 1<<20, "the last MiB of vda")
}

// seenAfter are the times at or after t (a second-precision stamp: the second it names counts).
func seenAfter(times []time.Time, t time.Time) []time.Time {
	var out []time.Time
	for _, at := range times {
		if !at.Before(t.Truncate(time.Second)) {
			out = append(out, at)
		}
	}
	return out
}

// requireTenantImage is the directory of the tenant test image (make tenant-image), or the
// test fails in CI / skips outside it saying how to build it.
func requireTenantImage(t *testing.T) string {
	t.Helper()
	dir, err := tenantimage.Dir()
	if err == nil {
		_, err = os.Stat(filepath.Join(dir, tenantimage.DiskGzFile))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the tenant image is missing in CI (%v): make test builds it with make tenant-image", err)
		}
		t.Skipf("the tenant image is missing (%v): run make tenant-image; make test builds it and runs this test (as root), and in CI it fails instead of skipping", err)
	}
	return dir
}

// tenantChecksum is sha256:<hex> of file as SHA256SUMS lists it.
func tenantChecksum(t *testing.T, dir, file string) string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && strings.TrimPrefix(fields[1], "*") == file {
			return "sha256:" + fields[0]
		}
	}
	t.Fatalf("SHA256SUMS in %s does not list %s", dir, file)
	return ""
}

// vmAddress is host n of the VMs' subnet.
func vmAddress(n *vm.Network, host byte) string {
	a := n.Subnet().Addr().As4()
	a[3] = host
	return net.IP(a[:]).String()
}

// tenantReports receives the installed OS's reports on the VMs' network.
type tenantReports struct {
	url string
	ch  chan contract.Report
}

func listenForTenant(t *testing.T, n *vm.Network) *tenantReports {
	t.Helper()
	addr := net.JoinHostPort(n.BridgeIP().String(), "8099")
	ln, err := n.ListenTCP(addr)
	require.NoError(t, err)
	r := &tenantReports{url: "http://" + addr + "/report", ch: make(chan contract.Report, 8)}
	var once sync.Once
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var rep contract.Report
		if err := json.NewDecoder(io.LimitReader(req.Body, 4<<20)).Decode(&rep); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.ch <- rep
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { once.Do(func() { _ = srv.Close() }) })
	return r
}

func (r *tenantReports) next(t *testing.T, timeout time.Duration) contract.Report {
	t.Helper()
	select {
	case rep := <-r.ch:
		return rep
	case <-time.After(timeout):
		t.Fatalf("the installed OS did not report within %v", timeout)
		return contract.Report{}
	}
}

func setClaimPower(t *testing.T, l *lab.Lab, claim *m.ServerClaim, power m.Power) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"power":%q}}`, power))
	require.NoError(t, l.Client.Patch(context.Background(), claim.DeepCopy(), patch))
}

func waitForClaim(t *testing.T, l *lab.Lab, claim *m.ServerClaim, timeout time.Duration, ok func(*m.ServerClaim) bool) {
	t.Helper()
	var c m.ServerClaim
	require.Eventually(t, func() bool {
		return l.Client.Get(context.Background(), client.ObjectKeyFromObject(claim), &c) == nil && ok(&c)
	}, timeout, 500*time.Millisecond, "claim %s: %+v", claim.Name, &c.Status)
}

func waitForServer(t *testing.T, l *lab.Lab, name string, timeout time.Duration, ok func(*m.Server) bool) {
	t.Helper()
	var s m.Server
	require.Eventually(t, func() bool {
		return l.Client.Get(context.Background(), client.ObjectKey{Name: name}, &s) == nil && ok(&s)
	}, timeout, 500*time.Millisecond, "server %s: %s %s %v", name, s.Status.State, s.Status.LastTransitionReason, s.Status.Conditions)
}

// assertZero checks that n bytes of file at off are all zero.
func assertZero(t *testing.T, file string, off, n int64, what string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, n)
	_, err = f.ReadAt(buf, off)
	require.NoError(t, err)
	for i, b := range buf {
		if b != 0 {
			t.Errorf("%s is not wiped: a non-zero byte at offset %d", what, off+int64(i))
			return
		}
	}
}
