package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
	"github.com/ironfleet/ironfleet/internal/manager"
	"github.com/ironfleet/ironfleet/metalprobe/install"
	"github.com/ironfleet/ironfleet/metalprobe/wipe"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/tenantimage"
	"github.com/ironfleet/ironfleet/test/tenantimage/contract"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestVMInstallsTheClaimsImageBootsItFromDiskAndIsWiped: a claim with the tenant test image
// (served over HTTP, gzip-compressed, with its checksum) and an ignition Secret, on a real BIOS
// VM. The probe installs the image onto the disk the hints name, with a config drive; the VM
// reboots from that disk through its firmware and the installed OS reports the claim's
// ignition byte for byte; powering the claim off and on boots the disk again with no DHCP from
// the VM. Then, powered off through the claim, the tenant's data is written across both whole
// disks (by the host, into the VM's disk files: the tenant image cannot be told to), and
// deleting the claim wipes them with the default policy, erase: the virtio disk, which has no
// erase of its own, zero-filled and read back in windows (it is larger than the read-back
// reads in full), the NVMe one formatted with user-data erase and read back; the host reads
// every byte of both disk files and finds no trace of the data, and the server is Available
// again.
//
// Then, on the same VM, installs that must fail do, each with its reason and nothing written to
// a disk it should not touch: a 404, a qcow2 image, hints that match no disk, a wrong checksum.
// Last, the same flow from an oci:// reference (the lab's registry, over HTTPS with the lab's
// image CA), released with the zero policy: every byte of both disks is read back.
func TestVMInstallsTheClaimsImageBootsItFromDiskAndIsWiped(t *testing.T) {
	requireVMs(t)
	requireTenantImage(t)
	ctx := context.Background()
	l, err := lab.Start(ctx, lab.Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 1, BMCs: 1, VMs: 1,
		// A first disk larger than the read-back reads in full (wipe.VerifyWholeBytes).
		DiscoveryTimeout: 5 * time.Minute, VMDiskBytes: 384 << 20,
		// Two install boots per image: the failures below end after the second, and a boot
		// lost on the way (an iPXE download that stalls under TCG) is retried, not fatal.
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
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	require.NoError(t, l.WaitForServers(ctx, 2, m.ServerStateAvailable, 5*time.Minute))

	tenants, err := l.ServeTenants()
	require.NoError(t, err)
	checksum, err := tenants.Checksum(tenantimage.DiskGzFile)
	require.NoError(t, err)
	network := l.VMNetwork()
	dhcpSeen, err := network.WatchDHCP()
	require.NoError(t, err)
	t.Cleanup(dhcpSeen.Close)

	// The ignition: the test's instructions to the tenant OS, and bytes no text would carry.
	userData, err := tenants.UserData(map[string]any{"tenant": "vm-tenant"}, []byte("\n# \x00\x01\xff tenant bytes\n"))
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-tenant-ignition"},
		Data: map[string][]byte{m.IgnitionSecretKey: userData}}
	require.NoError(t, l.Client.Create(ctx, secret))
	vdSerial := h.Def.Disks[0].Serial
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-tenant"},
		Spec: m.ServerClaimSpec{
			ServerSelector:    &m.ServerSelector{MatchLabels: map[string]m.LabelValue{lab.LabelVM: "true"}},
			Power:             m.PowerOn,
			Image:             tenants.URL(tenantimage.DiskGzFile),
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
	t.Logf("installed in %v: %+v", time.Since(installStart).Round(time.Second), last)

	first := nextReport(t, tenants)
	assert.Equal(t, userData, first.UserData, "the installed OS reads the claim's ignition from its config drive")
	assert.Contains(t, first.Cmdline, "BOOT_IMAGE=", "booted by the disk's boot loader, not by -kernel")
	assert.Equal(t, "vda2", first.ConfigDrive)
	// The install's own network boot sent DHCP; nothing since the probe reported.
	assert.Empty(t, seenAfter(dhcpSeen.Seen(h.Def.NICs[0].MAC), last.ReportedAt.Time), "the OS booted from disk with its static address: no DHCP")
	bootedAt := time.Now()

	// Off and on through the claim: the disk boots again; nothing network-boots. Then the
	// tenant's OS writes its data across both whole disks: a block in every MiB, to the end.
	setClaimPower(t, l, claim, m.PowerOff)
	waitForServer(t, l, name, 3*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
	tenants.ReplyToNext(contract.Reply{MarkDisks: true})
	setClaimPower(t, l, claim, m.PowerOn)
	second := nextReport(t, tenants)
	assert.Equal(t, userData, second.UserData)
	assert.Empty(t, seenAfter(dhcpSeen.Seen(h.Def.NICs[0].MAC), last.ReportedAt.Time), "a power cycle of an installed server boots its disk, never the network (since %s)", bootedAt.Format(time.RFC3339))
	disks := h.Machine.DiskFiles()
	assertTenantMarked(t, map[string]string{"vda": disks[0], "nvme0n1": disks[1]}, nextReport(t, tenants).Marked)
	setClaimPower(t, l, claim, m.PowerOff)
	waitForServer(t, l, name, 3*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
	// Deleting the claim wipes the disks with the default policy, erase.
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	assert.Equal(t, m.WipeErase, server.Spec.WipePolicy, "the CRD's default")
	require.NoError(t, l.Client.Delete(ctx, claim))
	waitWipedAndOff(t, l, name)
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	require.NotNil(t, server.Status.LastWipe)
	assert.Equal(t, m.WipeErase, server.Status.LastWipe.Policy)
	methods := map[string]string{}
	for _, d := range server.Status.LastWipe.Disks {
		t.Logf("wiped %s (%s): %s", d.Name, d.Method, d.Message)
		methods[d.Name] = d.Method
		assert.True(t, d.Succeeded, "%s: %s", d.Name, d.Message)
		assert.Contains(t, d.Message, ": zeros", "%s: read back", d.Name)
	}
	assert.Equal(t, map[string]string{"vda": wipe.MethodZero, "nvme0n1": wipe.MethodSecure}, methods,
		"virtio-blk has no erase of its own: zero-filled; QEMU's NVMe formats with user-data erase")
	for _, d := range disks {
		assertNoTenantData(t, d)
	}

	t.Run("failures", func(t *testing.T) { installsThatFail(t, l, h, tenants, checksum) })
	t.Run("oci", func(t *testing.T) { installFromOCIAndZero(t, l, h, tenants, secret, userData) })
}

// installsThatFail: on the Available VM, installs that cannot succeed end with a claim that
// says why, and write nothing to a disk they must not touch (the disks carry a marker the host
// reads back): a 404, a qcow2 image and hints matching no disk write nothing at all; a wrong
// checksum is only known once written, and that disk (and no other) is wiped again.
func installsThatFail(t *testing.T, l *lab.Lab, h *lab.VMHost, tenants *lab.Tenants, checksum string) {
	ctx := context.Background()
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	disks := h.Machine.DiskFiles()
	for _, d := range disks {
		writeMarker(t, d)
	}
	qcow2 := append([]byte("QFI\xfb\x00\x00\x00\x03"), make([]byte, 64<<10)...)
	qcowDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(qcowDir, "disk.img"), qcow2, 0o644))
	qcowBase, err := l.ServeToVMs(qcowDir, 8082)
	require.NoError(t, err)

	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-fails"},
		Spec: m.ServerClaimSpec{
			ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{lab.LabelVM: "true"}},
			Power:          m.PowerOn,
			Image:          tenants.URL("no-such-image.raw.gz"), ImageChecksum: checksum,
		}}
	require.NoError(t, l.Client.Create(ctx, claim))
	wrong := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name, image, checksum string
		hints                 *m.RootDeviceHints
		says                  []string
		wiped                 bool // vda is written, then wiped again
	}{
		{name: "404", image: claim.Spec.Image, checksum: checksum, says: []string{m.InstallReasonImageUnreachable, "404"}},
		{name: "qcow2", image: qcowBase + "/disk.img", checksum: lab.Checksum(qcow2), says: []string{m.InstallReasonFormatUnsupported, "qcow2", "qemu-img convert"}},
		{name: "hints", image: tenants.URL(tenantimage.DiskXzFile), checksum: mustChecksum(t, tenants, tenantimage.DiskXzFile),
			hints: &m.RootDeviceHints{SerialNumber: "NO-SUCH-SERIAL"}, says: []string{m.InstallReasonNoMatchingDisk, "NO-SUCH-SERIAL"}},
		{name: "checksum", image: tenants.URL(tenantimage.DiskZstFile), checksum: wrong, hints: &m.RootDeviceHints{SerialNumber: h.Def.Disks[0].Serial},
			says: []string{m.InstallReasonChecksumMismatch, wrong, mustChecksum(t, tenants, tenantimage.DiskZstFile)}, wiped: true},
	} {
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"image": tc.image, "imageChecksum": tc.checksum, "rootDeviceHints": tc.hints}})
		require.NoError(t, err)
		require.NoError(t, l.Client.Patch(ctx, claim.DeepCopy(), client.RawPatch("application/merge-patch+json", patch)))
		var cond *metav1.Condition
		waitForClaim(t, l, claim, 12*time.Minute, func(c *m.ServerClaim) bool {
			cond = meta.FindStatusCondition(c.Status.Conditions, m.ConditionProvisioned)
			return cond != nil && cond.Reason == m.ReasonInstallFailed && strings.Contains(cond.Message, tc.says[0])
		})
		t.Logf("%s: %s", tc.name, cond.Message)
		for _, want := range tc.says {
			assert.Contains(t, cond.Message, want, "%s: the claim says why", tc.name)
		}
		waitForServer(t, l, name, 2*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
		assertMarker(t, disks[1], true, tc.name+": the other disk (nvme)")
		assertMarker(t, disks[0], !tc.wiped, tc.name+": vda")
		if tc.wiped {
			assertZero(t, disks[0], 0, 1<<20, tc.name+": the first MiB of vda, wiped again")
		}
	}
	require.NoError(t, l.Client.Delete(ctx, claim))
	waitWipedAndOff(t, l, name)
}

// installFromOCIAndZero: the tenant image (zstd) from an oci:// reference, pulled over HTTPS
// from the lab's registry; the OS reports its ignition; released with the zero policy, every
// byte of both disks is zero.
func installFromOCIAndZero(t *testing.T, l *lab.Lab, h *lab.VMHost, tenants *lab.Tenants, secret *corev1.Secret, userData []byte) {
	ctx := context.Background()
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	zst, err := tenants.Read(tenantimage.DiskZstFile)
	require.NoError(t, err)
	ref, layer, err := l.PushImageToVMs("tenant/disk", "v1", zst, install.MediaTypeRawZstd)
	require.NoError(t, err)
	var server m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	before := server.DeepCopy()
	server.Spec.WipePolicy = m.WipeZero
	require.NoError(t, l.Client.Patch(ctx, &server, client.MergeFrom(before)))

	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-oci"},
		Spec: m.ServerClaimSpec{
			ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{lab.LabelVM: "true"}},
			Power:          m.PowerOn,
			Image:          ref,
			// The disk SeaBIOS boots: without hints the probe would take the smallest disk
			// that holds the image, the NVMe one, which this VM's firmware does not boot.
			RootDeviceHints:   &m.RootDeviceHints{DeviceName: "/dev/vda"},
			IgnitionSecretRef: &m.LocalObjectReference{Name: secret.Name},
		}}
	require.NoError(t, l.Client.Create(ctx, claim))
	waitForClaim(t, l, claim, 8*time.Minute, func(c *m.ServerClaim) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, m.ConditionProvisioned)
	})
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	last := server.Status.LastInstall
	require.NotNil(t, last)
	assert.True(t, last.Succeeded, "%+v", last)
	assert.Equal(t, ref, last.Image)
	assert.Equal(t, layer, last.ServedDigest, "the layer's digest, verified as it streamed")
	rep := nextReport(t, tenants)
	assert.Equal(t, userData, rep.UserData, "the OS installed from the oci:// image reads the claim's ignition")
	assert.Contains(t, rep.Cmdline, "BOOT_IMAGE=")

	require.NoError(t, l.Client.Delete(ctx, claim))
	waitWipedAndOff(t, l, name)
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	require.NotNil(t, server.Status.LastWipe)
	assert.Equal(t, m.WipeZero, server.Status.LastWipe.Policy)
	for i, d := range h.Machine.DiskFiles() {
		assertZero(t, d, 0, fileSize(t, d), fmt.Sprintf("disk %d (%s), zero policy: every byte", i, h.Def.Disks[i].Bus))
	}
}

func nextReport(t *testing.T, tenants *lab.Tenants) contract.Report {
	t.Helper()
	rep, err := tenants.Next(context.Background(), 5*time.Minute)
	require.NoError(t, err)
	return rep
}

// tenantFirmware is how the tenant image's OS finds itself booted on a VM defined as def:
// SeaBIOS and syslinux, OVMF and the image's shim and GRUB, with Secure Boot enforced when
// the VM's firmware has Microsoft's keys.
func tenantFirmware(def vm.Definition) string {
	switch {
	case def.Firmware != vm.UEFI:
		return contract.FirmwareBIOS
	case def.SecureBoot:
		return contract.FirmwareUEFISecureBoot
	default:
		return contract.FirmwareUEFI
	}
}

func mustChecksum(t *testing.T, tenants *lab.Tenants, file string) string {
	t.Helper()
	sum, err := tenants.Checksum(file)
	require.NoError(t, err)
	return sum
}

// installAndWipe claims VM h's server (named by its UUID) as tenant, with the tenant image
// (make tenant-image) on its first disk and an ignition carrying note; waits until the claim
// is Provisioned and the OS installed on the disk reports that ignition from its config drive;
// calls installed; then deletes the claim and waits until the server is wiped (the disk's first
// and last MiB read back as zeros) and off.
func installAndWipe(t *testing.T, l *lab.Lab, h *lab.VMHost, tenant, note string, installed func()) {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(h.Def.SMBIOS.UUID)
	tenants, err := l.ServeTenants()
	require.NoError(t, err)
	userData, err := tenants.UserData(map[string]any{"tenant": tenant}, []byte("\n# \x00\xff "+note+"\n"))
	require.NoError(t, err)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: tenant + "-ignition"},
		Data: map[string][]byte{m.IgnitionSecretKey: userData}}
	require.NoError(t, l.Client.Create(ctx, secret))
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: tenant},
		Spec: m.ServerClaimSpec{
			ServerRef:         &m.LocalObjectReference{Name: name},
			Power:             m.PowerOn,
			Image:             tenants.URL(tenantimage.DiskGzFile),
			ImageChecksum:     mustChecksum(t, tenants, tenantimage.DiskGzFile),
			RootDeviceHints:   &m.RootDeviceHints{SerialNumber: h.Def.Disks[0].Serial},
			IgnitionSecretRef: &m.LocalObjectReference{Name: secret.Name},
		}}
	require.NoError(t, l.Client.Create(ctx, claim))
	waitForClaim(t, l, claim, 8*time.Minute, func(c *m.ServerClaim) bool {
		return meta.IsStatusConditionTrue(c.Status.Conditions, m.ConditionProvisioned)
	})
	var server m.Server
	require.NoError(t, l.Client.Get(ctx, client.ObjectKey{Name: name}, &server))
	require.NotNil(t, server.Status.LastInstall)
	assert.True(t, server.Status.LastInstall.Succeeded, "%+v", server.Status.LastInstall)
	report := nextReport(t, tenants)
	assert.Equal(t, userData, report.UserData, "the installed OS reads the claim's ignition from its config drive")
	assert.Contains(t, report.Cmdline, "BOOT_IMAGE=", "booted by the disk's boot loader")
	assert.Equal(t, tenantFirmware(h.Def), report.Firmware, "the installed OS booted from its disk as VM %s's firmware boots", h.Def.Name)
	installed()

	require.NoError(t, l.Client.Delete(ctx, claim))
	waitWipedAndOff(t, l, name)
	disks := h.Machine.DiskFiles()
	assertZero(t, disks[0], 0, 1<<20, "the first MiB of the installed disk")
	assertZero(t, disks[0], fileSize(t, disks[0])-1<<20, 1<<20, "its last MiB")
}

// waitWipedAndOff waits until the server is Available, Cleaned and powered off.
func waitWipedAndOff(t *testing.T, l *lab.Lab, name string) {
	t.Helper()
	waitForServer(t, l, name, 8*time.Minute, func(s *m.Server) bool {
		return s.Status.State == m.ServerStateAvailable && meta.IsStatusConditionTrue(s.Status.Conditions, m.ConditionCleaned)
	})
	waitForServer(t, l, name, 2*time.Minute, func(s *m.Server) bool { return s.Status.PowerState == m.PowerStateOff })
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	require.NoError(t, err)
	return st.Size()
}

// assertTenantMarked checks that the tenant's OS wrote its data across each of the VM's whole
// disks (device name → the disk's file): the report names every disk at its file's size, and
// the host finds each block the report counts in the file, where contract.MarkOffsets puts it.
func assertTenantMarked(t *testing.T, files map[string]string, marked []contract.MarkedDisk) {
	t.Helper()
	got := map[string]int64{}
	for _, d := range marked {
		got[d.Device] = d.Bytes
	}
	want := map[string]int64{}
	for dev, file := range files {
		want[dev] = fileSize(t, file)
	}
	require.Equal(t, want, got, "the tenant's OS marked every disk, at its whole size")
	for _, d := range marked {
		f, err := os.Open(files[d.Device])
		require.NoError(t, err)
		offs := contract.MarkOffsets(d.Bytes)
		assert.Equal(t, len(offs), d.Blocks, "%s: blocks written", d.Device)
		block := make([]byte, contract.MarkBlock)
		missing := 0
		for _, off := range offs {
			_, err := f.ReadAt(block, off)
			require.NoError(t, err)
			if !bytes.Equal(contract.TenantData(off, contract.MarkBlock), block) {
				missing++
			}
		}
		require.NoError(t, f.Close())
		assert.Zero(t, missing, "%s: blocks of the tenant's data the host does not find in the disk's file, of %d", d.Device, len(offs))
		t.Logf("the tenant wrote %d blocks across %s (%d MiB)", d.Blocks, d.Device, d.Bytes>>20)
	}
}

// assertNoTenantData reads every byte of a disk file: none of the tenant's data is left, and
// every byte is zero.
func assertNoTenantData(t *testing.T, disk string) {
	t.Helper()
	f, err := os.Open(disk)
	require.NoError(t, err)
	defer f.Close()
	const chunk = 4 << 20
	buf := make([]byte, chunk+32)
	size := fileSize(t, disk)
	found, nonZero := int64(-1), int64(-1)
	for off := int64(0); off < size; off += chunk {
		n, err := f.ReadAt(buf, off) // 32 bytes past the chunk: a record across two is seen
		if err != nil && !errors.Is(err, io.EOF) {
			require.NoError(t, err)
		}
		if i := bytes.Index(buf[:n], []byte(contract.TenantDataPrefix)); i >= 0 && found < 0 {
			found = off + int64(i)
		}
		for i, b := range buf[:min(n, chunk)] {
			if b != 0 && nonZero < 0 {
				nonZero = off + int64(i)
				break
			}
		}
	}
	assert.Equal(t, int64(-1), found, "%s: the first tenant's data is found at byte %d after the wipe", disk, found)
	assert.Equal(t, int64(-1), nonZero, "%s: a non-zero byte at %d after the wipe", disk, nonZero)
}

// marker fills a disk's first and last MiB when the test wants to see whether anything writes
// there.
var marker = bytes.Repeat([]byte("ironfleet-e2e-marker "), (1<<20)/21+1)[:1<<20]

func writeMarker(t *testing.T, disk string) {
	t.Helper()
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	for _, off := range []int64{0, fileSize(t, disk) - 1<<20} {
		_, err := f.WriteAt(marker, off)
		require.NoError(t, err)
	}
	require.NoError(t, f.Sync())
}

// assertMarker checks that both ends of a disk still carry the marker (or, with intact false,
// that its first MiB does not).
func assertMarker(t *testing.T, disk string, intact bool, what string) {
	t.Helper()
	f, err := os.Open(disk)
	require.NoError(t, err)
	defer f.Close()
	for _, off := range []int64{0, fileSize(t, disk) - 1<<20} {
		buf := make([]byte, 1<<20)
		_, err := f.ReadAt(buf, off)
		require.NoError(t, err)
		switch {
		case intact:
			assert.True(t, bytes.Equal(buf, marker), "%s: the marker at byte %d is intact", what, off)
		case off == 0:
			assert.False(t, bytes.Equal(buf, marker), "%s: the first MiB was written", what)
		}
	}
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
