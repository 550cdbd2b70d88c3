package boot_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
	tftplib "github.com/pin/tftp/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

var ignitionURL = regexp.MustCompile(`ironfleet\.ignition=(\S+)/ignition/(\S+) `)

// readyBoot makes a server with a Ready discovery boot and returns the MAC it boots from.
func readyBoot(t *testing.T, name string, mac string) {
	t.Helper()
	createServer(t, name, nil, mac)
	createSecret(t, nsAll, name+"-ignition", ignitionJSON)
	createSBC(t, nsAll, name+"-discovery", name, metalv1alpha1.BootPurposeDiscovery, name+"-ignition")
	waitFor(t, nsAll, name+"-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func post(t *testing.T, url, body string) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// script fetches the iPXE script of a MAC and returns it with the boot id it carries.
func script(t *testing.T, base, mac string) (string, string) {
	t.Helper()
	// The service answers from its cache, which may be a moment behind the API server.
	var body string
	var m []string
	require.Eventually(t, func() bool {
		var code int
		code, body = get(t, base+"/ipxe/"+mac)
		m = ignitionURL.FindStringSubmatch(body)
		return code == http.StatusOK && m != nil
	}, wait, poll, "no ignition URL for %s", mac)
	assert.Equal(t, publicURL, m[1])
	return body, m[2]
}

// TestAUUIDSeveralServersHaveBootsNoneOfThem: two Servers with one UUID (a Supermicro BMC
// reports its first system's for all) each boot by MAC; by that UUID neither, as the UUID does
// not say which host asks.
func TestAUUIDSeveralServersHaveBootsNoneOfThem(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	readyBoot(t, "smc-1", "52:54:00:cc:00:01")
	readyBoot(t, "smc-2", "52:54:00:cc:00:02")
	_, one := script(t, srv.URL, "52:54:00:cc:00:01")
	// Before smc-2 has smc-1's UUID, the UUID finds smc-1.
	require.Eventually(t, func() bool {
		code, body := get(t, srv.URL+"/ipxe?uuid="+uuidOf("smc-1"))
		return code == http.StatusOK && strings.Contains(body, "/ignition/"+one+" ")
	}, wait, poll)

	var two metalv1alpha1.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: "smc-2"}, &two))
	two.Spec.SystemUUID = uuidOf("smc-1")
	require.NoError(t, k8s.Update(context.Background(), &two))
	require.Eventually(t, func() bool {
		code, _ := get(t, srv.URL+"/ipxe?uuid="+uuidOf("smc-1"))
		return code == http.StatusNotFound
	}, wait, poll, "a UUID two servers have boots neither")
	_, byMAC := script(t, srv.URL, "52:54:00:cc:00:02")
	assert.NotEqual(t, one, byMAC, "by MAC each boots its own")
}

func TestScriptBootsTheProbeWithAPerBootURL(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	readyBoot(t, "web-1", "52:54:00:bb:00:01")

	body, id := script(t, srv.URL, "52-54-00-BB-00-01")
	assert.Equal(t, fmt.Sprintf("#!ipxe\n"+
		"kernel %[1]s/artifacts/vmlinuz initrd=initramfs.cpio.gz console=ttyS0,115200 quiet ironfleet.ignition=%[1]s/ignition/%[2]s BOOTIF=01-52-54-00-bb-00-01\n"+
		"initrd %[1]s/artifacts/initramfs.cpio.gz\n"+
		"boot\n", publicURL, id), body)
	assert.Len(t, id, 22)
	assert.NotContains(t, body, "/boot/", "no boot token in a script anyone may ask for")

	// The same boot by SMBIOS UUID; iPXE fills in the NIC.
	code, byUUID := get(t, srv.URL+"/ipxe?uuid="+strings.ToUpper(uuidOf("web-1")))
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, byUUID, "/ignition/"+id+" BOOTIF=01-${netX/mac:hexhyp}\n")
	for _, placeholder := range []string{"00000000-0000-0000-0000-000000000000", "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF",
		"03000200-0400-0500-0006-000700080009", "not-a-uuid", ""} {
		code, _ := get(t, srv.URL+"/ipxe?uuid="+placeholder)
		assert.Equal(t, http.StatusNotFound, code, placeholder)
	}

	// A MAC with nothing to boot is told so, and iPXE moves on to the next boot device.
	code, other := get(t, srv.URL+"/ipxe/52:54:00:bb:00:99")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "#!ipxe\necho Ironfleet boot service: no Ready boot configuration for 52:54:00:bb:00:99; booting the next device\nexit 1\n", other)
	code, _ = get(t, srv.URL+"/ipxe/not-a-mac")
	assert.Equal(t, http.StatusBadRequest, code)

	// The artifacts, and nothing else.
	code, kernel := get(t, srv.URL+"/artifacts/vmlinuz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "kernel bytes", kernel)
	code, initrd := get(t, srv.URL+"/artifacts/initramfs.cpio.gz")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "initramfs bytes", initrd)
	// iPXE for UEFI HTTP boot clients, and nothing else.
	code, loader := get(t, srv.URL+"/loaders/snponly.efi")
	assert.Equal(t, http.StatusOK, code)
	assert.Equal(t, "ipxe binary snponly.efi", loader)
	for _, path := range []string{"/artifacts/..%2f..%2fetc%2fpasswd", "/artifacts/undionly.kpxe", "/artifacts/", "/etc/passwd",
		"/loaders/undionly.kpxe", "/loaders/vmlinuz", "/loaders/..%2fprobe%2fvmlinuz"} {
		code, _ := get(t, srv.URL+path)
		assert.Equal(t, http.StatusNotFound, code, path)
	}
}

func TestIgnitionAndProgressUnderTheBootURL(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	readyBoot(t, "web-2", "52:54:00:bb:00:02")
	_, id := script(t, srv.URL, "52:54:00:bb:00:02")

	// The ignition, with the boot URL (its token) added: the only place the token goes.
	code, ign := get(t, srv.URL+"/ignition/"+id)
	require.Equal(t, http.StatusOK, code)
	cfg, err := ignition.Parse([]byte(ign))
	require.NoError(t, err)
	assert.Equal(t, "probe-secret-token", cfg.Token)
	assert.True(t, strings.HasPrefix(cfg.BootURL, publicURL+"/boot/"), cfg.BootURL)
	token := strings.TrimPrefix(cfg.BootURL, publicURL+"/boot/")
	assert.Len(t, token, 43)
	base := srv.URL + "/boot/" + token

	assert.Equal(t, http.StatusNoContent, post(t, base+"/progress", `{"stage":"ProbeRunning","message":"collecting inventory"}`))
	c := progressOf(t, "web-2-discovery")
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, "ProbeRunning", c.Reason)
	assert.Equal(t, "collecting inventory", c.Message)
	assert.Equal(t, http.StatusNoContent, post(t, base+"/progress", `{"stage":"Failed","message":"disk sda: I/O error; token was `+token+`"}`))
	c = progressOf(t, "web-2-discovery")
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "Failed", c.Reason)
	assert.NotContains(t, c.Message, token)
	// The Ready condition the reconciler wrote is still there.
	sbc := getSBC(t, nsAll, "web-2-discovery")
	assert.True(t, meta.IsStatusConditionTrue(sbc.Status.Conditions, metalv1alpha1.ConditionReady))

	for name, body := range map[string]string{
		"not JSON":      `stage=Reported`,
		"unknown field": `{"stage":"Reported","token":"x"}`,
		"bad stage":     `{"stage":"reported; rm -rf /"}`,
		"two values":    `{"stage":"Reported"}{"stage":"Failed"}`,
		"trailing":      `{"stage":"Reported"}]`,
		"empty":         ``,
		"a list":        `["Reported"]`,
	} {
		assert.Equal(t, http.StatusBadRequest, post(t, base+"/progress", body), name)
	}
	big := `{"stage":"Reported","message":"` + strings.Repeat("x", 5000) + `"}`
	assert.Equal(t, http.StatusRequestEntityTooLarge, post(t, base+"/progress", big))
	code, _ = get(t, base+"/progress")
	assert.Equal(t, http.StatusMethodNotAllowed, code)

	// Events on the boot configuration; none carries the token or the ignition.
	require.Eventually(t, func() bool {
		reasons := map[string]bool{}
		for _, ev := range eventsOf(t, "web-2-discovery") {
			reasons[ev.Reason] = true
		}
		return reasons["ScriptServed"] && reasons["IgnitionServed"] && reasons["ProbeRunning"] && reasons["Failed"]
	}, wait, poll)
	for _, ev := range eventsOf(t, "web-2-discovery") {
		assert.NotContains(t, ev.Note, token)
		assert.NotContains(t, ev.Note, "probe-secret-token")
	}
}

func TestBootURLDiesWithTheBootConfiguration(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	readyBoot(t, "web-3", "52:54:00:bb:00:03")
	_, id := script(t, srv.URL, "52:54:00:bb:00:03")
	base := srv.URL + "/boot/" + tokenOf(t, srv.URL, id)
	progress := `{"stage":"ProbeRunning"}`
	require.Equal(t, http.StatusNoContent, post(t, base+"/progress", progress))

	// No longer Ready: refused as soon as the status says so.
	sec := ignitionSecret(t, "web-3-ignition")
	sec.Data = nil
	require.NoError(t, k8s.Update(context.Background(), sec))
	waitFor(t, nsAll, "web-3-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonIgnitionUnreadable)
	assert.Equal(t, http.StatusNotFound, post(t, base+"/progress", progress))
	code, _ := get(t, srv.URL+"/ignition/"+id)
	assert.Equal(t, http.StatusNotFound, code)

	// Ready again, then deleted: refused at once, not once a cache catches up.
	sec = ignitionSecret(t, "web-3-ignition")
	sec.Data = map[string][]byte{"ignition.json": ignitionJSON}
	require.NoError(t, k8s.Update(context.Background(), sec))
	waitFor(t, nsAll, "web-3-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	require.Equal(t, http.StatusNoContent, post(t, base+"/progress", progress))
	require.NoError(t, k8s.Delete(context.Background(), getSBC(t, nsAll, "web-3-discovery")))
	assert.Equal(t, http.StatusNotFound, post(t, base+"/progress", progress))

	// Re-created under the same name, it is another boot, with another id and token.
	createSBC(t, nsAll, "web-3-discovery", "web-3", metalv1alpha1.BootPurposeDiscovery, "web-3-ignition")
	waitFor(t, nsAll, "web-3-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	assert.Equal(t, http.StatusNotFound, post(t, base+"/progress", progress))
	code, _ = get(t, srv.URL+"/ignition/"+id)
	assert.Equal(t, http.StatusNotFound, code)
	_, newID := script(t, srv.URL, "52:54:00:bb:00:03")
	assert.NotEqual(t, id, newID)

	// Guesses.
	for _, guess := range []string{strings.Repeat("A", 43), "x", id[:21], strings.Repeat("A", 22)} {
		code, _ := get(t, srv.URL+"/ignition/"+guess)
		assert.Equal(t, http.StatusNotFound, code)
		assert.Equal(t, http.StatusNotFound, post(t, srv.URL+"/boot/"+guess+"/progress", progress))
	}
}

// tokenOf fetches a boot's ignition (its one fetch) and returns the boot token it carries.
func tokenOf(t *testing.T, base, id string) string {
	t.Helper()
	code, body := get(t, base+"/ignition/"+id)
	require.Equal(t, http.StatusOK, code, body)
	cfg, err := ignition.Decode([]byte(body))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(cfg.BootURL, publicURL+"/boot/"), cfg.BootURL)
	return strings.TrimPrefix(cfg.BootURL, publicURL+"/boot/")
}

func ignitionSecret(t *testing.T, name string) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: nsAll, Name: name}, &s))
	return &s
}

func progressOf(t *testing.T, name string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(getSBC(t, nsAll, name).Status.Conditions, metalv1alpha1.ConditionBootProgress)
	require.NotNil(t, c)
	return c
}

func eventsOf(t *testing.T, name string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, k8s.List(context.Background(), &list, client.InNamespace(nsAll)))
	var out []eventsv1.Event
	for _, ev := range list.Items {
		if ev.Regarding.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// Serve answers DHCP, TFTP and HTTP on sockets opened by the caller (here on loopback).
func TestServeOnCallerSockets(t *testing.T) {
	readyBoot(t, "serve-1", "52:54:00:bb:01:01")
	dhcpConn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	tftpConn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, boot.Listeners{DHCP: dhcpConn, TFTP: tftpConn, HTTP: httpL}) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(wait):
			t.Error("Serve did not return")
		}
	}()

	// HTTP: the script (and, once it is served, the cache knows the boot).
	_, id := script(t, "http://"+httpL.Addr().String(), "52:54:00:bb:01:01")
	assert.NotEmpty(t, id)

	// DHCP: a BIOS PXE ROM is offered an address and undionly.kpxe.
	mac, _ := net.ParseMAC("52:54:00:bb:01:01")
	req, err := dhcpv4.NewDiscovery(mac, dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00000:UNDI:002001")),
		dhcpv4.WithOption(dhcpv4.OptClientArch(iana.INTEL_X86PC)))
	require.NoError(t, err)
	client, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer client.Close()
	_, err = client.WriteTo(req.ToBytes(), dhcpConn.LocalAddr())
	require.NoError(t, err)
	require.NoError(t, client.SetReadDeadline(time.Now().Add(wait)))
	buf := make([]byte, 1500)
	n, _, err := client.ReadFrom(buf)
	require.NoError(t, err)
	offer, err := dhcpv4.FromBytes(buf[:n])
	require.NoError(t, err)
	assert.Equal(t, dhcpv4.MessageTypeOffer, offer.MessageType())
	assert.Equal(t, "undionly.kpxe", offer.BootFileName)
	assert.Equal(t, "10.20.0.1", offer.ServerIPAddr.String())
	assert.True(t, strings.HasPrefix(offer.YourIPAddr.String(), "10.20.0."), offer.YourIPAddr.String())
	// The boot records the loader offered, for a Server to say the firmware did not run it.
	require.Eventually(t, func() bool {
		var sbc metalv1alpha1.ServerBootConfiguration
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: nsAll, Name: "serve-1-discovery"}, &sbc); err != nil {
			return false
		}
		c := meta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionLoaderOffered)
		return c != nil && c.Reason == metalv1alpha1.ReasonLoaderIPXE && c.Message == "DHCP offered undionly.kpxe (iPXE, unsigned: a firmware with Secure Boot on refuses it) to 52:54:00:bb:01:01"
	}, wait, poll, "LoaderOffered on the boot")

	// TFTP: the binary.
	tc, err := tftplib.NewClient(tftpConn.LocalAddr().String())
	require.NoError(t, err)
	wt, err := tc.Receive("undionly.kpxe", "octet")
	require.NoError(t, err)
	var got bytes.Buffer
	_, err = wt.WriteTo(&got)
	require.NoError(t, err)
	assert.Equal(t, "ipxe binary undionly.kpxe", got.String())
}
