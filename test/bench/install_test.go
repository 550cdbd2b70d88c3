package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/tenantimage"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// InstallResult is the install benchmark's record (docs/bench/install.json): how long a claim
// takes, on a real VM, from its creation to the OS it installed booting from disk.
type InstallResult struct {
	Commit  string  `json:"commit"`
	Date    string  `json:"date"`
	Machine Machine `json:"machine"`
	// ImageBytes is the raw image's size (the tenant image, make tenant-image).
	ImageBytes int64 `json:"imageBytes"`
	// Runs is one install per served form of the image, one after another on the same VM.
	Runs []InstallRun `json:"runs"`
}

// InstallRun is one claim's timeline, each figure in seconds from the claim's creation.
type InstallRun struct {
	File        string `json:"file"`
	ServedBytes int64  `json:"servedBytes"`
	// Bound: the claim is Bound. InstallPowerOn: the BMC's PXE power-on of the install boot.
	// Installed: the probe's install report is on the Server. Provisioned: the claim says so.
	// OSBooted: the installed OS, booted from disk, reported the claim's ignition.
	BoundSeconds          float64 `json:"boundSeconds"`
	InstallPowerOnSeconds float64 `json:"installPowerOnSeconds"`
	InstalledSeconds      float64 `json:"installedSeconds"`
	ProvisionedSeconds    float64 `json:"provisionedSeconds"`
	OSBootedSeconds       float64 `json:"osBootedSeconds"`
	// Disk is the disk the probe wrote.
	Disk string `json:"disk"`
}

// TestBenchInstall measures installs to disk (make bench): one BIOS VM is claimed with the
// tenant image (64 MiB raw) served over HTTP as each of raw, gzip, zstd and xz with its
// checksum and an ignition Secret; the probe installs it, the VM boots its disk and the OS there
// reports; the claim is deleted and the VM wiped before the next form.
func TestBenchInstall(t *testing.T) {
	if os.Getenv("IRONFLEET_BENCH") == "" {
		t.Skip("the benchmark runs with `make bench` (IRONFLEET_BENCH=1)")
	}
	if err := lab.CanRunVMs(); err != nil {
		t.Fatalf("the install benchmark needs VMs: %v", err)
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 1, DiscoveryTimeout: 5 * time.Minute})
	require.NoError(t, err)
	defer l.Stop()
	h := l.VMs[0]
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	require.NoError(t, l.WaitForServers(ctx, 2, metalv1alpha1.ServerStateAvailable, 10*time.Minute))
	tenants, err := l.ServeTenants()
	require.NoError(t, err)

	r := InstallResult{Commit: commit(root), Date: time.Now().UTC().Format(time.RFC3339), Machine: thisMachine(), ImageBytes: tenantimage.DiskBytes}
	for i, file := range []string{tenantimage.DiskFile, tenantimage.DiskGzFile, tenantimage.DiskZstFile, tenantimage.DiskXzFile} {
		checksum, err := tenants.Checksum(file)
		require.NoError(t, err)
		st, err := os.Stat(filepath.Join(tenants.Dir, file))
		require.NoError(t, err)
		userData, err := tenants.UserData(map[string]any{"bench": file}, nil)
		require.NoError(t, err)
		claimName := fmt.Sprintf("bench-install-%d", i)
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claimName},
			Data: map[string][]byte{metalv1alpha1.IgnitionSecretKey: userData}}
		require.NoError(t, l.Client.Create(ctx, secret))
		claim := &metalv1alpha1.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: claimName},
			Spec: metalv1alpha1.ServerClaimSpec{
				ServerRef:         &metalv1alpha1.LocalObjectReference{Name: name},
				Power:             metalv1alpha1.PowerOn,
				Image:             tenants.URL(file),
				ImageChecksum:     checksum,
				RootDeviceHints:   &metalv1alpha1.RootDeviceHints{SerialNumber: h.Def.Disks[0].Serial}, // the disk SeaBIOS boots
				IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name},
			}}
		start := time.Now()
		require.NoError(t, l.Client.Create(ctx, claim))
		run := InstallRun{File: file, ServedBytes: st.Size()}
		since := func() float64 { return time.Since(start).Round(100 * time.Millisecond).Seconds() }
		require.NoError(t, waitFor(ctx, 10*time.Minute, "the claim Provisioned", func() (bool, string) {
			if err := l.Client.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil {
				return false, err.Error()
			}
			if run.BoundSeconds == 0 && claim.Status.Phase == metalv1alpha1.ClaimPhaseBound {
				run.BoundSeconds = since()
			}
			var s metalv1alpha1.Server
			if run.InstalledSeconds == 0 && l.Client.Get(ctx, client.ObjectKey{Name: name}, &s) == nil &&
				s.Status.LastInstall != nil && s.Status.LastInstall.Image == claim.Spec.Image && s.Status.LastInstall.ReportedAt != nil && !s.Status.LastInstall.ReportedAt.Time.Before(start.Truncate(time.Second)) {
				run.InstalledSeconds = since()
				run.Disk = s.Status.LastInstall.Disk
			}
			if run.ProvisionedSeconds == 0 && meta.IsStatusConditionTrue(claim.Status.Conditions, metalv1alpha1.ConditionProvisioned) {
				run.ProvisionedSeconds = since()
			}
			return run.ProvisionedSeconds > 0, string(claim.Status.Phase)
		}))
		rep, err := tenants.Next(ctx, 10*time.Minute)
		require.NoError(t, err)
		run.OSBootedSeconds = since()
		require.True(t, bytes.Equal(rep.UserData, userData), "the OS installed from %s read the claim's ignition", file)
		for _, ev := range h.BMC.BootLog(h.SystemID) {
			if ev.Boot == bmcsim.BootPxe && ev.Time.After(start) && run.InstallPowerOnSeconds == 0 {
				run.InstallPowerOnSeconds = ev.Time.Sub(start).Round(100 * time.Millisecond).Seconds()
			}
		}
		fmt.Printf("bench: install %s (%.1f MiB served): Bound %.1f s, install power-on %.1f s, installed %.1f s, Provisioned %.1f s, OS booted from disk %.1f s\n",
			file, float64(run.ServedBytes)/(1<<20), run.BoundSeconds, run.InstallPowerOnSeconds, run.InstalledSeconds, run.ProvisionedSeconds, run.OSBootedSeconds)
		r.Runs = append(r.Runs, run)

		require.NoError(t, l.Client.Delete(ctx, claim))
		require.NoError(t, l.Client.Delete(ctx, secret))
		require.NoError(t, waitFor(ctx, 10*time.Minute, "the VM wiped and Available", func() (bool, string) {
			var s metalv1alpha1.Server
			if err := l.Client.Get(ctx, client.ObjectKey{Name: name}, &s); err != nil {
				return false, err.Error()
			}
			return s.Status.State == metalv1alpha1.ServerStateAvailable && meta.IsStatusConditionTrue(s.Status.Conditions, metalv1alpha1.ConditionCleaned) &&
				s.Status.PowerState == metalv1alpha1.PowerStateOff, string(s.Status.State)
		}))
	}
	path, err := writeFigures(outputDir(root, true, r.Commit, os.Getenv("BENCH_OUT")), "install.json", r)
	require.NoError(t, err)
	fmt.Printf("bench: figures in %s\n", path)
}
