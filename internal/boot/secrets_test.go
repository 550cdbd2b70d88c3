package boot_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// These tests play the attacker on the provisioning network: a host that is not the server
// booting, which knows the server's MAC (a tenant that held it, or anyone who saw its DHCP
// broadcasts). Each host is a loopback address of its own (127.0.0.0/8 is all loopback), so
// the boot service sees two addresses over real HTTP.

const (
	hostAddr     = "127.0.0.2"
	attackerAddr = "127.0.0.3"
)

// from is an HTTP client whose connections come from addr.
func from(addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(addr)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

func getFrom(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// scriptFrom is script, asked by the client c: the status and the boot id ("" for none).
func scriptFrom(t *testing.T, c *http.Client, base, mac string) (int, string) {
	t.Helper()
	code, body := getFrom(t, c, base+"/ipxe/"+mac)
	if m := ignitionURL.FindStringSubmatch(body); m != nil {
		return code, m[2]
	}
	return code, ""
}

// bootIDFrom waits (the service answers from its cache) for the script of mac, asked by c, to
// name a boot, and returns its id.
func bootIDFrom(t *testing.T, c *http.Client, base, mac string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		_, id = scriptFrom(t, c, base, mac)
		return id != ""
	}, wait, poll, "no boot for %s", mac)
	return id
}

// The registry token must never reach the attacker, nor the boot token in any form.
func assertNoSecret(t *testing.T, body string) {
	t.Helper()
	assert.NotContains(t, body, "probe-secret-token")
	assert.NotRegexp(t, regexp.MustCompile(`/boot/[A-Za-z0-9_-]{43}`), body)
}

// provisionIgnition is a provision-mode ignition, as the operator renders an install's.
var provisionIgnition = []byte(`{"registryURL":"https://registry.test","token":"probe-secret-token","systemUUID":"x","mode":"provision","install":{"image":"https://images.test/os.raw.gz","imageChecksum":"sha256:` + strings.Repeat("ab", 32) + `","userData":"am9pbiB0b2tlbg=="}}`)

// readyBootOf makes a server with a Ready boot of purpose (its ignition data) in ns.
func readyBootOf(t *testing.T, ns, name, mac string, purpose metalv1alpha1.BootPurpose, data []byte) string {
	t.Helper()
	createServer(t, name, nil, mac)
	createSecret(t, ns, name+"-ignition", data)
	sbc := name + "-" + strings.ToLower(string(purpose))
	createSBC(t, ns, sbc, name, purpose, name+"-ignition")
	waitFor(t, ns, sbc, metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	return sbc
}

// An attacker who knows the MAC of a server mid-boot gets neither its ignition nor its tokens,
// whether it asks before the server or after, for a discovery and for an install.
func TestAnotherHostCannotObtainABootsSecrets(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	host, attacker := from(hostAddr), from(attackerAddr)
	for _, tc := range []struct {
		name    string
		mac     string
		purpose metalv1alpha1.BootPurpose
		data    []byte
	}{
		{"atk-disc", "52:54:00:ee:00:01", metalv1alpha1.BootPurposeDiscovery, ignitionJSON},
		{"atk-inst", "52:54:00:ee:00:02", metalv1alpha1.BootPurposeProvisioning, provisionIgnition},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sbc := readyBootOf(t, nsAll, tc.name, tc.mac, tc.purpose, tc.data)
			// The server boots: its script's fetch binds the boot to its address, and it
			// gets its ignition once.
			id := bootIDFrom(t, host, srv.URL, tc.mac)
			code, body := getFrom(t, host, srv.URL+"/ignition/"+id)
			require.Equal(t, http.StatusOK, code, body)
			assert.Contains(t, body, "probe-secret-token")

			// The attacker, with the same id, from another address: refused, and nothing of
			// the boot's secrets in the answer, the script included.
			code, body = getFrom(t, attacker, srv.URL+"/ignition/"+id)
			assert.Equal(t, http.StatusForbidden, code)
			assertNoSecret(t, body)
			_, body = getFrom(t, attacker, srv.URL+"/ipxe/"+tc.mac)
			assertNoSecret(t, body)

			rec := getSBC(t, nsAll, sbc).Status.Secrets
			require.NotNil(t, rec)
			assert.Equal(t, hostAddr, rec.IgnitionServedTo)
			assert.True(t, rec.Ended, "another host asked: the boot is ended")
		})
	}
}

// An attacker who asks first (here: for the script, then the ignition) wins the race for the
// address only where the boot service has no lease to go by, and then the server's own request
// ends the boot: the attacker's registry token dies with it (the operator drops the boot).
func TestAFirstFetchByAnotherHostEndsTheBootWhenTheServerAsks(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	host, attacker := from(hostAddr), from(attackerAddr)
	sbc := readyBootOf(t, nsAll, "atk-first", "52:54:00:ee:00:03", metalv1alpha1.BootPurposeDiscovery, ignitionJSON)
	id := bootIDFrom(t, attacker, srv.URL, "52:54:00:ee:00:03")
	code, _ := getFrom(t, attacker, srv.URL+"/ignition/"+id)
	require.Equal(t, http.StatusOK, code)

	code, body := getFrom(t, host, srv.URL+"/ipxe/52:54:00:ee:00:03")
	assert.Equal(t, http.StatusForbidden, code)
	assertNoSecret(t, body)
	c := ignitionServed(t, sbc)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, metalv1alpha1.ReasonWrongHost, c.Reason)
	assert.Contains(t, c.Message, attackerAddr)
	assert.Contains(t, c.Message, hostAddr)
	waitFor(t, nsAll, sbc, metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonBootEnded)
	assertWarning(t, sbc, metalv1alpha1.ReasonWrongHost)
}

// A boot's ignition is served once: the second fetch, even from the host it went to, and even
// at another replica of the boot service (or the same one restarted), is refused, ends the
// boot, and says so in a Warning event and the IgnitionServed condition.
func TestASecondFetchIsRefusedAndEndsTheBoot(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	// A second replica: a service of its own, in a manager of its own, for the same boots.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	replica, err := startService(ctx, testConfig(nsAll, nil))
	require.NoError(t, err)
	other := httptest.NewServer(replica.Handler())
	defer other.Close()

	host := from(hostAddr)
	sbc := readyBootOf(t, nsAll, "once-1", "52:54:00:ee:00:11", metalv1alpha1.BootPurposeDiscovery, ignitionJSON)
	id := bootIDFrom(t, host, srv.URL, "52:54:00:ee:00:11")
	code, first := getFrom(t, host, srv.URL+"/ignition/"+id)
	require.Equal(t, http.StatusOK, code)
	m := regexp.MustCompile(`/boot/([A-Za-z0-9_-]{43})`).FindStringSubmatch(first)
	require.NotNil(t, m, "the ignition names the boot URL")
	progress := srv.URL + "/boot/" + m[1] + "/progress"
	require.Equal(t, http.StatusNoContent, post(t, progress, `{"stage":"IgnitionFetched"}`))
	c := ignitionServed(t, sbc)
	assert.Equal(t, metav1.ConditionTrue, c.Status)
	assert.Equal(t, metalv1alpha1.ReasonIgnitionServedOnce, c.Reason)

	code, body := getFrom(t, host, other.URL+"/ignition/"+id)
	assert.Equal(t, http.StatusForbidden, code, "the other replica knows it was served")
	assertNoSecret(t, body)
	// Ended: refused again (403), or, once its status says it is no longer Ready, not found.
	code, _ = getFrom(t, host, srv.URL+"/ignition/"+id)
	assert.Contains(t, []int{http.StatusForbidden, http.StatusNotFound}, code)

	c = ignitionServed(t, sbc)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, metalv1alpha1.ReasonSecondFetchRefused, c.Reason)
	assert.Contains(t, c.Message, hostAddr)
	rec := getSBC(t, nsAll, sbc).Status.Secrets
	require.NotNil(t, rec)
	assert.True(t, rec.Ended)
	assert.Equal(t, "boot-"+sbc, rec.Boot)
	assertWarning(t, sbc, metalv1alpha1.ReasonSecondFetchRefused)
	// Ended: not Ready, and nothing of it is served, progress included.
	waitFor(t, nsAll, sbc, metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonBootEnded)
	assert.Equal(t, http.StatusNotFound, post(t, progress, `{"stage":"Reported"}`))
	assert.Eventually(t, func() bool {
		code, body := getFrom(t, host, srv.URL+"/ipxe/52:54:00:ee:00:11")
		return code == http.StatusOK && strings.Contains(body, "no Ready boot configuration")
	}, wait, poll, "an ended boot's script says there is nothing to boot")

	// A new boot of the same configuration (the operator renames it) is served again.
	cur := getSBC(t, nsAll, sbc)
	cur.Annotations[metalv1alpha1.AnnotationProbeBoot] = "boot-" + sbc + "-2"
	require.NoError(t, k8s.Update(context.Background(), cur))
	waitFor(t, nsAll, sbc, metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	newID := bootIDFrom(t, host, srv.URL, "52:54:00:ee:00:11")
	assert.NotEqual(t, id, newID)
	code, _ = getFrom(t, host, srv.URL+"/ignition/"+newID)
	assert.Equal(t, http.StatusOK, code)
}

// A virtual-media boot's ISO (which carries the ignition) goes to the first address that
// fetches it, the BMC, in as many reads as it likes; another address ends the boot.
func TestTheISOGoesToOneAddress(t *testing.T) {
	srv := httptest.NewServer(svc.Handler())
	defer srv.Close()
	bmc, attacker := from(hostAddr), from(attackerAddr)
	isoURL := readyVMBoot(t, "vm-once")
	at, _ := isoAt(t, srv.URL, isoURL)
	for range 3 {
		code, _ := getFrom(t, bmc, at)
		require.Equal(t, http.StatusOK, code)
	}
	code, body := getFrom(t, attacker, at)
	assert.Equal(t, http.StatusForbidden, code)
	assert.NotContains(t, body, "probe-secret-token")
	c := ignitionServed(t, "vm-once-discovery")
	assert.Equal(t, metalv1alpha1.ReasonSecondFetchRefused, c.Reason)
	waitFor(t, nsAll, "vm-once-discovery", metalv1alpha1.BootConfigurationStateError, metalv1alpha1.ReasonBootEnded)
	code, _ = getFrom(t, bmc, at)
	assert.Equal(t, http.StatusNotFound, code)
}

// Where the boot service leased the server its address (full DHCP mode), only that address is
// served: another is refused and the boot goes on.
func TestOnlyTheLeasedAddressIsServed(t *testing.T) {
	const ns = "boot-lease"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cfg := testConfig(ns, nil)
	cfg.ServerIP = netip.MustParseAddr("127.0.0.1")
	cfg.DHCPRangeStart, cfg.DHCPRangeEnd = netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.9")
	leasing, err := startService(ctx, cfg)
	require.NoError(t, err)
	srv := httptest.NewServer(leasing.Handler())
	defer srv.Close()

	mac := "52:54:00:ee:00:21"
	sbc := readyBootOf(t, ns, "lease-1", mac, metalv1alpha1.BootPurposeDiscovery, ignitionJSON)
	hw, _ := net.ParseMAC(mac)
	require.True(t, leasing.Lease(hw, netip.MustParseAddr(hostAddr)))
	host, attacker := from(hostAddr), from(attackerAddr)

	// The attacker asks first, and is refused: the lease says who the server is.
	var code int
	require.Eventually(t, func() bool {
		code, _ = scriptFrom(t, attacker, srv.URL, mac)
		return code == http.StatusForbidden
	}, wait, poll)
	id := bootIDFrom(t, host, srv.URL, mac)
	code, body := getFrom(t, attacker, srv.URL+"/ignition/"+id)
	assert.Equal(t, http.StatusForbidden, code)
	assertNoSecret(t, body)
	code, body = getFrom(t, host, srv.URL+"/ignition/"+id)
	require.Equal(t, http.StatusOK, code)
	assert.Contains(t, body, "probe-secret-token")

	cur := getSBC(t, ns, sbc)
	require.NotNil(t, cur.Status.Secrets)
	assert.Equal(t, hostAddr, cur.Status.Secrets.HostAddress)
	assert.Equal(t, "Lease", cur.Status.Secrets.HostAddressSource)
	assert.False(t, cur.Status.Secrets.Ended)
	assert.Equal(t, metalv1alpha1.BootConfigurationStateReady, cur.Status.State)
}

func ignitionServed(t *testing.T, sbc string) *metav1.Condition {
	t.Helper()
	c := meta.FindStatusCondition(getSBC(t, nsAll, sbc).Status.Conditions, metalv1alpha1.ConditionIgnitionServed)
	require.NotNil(t, c, "no IgnitionServed condition on %s", sbc)
	return c
}

func assertWarning(t *testing.T, sbc, reason string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, ev := range eventsOf(t, sbc) {
			if ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				return !strings.Contains(ev.Note, "probe-secret-token")
			}
		}
		return false
	}, wait, poll, "no Warning event %s on %s", reason, sbc)
}
