// Package node runs a real single-node Kubernetes cluster for tests and the lab: etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler, containerd + runc (Debian's), a
// kubelet and kube-proxy, all inside a network namespace of its own (test/vm's Network:
// no uplink, no veth to the host), so the cluster's bridge, iptables rules and routes go with
// it and nothing of the host's network changes. This process talks to it through sockets it
// opens inside the namespace (Node.Dial).
//
// Images are never pulled: they are imported into containerd first (Node.Import, from the OCI
// image tars of make images), and every registry containerd could pull from is a trap that
// records the attempt (Node.PullAttempts): a test fails on one, not on a DNS query.
//
// What it makes outside the namespace it removes on Stop, and a later Start removes what a
// killed run left (cleanupStale): the processes, the mounts under its directory, its cgroups,
// its directory.
package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/test/vm"
)

// Name is the node's name.
const Name = "ironfleet-node"

// Options configure a node.
type Options struct {
	// ControlPlaneDir holds kube-apiserver, etcd and kubectl (the envtest assets:
	// $KUBEBUILDER_ASSETS); NodeDir kubelet, kube-controller-manager, kube-scheduler and
	// kube-proxy ($IRONFLEET_NODE_ASSETS). make node-tools builds both.
	ControlPlaneDir, NodeDir string
	// CoreDNS is the coredns binary, the node's cluster DNS ($IRONFLEET_COREDNS).
	CoreDNS string
	// PauseImage is the pod sandbox image's tar (make images: bin/images/pause.tar) and
	// PauseRef its name.
	PauseImage, PauseRef string
	// Logf reports progress; nil: silent.
	Logf func(format string, args ...any)
}

// Node is a running single-node cluster.
type Node struct {
	opts Options
	dir  string
	net  *vm.Network
	ip   netip.Addr
	pki  *pki

	mu    sync.Mutex
	procs []*process
	trap  *pullTrap

	// Config is an administrator's client configuration; its Dial enters the node's network
	// namespace.
	Config *rest.Config
	// Kubeconfig is the administrator's kubeconfig file (its server is reachable only inside
	// the namespace: run kubectl with Exec).
	Kubeconfig string
}

// Addresses inside the namespace.
const (
	serviceCIDR = "10.0.0.0/24"
	podCIDR     = "10.244.0.0/24"
	apiPort     = 6443
)

// OptionsFromEnv are the options make test gives: the tools the Makefile built
// ($KUBEBUILDER_ASSETS, $IRONFLEET_NODE_ASSETS) and the pause image of make images.
func OptionsFromEnv(imagesDir, pauseRef string) (Options, error) {
	o := Options{ControlPlaneDir: os.Getenv("KUBEBUILDER_ASSETS"), NodeDir: os.Getenv("IRONFLEET_NODE_ASSETS"), CoreDNS: os.Getenv("IRONFLEET_COREDNS"),
		PauseImage: filepath.Join(imagesDir, "pause.tar"), PauseRef: pauseRef}
	if o.ControlPlaneDir == "" || o.NodeDir == "" || o.CoreDNS == "" {
		return o, errors.New("KUBEBUILDER_ASSETS, IRONFLEET_NODE_ASSETS and IRONFLEET_COREDNS must name the built tools: run make node-tools (make test does)")
	}
	return o, nil
}

func (n *Node) logf(format string, args ...any) {
	if n.opts.Logf != nil {
		n.opts.Logf(format, args...)
	}
}

// Start starts a node and waits until it is Ready. On failure everything it made is removed.
func Start(ctx context.Context, opts Options) (*Node, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("a node needs root (network namespaces, mounts, cgroups)")
	}
	for _, check := range []struct{ dir, bin string }{
		{opts.ControlPlaneDir, "kube-apiserver"}, {opts.ControlPlaneDir, "etcd"}, {opts.ControlPlaneDir, "kubectl"},
		{opts.NodeDir, "kubelet"}, {opts.NodeDir, "kube-controller-manager"}, {opts.NodeDir, "kube-scheduler"}, {opts.NodeDir, "kube-proxy"},
	} {
		if _, err := os.Stat(filepath.Join(check.dir, check.bin)); err != nil {
			return nil, fmt.Errorf("%s: %w (make node-tools builds it)", check.bin, err)
		}
	}
	if _, err := os.Stat(opts.CoreDNS); err != nil {
		return nil, fmt.Errorf("coredns: %w (make node-tools builds it)", err)
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables"} {
		if _, err := lookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not installed (make node-deps installs containerd, runc, iptables and the CNI plugins): %w", bin, err)
		}
	}
	if err := cleanupStale(); err != nil {
		return nil, fmt.Errorf("removing what earlier runs left: %w", err)
	}
	n := &Node{opts: opts, dir: filepath.Join(baseDir, strconv.Itoa(os.Getpid()))}
	if err := n.start(ctx); err != nil {
		return nil, errors.Join(err, n.Stop())
	}
	return n, nil
}

func (n *Node) start(ctx context.Context) error {
	if err := os.MkdirAll(n.dir, 0o700); err != nil {
		return err
	}
	var err error
	if n.net, err = vm.NewNetwork(vm.NetworkOptions{NoRouterAdvertisements: true}); err != nil {
		return err
	}
	n.ip = n.net.BridgeIP()
	// Connections this process opens inside to a Service's address need a route before
	// kube-proxy's rules rewrite them (pods route through their bridge's gateway anyway).
	if err := n.net.Do(func() error {
		link, err := netlink.LinkByName(vm.BridgeName)
		if err != nil {
			return err
		}
		dst := net.IPNet{IP: net.ParseIP(netip.MustParsePrefix(serviceCIDR).Addr().String()), Mask: net.CIDRMask(netip.MustParsePrefix(serviceCIDR).Bits(), 32)}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: &dst})
	}); err != nil {
		return fmt.Errorf("routing the Service addresses: %w", err)
	}
	if err := makeCgroups(); err != nil {
		return err
	}
	if n.pki, err = writePKI(n.dir, n.ip); err != nil {
		return err
	}
	if n.Kubeconfig, err = n.writeKubeconfig("admin", n.pki.admin); err != nil {
		return err
	}
	n.Config, err = n.restConfig()
	if err != nil {
		return err
	}
	if err := n.startControlPlane(ctx); err != nil {
		return err
	}
	if err := n.startRuntime(ctx); err != nil {
		return err
	}
	if err := n.startKubelet(ctx); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// Dial opens a connection from inside the node's network namespace.
func (n *Node) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.net.Do(func() error {
		var err error
		c, err = (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a TCP listener inside the node's network namespace, on the node's address (port
// 0: any): what runs on the node (its pods) reaches it there, and this process serves it.
func (n *Node) Listen(port int) (net.Listener, error) {
	return n.net.ListenTCP(net.JoinHostPort(n.ip.String(), strconv.Itoa(port)))
}

// IP is the node's address (its InternalIP, and the apiserver's advertise address).
func (n *Node) IP() netip.Addr { return n.ip }

// Network is the node's network namespace.
func (n *Node) Network() *vm.Network { return n.net }

func (n *Node) restConfig() (*rest.Config, error) {
	cfg := &rest.Config{
		Host:            "https://" + net.JoinHostPort(n.ip.String(), strconv.Itoa(apiPort)),
		TLSClientConfig: rest.TLSClientConfig{CAData: n.pki.ca.CertPEM(), CertData: n.pki.admin.cert, KeyData: n.pki.admin.key},
		Dial:            n.Dial,
		QPS:             50, Burst: 100,
	}
	return cfg, nil
}

// httpClient reaches https endpoints inside the namespace, trusting the node's CA.
func (n *Node) httpClient() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(n.pki.ca.CertPEM())
	cert, _ := tls.X509KeyPair(n.pki.admin.cert, n.pki.admin.key)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext:     n.Dial,
		TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
	}}
}

// waitReady waits for the node to be registered and Ready.
func (n *Node) waitReady(ctx context.Context) error {
	c, err := client.New(n.Config, client.Options{})
	if err != nil {
		return err
	}
	var last string
	err = poll(ctx, 3*time.Minute, func() (bool, error) {
		var node corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: Name}, &node); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
				return cond.Status == corev1.ConditionTrue, nil
			}
		}
		last = "no Ready condition yet"
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready (%s): %w%s", Name, last, err, n.logTails("kubelet", "containerd"))
	}
	// Pods are refused until their namespace's default ServiceAccount exists.
	if err := poll(ctx, time.Minute, func() (bool, error) {
		return c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	}); err != nil {
		return fmt.Errorf("no default ServiceAccount: %w%s", err, n.logTails("kube-controller-manager"))
	}
	n.logf("node %s Ready at %s", Name, n.ip)
	return nil
}

// poll calls check until it says done, fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, check func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		done, err := check()
		if done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Stop stops every process in reverse order of start, removes the mounts, cgroups, files and
// network namespace the node made. It can be called more than once.
func (n *Node) Stop() error {
	n.mu.Lock()
	procs := n.procs
	n.procs = nil
	n.mu.Unlock()
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		errs = append(errs, procs[i].stop())
	}
	if n.trap != nil {
		n.trap.close()
	}
	if n.net != nil {
		errs = append(errs, n.net.Close()) // the containers' processes in it too
		n.net = nil
	}
	errs = append(errs, removeRun(n.dir))
	return errors.Join(errs...)
}
