package node

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

func lookPath(bin string) (string, error) { return exec.LookPath(bin) }

// startControlPlane starts etcd, kube-apiserver (waiting for it to be ready),
// kube-controller-manager and kube-scheduler.
func (n *Node) startControlPlane(ctx context.Context) error {
	cp := n.opts.ControlPlaneDir
	if _, err := n.run("etcd", filepath.Join(cp, "etcd"),
		"--data-dir="+filepath.Join(n.dir, "etcd"),
		"--listen-client-urls=http://127.0.0.1:2379", "--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380", "--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=default=http://127.0.0.1:2380", "--unsafe-no-fsync=true"); err != nil {
		return err
	}
	if _, err := n.run("kube-apiserver", filepath.Join(cp, "kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379",
		"--advertise-address="+n.ip.String(), "--bind-address=0.0.0.0", "--secure-port="+strconv.Itoa(apiPort),
		"--tls-cert-file="+n.pki.apiserver.certFile, "--tls-private-key-file="+n.pki.apiserver.keyFile,
		"--client-ca-file="+n.pki.caFile,
		"--service-cluster-ip-range="+serviceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+n.pki.saKeyFile, "--service-account-signing-key-file="+n.pki.saKeyFile,
		"--authorization-mode=Node,RBAC", "--allow-privileged=true",
		"--kubelet-client-certificate="+n.pki.admin.certFile, "--kubelet-client-key="+n.pki.admin.keyFile,
		"--kubelet-certificate-authority="+n.pki.caFile, "--kubelet-preferred-address-types=InternalIP",
		"--cert-dir="+filepath.Join(n.dir, "apiserver"),
		// Aggregated APIs (OLM's packageserver), reached at their pods' addresses.
		"--requestheader-client-ca-file="+n.pki.caFile, "--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User", "--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+n.pki.proxy.certFile, "--proxy-client-key-file="+n.pki.proxy.keyFile,
		"--enable-aggregator-routing=true"); err != nil {
		return err
	}
	hc := n.httpClient()
	var last string
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		if err := n.waitExited(); err != nil {
			return false, err
		}
		resp, err := hc.Get(fmt.Sprintf("https://%s:%d/readyz", n.ip, apiPort))
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return fmt.Errorf("kube-apiserver not ready (%s): %w%s", last, err, n.logTails("kube-apiserver", "etcd"))
	}
	n.logf("kube-apiserver ready at https://%s:%d", n.ip, apiPort)
	if _, err := n.run("kube-controller-manager", filepath.Join(n.opts.NodeDir, "kube-controller-manager"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1",
		"--service-account-private-key-file="+n.pki.saKeyFile, "--root-ca-file="+n.pki.caFile,
		"--use-service-account-credentials=true", "--service-cluster-ip-range="+serviceCIDR); err != nil {
		return err
	}
	if _, err := n.run("kube-scheduler", filepath.Join(n.opts.NodeDir, "kube-scheduler"),
		"--kubeconfig="+n.Kubeconfig, "--authentication-kubeconfig="+n.Kubeconfig, "--authorization-kubeconfig="+n.Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1"); err != nil {
		return err
	}
	return n.startDNS()
}

// startDNS runs CoreDNS on the node's address as its cluster DNS: Services and pods of
// cluster.local by name, from the apiserver. Nothing else resolves: no query leaves the node.
func (n *Node) startDNS() error {
	corefile := fmt.Sprintf(`cluster.local:53 in-addr.arpa:53 ip6.arpa:53 {
    bind %s
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
    }
}
.:53 {
    bind %s
    errors
}
`, n.ip, n.Kubeconfig, n.ip)
	path := filepath.Join(n.dir, "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		return err
	}
	_, err := n.run("coredns", n.opts.CoreDNS, "-conf", path)
	return err
}

// startRuntime starts containerd with a configuration of the node's own, and imports the
// pause image.
func (n *Node) startRuntime(ctx context.Context) error {
	trap, err := n.startPullTrap()
	if err != nil {
		return err
	}
	n.trap = trap
	ctrd := filepath.Join(n.dir, "containerd")
	hostsDir := filepath.Join(ctrd, "certs.d", "_default")
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		return err
	}
	// Every registry is the trap: an image the node lacks is an error a test sees
	// (PullAttempts), never a request that leaves.
	hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", trap.url, trap.url)
	if err := os.WriteFile(filepath.Join(hostsDir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.dir, "cni"), 0o755); err != nil {
		return err
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
oom_score = 0

[grpc]
  address = %q

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  # This VM lacks CAP_SYS_RESOURCE: runc cannot raise a process's oom_score_adj.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
  enable_cdi = false

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = %q

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = %q
`, filepath.Join(ctrd, "root"), filepath.Join(ctrd, "state"), n.containerdSocket(), n.opts.PauseRef,
		filepath.Join(n.dir, "cni"), filepath.Join(ctrd, "certs.d"))
	configFile := filepath.Join(ctrd, "config.toml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	if _, err := n.run("containerd", "containerd", "--config", configFile); err != nil {
		return err
	}
	if err := poll(ctx, time.Minute, func() (bool, error) {
		if err := n.waitExited(); err != nil {
			return false, err
		}
		_, err := n.Exec(ctx, "ctr", "--address", n.containerdSocket(), "version")
		return err == nil, nil
	}); err != nil {
		return fmt.Errorf("containerd not answering: %w%s", err, n.logTails("containerd"))
	}
	if n.opts.PauseImage == "" || n.opts.PauseRef == "" {
		return fmt.Errorf("no pause image given (make images builds bin/images/pause.tar)")
	}
	return n.Import(ctx, n.opts.PauseImage)
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.dir, "containerd", "containerd.sock")
}

// ContainerdSocket is the node's containerd's socket (for ctr, with Exec).
func (n *Node) ContainerdSocket() string { return n.containerdSocket() }

// Import loads an image tar (an OCI image layout in a tar, as make images writes) into the
// node's containerd, for Kubernetes (namespace k8s.io), under its name, and under its name and
// digest too: containerd 1.6's CRI finds an image referenced by digest only by such a name,
// and would try to pull it otherwise.
func (n *Node) Import(ctx context.Context, tarPath string) error {
	out, err := n.Exec(ctx, "ctr", "--address", n.containerdSocket(), "-n", "k8s.io", "images", "import", "--all-platforms", tarPath)
	if err != nil {
		return fmt.Errorf("importing %s: %w", tarPath, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		m := unpacked.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, digest := m[1], m[2]
		if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
			byDigest := name[:i] + "@" + digest
			if _, err := n.Exec(ctx, "ctr", "--address", n.containerdSocket(), "-n", "k8s.io", "images", "tag", "--force", name, byDigest); err != nil {
				return err
			}
		}
		n.logf("imported %s (%s)", name, digest)
	}
	return nil
}

// unpacked is ctr's line for an imported image: "unpacking NAME (sha256:DIGEST)...done".
var unpacked = regexp.MustCompile(`^unpacking (\S+) \((sha256:[0-9a-f]{64})\)`)

// startKubelet writes the CNI configuration and starts the kubelet and kube-proxy.
func (n *Node) startKubelet(ctx context.Context) error {
	cni := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "ironfleet-node",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}],
              "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, podCIDR, filepath.Join(n.dir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "10-ironfleet-node.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	kubeletDir := filepath.Join(n.dir, "kubelet")
	if err := os.MkdirAll(kubeletDir, 0o755); err != nil {
		return err
	}
	// Pods resolve through the cluster DNS (startDNS); a pod of "Default" DNS policy gets an
	// empty resolv.conf rather than the host's.
	resolv := filepath.Join(n.dir, "resolv.conf")
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		return err
	}
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: /%s/pods
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: %s
clusterDNS: [%s]
clusterDomain: cluster.local
podLogsDir: %s
address: %s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
serializeImagePulls: false
localStorageCapacityIsolation: false
`, cgroupName(), n.containerdSocket(), resolv, n.ip, filepath.Join(n.dir, "pod-logs"), n.ip,
		n.pki.kubelet.certFile, n.pki.kubelet.keyFile, n.pki.caFile)
	configFile := filepath.Join(kubeletDir, "config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	if _, err := n.run("kubelet", filepath.Join(n.opts.NodeDir, "kubelet"),
		"--config="+configFile, "--kubeconfig="+n.Kubeconfig, "--root-dir="+kubeletDir,
		"--hostname-override="+Name, "--node-ip="+n.ip.String(), "--cert-dir="+filepath.Join(kubeletDir, "pki")); err != nil {
		return err
	}
	proxy := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: 10.244.0.0/16
bindAddress: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# The conntrack table's size is the host's, not the namespace's: leave it alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, n.Kubeconfig, Name, n.ip)
	proxyFile := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyFile, []byte(proxy), 0o644); err != nil {
		return err
	}
	_, err := n.run("kube-proxy", filepath.Join(n.opts.NodeDir, "kube-proxy"), "--config="+proxyFile)
	return err
}

// pullTrap is where every registry the node's containerd could pull from points: it answers
// nothing and records who asked for what.
type pullTrap struct {
	url string
	srv *http.Server
	mu  sync.Mutex
	got []string
}

func (n *Node) startPullTrap() (*pullTrap, error) {
	ln, err := n.Listen(0)
	if err != nil {
		return nil, err
	}
	t := &pullTrap{url: "http://" + ln.Addr().String()}
	t.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.mu.Lock()
		t.got = append(t.got, r.Method+" "+r.URL.String())
		t.mu.Unlock()
		http.Error(w, "images are imported on this node, never pulled", http.StatusForbidden)
	})}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *pullTrap) close() { _ = t.srv.Close() }

// PullAttempts are the registry requests the node's containerd made: an image a pod named
// that was not imported. A test that sees any fails.
func (n *Node) PullAttempts() []string {
	if n.trap == nil {
		return nil
	}
	n.trap.mu.Lock()
	defer n.trap.mu.Unlock()
	return append([]string(nil), n.trap.got...)
}
