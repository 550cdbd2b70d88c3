// Package install installs Ironfleet on a real node (test/node) the ways its users do —
// kubectl apply -k config/default, and an OLM Subscription — and checks that what it installed
// works: from inside its pod the manager enrolls a simulated BMC, the server is discovered and
// becomes Available, a ServerClaim made with kubectl binds it, and its metrics answer.
package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ociimage"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
	"github.com/ironfleet/ironfleet/test/node"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// systemNamespace is where config/default installs Ironfleet. OLM installs it where it is
// subscribed (olm_test.go: OLM's own operators namespace).
const systemNamespace = "ironfleet-system"

// images are the images make images built, by image.
func images(t *testing.T, root string) map[string]ociimage.Written {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "bin", "images", "images.json"))
	require.NoError(t, err, "make images builds bin/images (make test does it first)")
	var written map[string]ociimage.Written
	require.NoError(t, json.Unmarshal(data, &written))
	return written
}

// startNode starts a real node with the named images of make images imported.
func startNode(t *testing.T, ctx context.Context, imported ...string) (*node.Node, string, map[string]ociimage.Written) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("a real node needs root; make test runs as root")
	}
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	imgs := images(t, root)
	opts, err := node.OptionsFromEnv(filepath.Join(root, "bin", "images"), imgs["pause"].Ref)
	require.NoError(t, err)
	opts.Logf = t.Logf
	n, err := node.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.Empty(t, n.PullAttempts(), "no image was ever pulled")
		require.NoError(t, n.Stop())
	})
	for _, image := range imported {
		require.NoError(t, n.Import(ctx, imgs[image].Archive))
	}
	return n, root, imgs
}

// eventually polls check until it holds or timeout passes; on failure it says what it waited
// for and what explain shows.
func eventually(t *testing.T, timeout time.Duration, check func() bool, explain func() string, what string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v%s", what, timeout, explain())
		}
		<-tick.C
	}
}

// explainer shows the state of Ironfleet's namespace ns and the manager's log.
func explainer(ctx context.Context, n *node.Node, ns string) func() string {
	return func() string {
		var b strings.Builder
		for _, args := range [][]string{
			{"-n", ns, "get", "pods,deployments,events", "-o", "wide"},
			{"-n", ns, "logs", "deploy/ironfleet-controller-manager", "--tail=40"},
			{"-n", ns, "logs", "deploy/ironfleet-boot-service", "--tail=20"},
			{"get", "serverbootconfigurations", "-A", "-o", "yaml"},
			{"get", "bmcs,servers,serverclaims", "-A", "-o", "wide"},
		} {
			out, err := n.Kubectl(ctx, args...)
			fmt.Fprintf(&b, "\n$ kubectl %s\n%s%v", strings.Join(args, " "), out, errOrEmpty(err))
		}
		return b.String()
	}
}

func errOrEmpty(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestKustomizeInstall: kubectl apply -k config/default, as shipped, on a real node.
func TestKustomizeInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n, root, _ := startNode(t, ctx, "manager", "boot-service")
	out, err := n.Kubectl(ctx, "apply", "-k", filepath.Join(root, "config", "default"))
	require.NoError(t, err, string(out))
	c, err := client.New(n.Config, client.Options{Scheme: testenv.Scheme()})
	require.NoError(t, err)
	explain := explainer(ctx, n, systemNamespace)
	for _, name := range []string{"ironfleet-controller-manager", "ironfleet-boot-service"} {
		eventually(t, 5*time.Minute, func() bool {
			var d appsv1.Deployment
			return c.Get(ctx, client.ObjectKey{Namespace: systemNamespace, Name: name}, &d) == nil && d.Status.AvailableReplicas == 1
		}, explain, "Deployment "+name+" is Available")
	}
	works(t, ctx, n, c, systemNamespace, explain)
}

// works checks what an installed Ironfleet does, from inside its pod: it enrolls a simulated
// BMC reachable on the node, discovers its server (the probe runs in this process, on the
// server's hardware tree, as the lab's boot service does, and reports to the registry through
// its Service), and binds a ServerClaim made with kubectl; its metrics Service answers.
func works(t *testing.T, ctx context.Context, n *node.Node, c client.Client, ns string, explain func() string) {
	t.Helper()
	bootServiceHearsDHCP(t, n, explain)
	// The simulated BMC listens on the node, where the manager's pod reaches it.
	spec := bmcsim.DefaultSystem(0)
	spec.Manufacturer, spec.Model = "Contoso", "R-1000"
	var sim *bmcsim.BMC
	require.NoError(t, n.Network().Do(func() error {
		var err error
		sim, err = bmcsim.Start(bmcsim.Options{Addr: n.IP().String() + ":0", Username: "admin", Password: "install-test", Systems: []bmcsim.SystemSpec{spec}})
		return err
	}))
	t.Cleanup(func() { _ = sim.Close() })

	// The registry, as this process reaches it: a relay into the node to its Service.
	var svc corev1.Service
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ironfleet-registry"}, &svc))
	registry := relay(t, ctx, n, net.JoinHostPort(svc.Spec.ClusterIP, "8443"))

	// The installed boot service (its pod, with the RBAC it was installed with) checks each
	// boot configuration (the server's MACs, its ignition Secret, the probe and iPXE files in
	// its image) and marks it Ready; nothing else here does. This process only plays the
	// server's network boot: when the BMC powers it on from PXE, the probe of the Ready
	// configuration runs on its hardware tree and reports through the registry's Service.
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard))) // the client logs through it
	boots := lab.NewBootService(ctx, c, zap.New(zap.WriteTo(io.Discard)))
	boots.RegistryURL = "https://" + registry
	t.Cleanup(boots.Wait)
	host, err := lab.PrepareHost("small-vm", t.TempDir(), spec.UUID)
	require.NoError(t, err)
	boots.AddHost(host)
	sim.OnPowerOn(boots.PowerOn)

	require.NoError(t, c.Create(ctx, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: "install-test"}, Spec: m.BMCSecretSpec{Username: "admin", Password: "install-test"}}))
	require.NoError(t, c.Create(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "install-test"},
		Spec: m.BMCSpec{Access: &m.BMCAccess{Address: "redfish+http://" + sim.Host() + "/redfish/v1"}, BMCSecretRef: m.LocalObjectReference{Name: "install-test"}}}))
	eventually(t, 5*time.Minute, func() bool {
		var s m.Server
		return c.Get(ctx, client.ObjectKey{Name: strings.ToLower(spec.UUID)}, &s) == nil && s.Status.State == m.ServerStateAvailable
	}, explain, "the server is enrolled, discovered and Available")

	claimFile := filepath.Join(t.TempDir(), "claim.yaml")
	require.NoError(t, os.WriteFile(claimFile, []byte(`apiVersion: metal.ironfleet.dev/v1alpha1
kind: ServerClaim
metadata:
  name: web
  namespace: default
spec:
  serverSelector:
    matchLabels:
      metal.ironfleet.dev/manufacturer: Contoso
  power: "Off"
`), 0o644))
	out, err := n.Kubectl(ctx, "create", "-f", claimFile)
	require.NoError(t, err, string(out))
	eventually(t, 2*time.Minute, func() bool {
		var claim m.ServerClaim
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &claim) == nil && claim.Status.Phase == m.ClaimPhaseBound
	}, explain, "the claim binds the server")

	// The Service's rules follow its endpoints within kube-proxy's sync: until then a connection
	// is refused.
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ironfleet-metrics"}, &svc))
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: n.Dial}}
	var last string
	eventually(t, time.Minute, func() bool {
		resp, err := hc.Get("http://" + net.JoinHostPort(svc.Spec.ClusterIP, "8080") + "/metrics")
		if err != nil {
			last = err.Error()
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		last = fmt.Sprintf("%d, %d bytes", resp.StatusCode, len(body))
		return resp.StatusCode == http.StatusOK && strings.Contains(string(body), "controller_runtime_reconcile_total")
	}, func() string { return "\nlast: " + last + explain() }, "the manager's metrics answer through its Service")
}

// relay listens on this host's loopback and forwards each connection into the node, to target.
func relay(t *testing.T, ctx context.Context, n *node.Node, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := n.Dial(ctx, "tcp", target)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
	return ln.Addr().String()
}
