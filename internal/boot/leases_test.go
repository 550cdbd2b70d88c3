package boot_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// runningService is a boot service answering DHCP on a loopback socket, in a manager of its
// own, as the binary runs it.
type runningService struct {
	dhcp net.Addr
	stop func()
}

func runService(t *testing.T, cfg *rest.Config, ns, name string) runningService {
	t.Helper()
	bc := testConfig(ns, nil)
	bc.Name = name
	s, err := boot.New(bc)
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme,
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)}})
	require.NoError(t, err)
	require.NoError(t, s.SetupWithManager(mgr))
	dhcpConn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	httpL, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	mgrDone, serveDone := make(chan error, 1), make(chan error, 1)
	go func() { mgrDone <- mgr.Start(ctx) }()
	go func() { serveDone <- s.Serve(ctx, boot.Listeners{DHCP: dhcpConn, HTTP: httpL}) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			for _, done := range []chan error{serveDone, mgrDone} {
				select {
				case err := <-done:
					assert.NoError(t, err)
				case <-time.After(wait):
					t.Errorf("boot service %s did not stop", name)
				}
			}
		})
	}
	t.Cleanup(stop)
	return runningService{dhcp: dhcpConn.LocalAddr(), stop: stop}
}

// dhcpAsk sends m to the service as a client would, again every second until a reply of the
// same transaction comes (a DHCP client retransmits), and returns the reply.
func dhcpAsk(t *testing.T, to net.Addr, m *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer conn.Close()
	buf := make([]byte, 1500)
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		_, err := conn.WriteTo(m.ToBytes(), to)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Second)))
		n, _, err := conn.ReadFrom(buf)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			continue
		}
		require.NoError(t, err)
		r, err := dhcpv4.FromBytes(buf[:n])
		require.NoError(t, err)
		if r.TransactionID == m.TransactionID {
			return r
		}
	}
	t.Fatalf("no DHCP reply to %s from %s", m.MessageType(), to)
	return nil
}

// offer is the service's OFFER to mac, asking for requested when it is valid.
func offer(t *testing.T, to net.Addr, mac net.HardwareAddr, requested net.IP) *dhcpv4.DHCPv4 {
	t.Helper()
	var mods []dhcpv4.Modifier
	if requested != nil {
		mods = append(mods, dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(requested)))
	}
	m, err := dhcpv4.NewDiscovery(mac, mods...)
	require.NoError(t, err)
	r := dhcpAsk(t, to, m)
	require.Equal(t, dhcpv4.MessageTypeOffer, r.MessageType())
	return r
}

// Full mode's leases are kept in a ConfigMap: a restarted service, and a second one started
// next to the first, offer no address leased before to another MAC; the leased MAC gets its
// own back. The services run with exactly the shipped RBAC.
func TestLeasesSurviveARestart(t *testing.T) {
	ctx := context.Background()
	cluster, ns, rules := shippedRBAC(t)
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	refused := &testenv.Refusals{}
	cfg, err := env.UserWith(ctx, testenv.Grant{User: "ironfleet-boot-service-leases-test", ClusterRules: cluster, Namespace: ns, Rules: rules}, refused)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = k8s.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: boot.LeaseConfigMap}})
	})

	first := runService(t, cfg, ns, "boot-service-leases-1")
	macs := map[string]net.HardwareAddr{}
	for _, name := range []string{"lease-1", "lease-2"} {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xee, 0x10, byte(len(macs) + 1)}
		macs[name] = mac
		createServer(t, name, nil, mac.String())
		createSecret(t, ns, name+"-ignition", ignitionJSON)
		createSBC(t, ns, name+"-discovery", name, metalv1alpha1.BootPurposeDiscovery, name+"-ignition")
		waitFor(t, ns, name+"-discovery", metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	}

	// lease-1 takes an address: DISCOVER, REQUEST, ACK.
	o := offer(t, first.dhcp, macs["lease-1"], nil)
	req, err := dhcpv4.NewRequestFromOffer(o)
	require.NoError(t, err)
	ack := dhcpAsk(t, first.dhcp, req)
	require.Equal(t, dhcpv4.MessageTypeAck, ack.MessageType())
	leased := ack.YourIPAddr
	line := leased.String() + " " + macs["lease-1"].String() + " "
	var cm corev1.ConfigMap
	require.Eventually(t, func() bool {
		return k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: boot.LeaseConfigMap}, &cm) == nil &&
			strings.Contains(cm.Data[boot.LeaseConfigMapKey], line)
	}, wait, poll, "the lease is written to ConfigMap %s", boot.LeaseConfigMap)
	assert.Equal(t, "boot-service-dhcp-leases", cm.Labels[boot.LabelComponent])

	// A second service started next to the first does not offer it to lease-2, which asks
	// for it by name.
	second := runService(t, cfg, ns, "boot-service-leases-2")
	assert.NotEqual(t, leased.String(), offer(t, second.dhcp, macs["lease-2"], leased).YourIPAddr.String(),
		"a second instance offered a leased address to another MAC")

	// Both stop; a third starts: the same.
	first.stop()
	second.stop()
	third := runService(t, cfg, ns, "boot-service-leases-3")
	assert.NotEqual(t, leased.String(), offer(t, third.dhcp, macs["lease-2"], leased).YourIPAddr.String(),
		"a restarted service offered a leased address to another MAC")
	assert.Equal(t, leased.String(), offer(t, third.dhcp, macs["lease-1"], nil).YourIPAddr.String(),
		"the MAC that holds the lease gets its address back")
	third.stop()
	assert.Empty(t, refused.List(), "requests the shipped RBAC refused")
}
