package boot_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	kwait "k8s.io/apimachinery/pkg/util/wait"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	tftplib "github.com/pin/tftp/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/boot/tftp"
)

// open asks the service's TFTP for name as the host at addr would.
func open(t *testing.T, name, addr string) (string, error) {
	t.Helper()
	r, size, err := svc.TFTPOpener()(context.Background(), name, netip.MustParseAddr(addr))
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), size, name)
	return string(data), nil
}

// TestSecureBootServerGetsTheSignedChain: a server whose boot mode is UEFISecureBoot needs the
// signed chain's files to be Ready; its x86-64 UEFI PXE ROM is offered shim, and TFTP serves
// shim, GRUB, GRUB's configuration and the NIC's boot configuration — the probe's kernel and
// initramfs over TFTP with the boot's ignition URL, to the host its DHCP lease names only —
// while a server without Secure Boot is still offered iPXE.
func TestSecureBootServerGetsTheSignedChain(t *testing.T) {
	const mac = "52:54:00:5b:00:01"
	hw, _ := net.ParseMAC(mac)
	createServer(t, "sb-1", nil, mac)
	var s metalv1alpha1.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "sb-1"}, &s))
	s.Spec.BootMode = metalv1alpha1.BootModeUEFISecureBoot
	require.NoError(t, k8s.Update(context.Background(), &s))
	createSecret(t, nsAll, "sb-1-ignition", ignitionJSON)
	createSBC(t, nsAll, "sb-1-discovery", "sb-1", metalv1alpha1.BootPurposeDiscovery, "sb-1-ignition")

	// Without the signed chain in the probe directory the boot cannot be served, and says so.
	c := waitFor(t, nsAll, "sb-1-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonArtifactMissing)
	assert.Contains(t, c.Message, filepath.Join(probeDir, boot.ArtifactShim))
	for _, f := range []string{boot.ArtifactShim, boot.ArtifactGRUB} {
		path := filepath.Join(probeDir, f)
		require.NoError(t, os.WriteFile(path, []byte("signed "+f), 0o644))
		t.Cleanup(func() { _ = os.Remove(path) })
	}
	c = waitFor(t, nsAll, "sb-1-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Contains(t, c.Message, "Secure Boot")

	// DHCP: shim for its x86-64 UEFI ROM. The handler's cache may be a moment behind the spec
	// (the MAC still unknown, or the boot mode not yet Secure Boot): offer says what it did,
	// and the wait asks again.
	h := svc.DHCPHandler()
	offer := func(m string, arch iana.Arch) string {
		hw, _ := net.ParseMAC(m)
		req, err := dhcpv4.NewDiscovery(hw, dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003001")),
			dhcpv4.WithOption(dhcpv4.OptClientArch(arch)))
		require.NoError(t, err)
		d := h.HandleRequest(req, dhcp.PortDHCP)
		if d.Reply == nil {
			return "ignored: " + string(d.Ignored)
		}
		return d.Reply.BootFileName
	}
	var last string
	err := kwait.PollUntilContextTimeout(context.Background(), poll, wait, true, func(context.Context) (bool, error) {
		last = offer(mac, iana.EFI_BC)
		return last == dhcp.FileShim, nil
	})
	require.NoError(t, err, "the Secure Boot server's UEFI ROM is offered shim; the last offer: %s", last)
	readyBoot(t, "sb-off", "52:54:00:5b:00:02")
	// Ready in the API server; the service's cache may not have it yet.
	if !assert.Eventually(t, func() bool { last = offer("52:54:00:5b:00:02", iana.EFI_BC); return last == dhcp.FileEFISNPOnly }, wait, poll,
		"a server without Secure Boot gets iPXE") {
		t.Logf("the last offer: %s", last)
	}

	// TFTP: the chain, by exact name, over a real transfer.
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&tftp.Server{Open: svc.TFTPOpener()}).Serve(ctx, conn) }()
	t.Cleanup(func() { cancel(); <-done })
	tc, err := tftplib.NewClient(conn.LocalAddr().String())
	require.NoError(t, err)
	tc.SetTimeout(time.Second)
	for _, f := range []string{boot.ArtifactShim, "/" + boot.ArtifactGRUB} {
		wt, err := tc.Receive(f, "octet")
		require.NoError(t, err, f)
		var got bytes.Buffer
		_, err = wt.WriteTo(&got)
		require.NoError(t, err)
		assert.Equal(t, "signed "+filepath.Base(f), got.String())
	}
	_, err = tc.Receive("../ipxe/undionly.kpxe", "octet")
	assert.Error(t, err, "names are matched exactly")

	cfg, err := open(t, "grub/grub.cfg", hostAddr)
	require.NoError(t, err)
	assert.Contains(t, cfg, "configfile $prefix/boot-${net_default_mac}.cfg\n")
	_, err = open(t, "grub/x86_64-efi/grub.cfg", hostAddr)
	assert.ErrorIs(t, err, tftp.ErrNotServed, "GRUB looks for this one first: not served")
	for _, name := range []string{"grub/boot-not-a-mac.cfg", "grub/boot-" + mac, "secret", "grub/../vmlinuz"} {
		_, err := open(t, name, hostAddr)
		assert.ErrorIs(t, err, tftp.ErrNotServed, name)
	}

	// The NIC's boot configuration goes to the host its lease names, and binds the boot there.
	require.True(t, svc.Lease(hw, netip.MustParseAddr("10.20.0.150")))
	_, err = open(t, "grub/boot-"+mac+".cfg", hostAddr)
	assert.ErrorIs(t, err, tftp.ErrDenied, "not the server's lease")
	body, err := open(t, "grub/boot-"+mac+".cfg", "10.20.0.150")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^linux /vmlinuz console=ttyS0,115200 quiet ironfleet\.ignition=` + regexp.QuoteMeta(publicURL) + `/ignition/([A-Za-z0-9_-]{22}) BOOTIF=01-52-54-00-5b-00-01\ninitrd /initramfs.cpio.gz\nboot\n$`).FindStringSubmatch(body)
	require.NotNil(t, m, body)
	assert.NotContains(t, body, "/boot/", "no boot token in a configuration anyone may ask for")
	var sbc metalv1alpha1.ServerBootConfiguration
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: "sb-1-discovery"}, &sbc))
	require.NotNil(t, sbc.Status.Secrets)
	assert.Equal(t, "10.20.0.150", sbc.Status.Secrets.HostAddress)

	// A MAC with nothing to boot is told so, and GRUB hands back to the firmware.
	body, err = open(t, "grub/boot-52:54:00:5b:00:99.cfg", hostAddr)
	require.NoError(t, err)
	assert.Equal(t, "echo \"Ironfleet boot service: no Ready boot configuration for 52:54:00:5b:00:99; booting the next device\"\nexit 1\n", body)

	// The kernel and initramfs, as over HTTP.
	kernel, err := open(t, boot.ArtifactKernel, hostAddr)
	require.NoError(t, err)
	assert.Equal(t, "kernel bytes", kernel)
	_, err = open(t, boot.ArtifactInitramfs, hostAddr)
	require.NoError(t, err)
	assert.False(t, errors.Is(err, tftp.ErrDenied))
}
