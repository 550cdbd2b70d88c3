package boot_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// The suite runs the boot service against a real kube-apiserver and etcd. Two services run:
// one for every server of namespace nsAll, and one, with a server filter, for nsFiltered.
var (
	env       *testenv.Env
	k8s       client.Client
	svc       *boot.Service
	probeDir  string
	ipxeDir   string
	publicURL = "http://10.20.0.1:8080"
	// mediaURL is where the BMCs reach the service: another network than the hosts'.
	mediaURL = "http://192.0.2.10:9090"
	// isoTemplate is the fake template ISO in probeDir (bootmedia.ISOFile): random bytes with a
	// zero-filled embed area of isoEmbedSize at isoEmbedOffset.
	isoTemplate []byte
	// svcFiltered serves nsFiltered, with a server filter.
	svcFiltered *boot.Service
	// firmwareDir holds each service's firmware cache directory, by namespace.
	firmwareDir string
)

const (
	isoSize         = 256 << 10
	isoEmbedOffset  = 64<<10 + 2048
	isoEmbedSize    = 32 << 10
	nsAll           = "boot-all"
	nsFiltered      = "boot-filtered"
	filterLabel     = "boot.ironfleet.dev/test-service"
	recheckInterval = 200 * time.Millisecond
	wait            = 20 * time.Second
	poll            = 20 * time.Millisecond
)

var ignitionJSON = []byte(`{"registryURL":"https://registry.test","token":"probe-secret-token","systemUUID":"x","mode":"discovery"}`)

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	var err error
	if env, err = testenv.Start(); err != nil {
		return 0, err
	}
	defer func() { _ = env.Stop() }()
	k8s = env.Client
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))

	dir, err := os.MkdirTemp("", "boot-test-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	probeDir, ipxeDir, firmwareDir = filepath.Join(dir, "probe"), filepath.Join(dir, "ipxe"), filepath.Join(dir, "firmware")
	files := map[string]string{
		filepath.Join(probeDir, boot.ArtifactKernel):    "kernel bytes",
		filepath.Join(probeDir, boot.ArtifactInitramfs): "initramfs bytes",
	}
	for _, b := range boot.IPXEBinaries {
		files[filepath.Join(ipxeDir, b)] = "ipxe binary " + b
	}
	for path, content := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return 0, err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return 0, err
		}
	}

	if isoTemplate, err = writeTemplate(probeDir); err != nil {
		return 0, err
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{nsAll, nsFiltered} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 0, err
		}
	}
	svc, err = startService(ctx, testConfig(nsAll, nil))
	if err != nil {
		return 0, err
	}
	if svcFiltered, err = startService(ctx, testConfig(nsFiltered, func(s *metalv1alpha1.Server) bool { return s.Labels[filterLabel] == "ours" })); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

func testConfig(ns string, filter func(*metalv1alpha1.Server) bool) boot.Config {
	return boot.Config{
		Mode: dhcp.ModeFull, ServerIP: netip.MustParseAddr("10.20.0.1"), PublicURL: publicURL,
		DHCPRangeStart: netip.MustParseAddr("10.20.0.100"), DHCPRangeEnd: netip.MustParseAddr("10.20.0.199"),
		SubnetMask: netip.MustParseAddr("255.255.255.0"),
		ProbeDir:   probeDir, IPXEDir: ipxeDir, MediaURL: mediaURL,
		URLKey:       []byte("0123456789abcdef0123456789abcdef"),
		ServerFilter: filter, Namespace: ns, RecheckInterval: recheckInterval,
		Name: "boot-service-" + ns, FirmwareCacheDir: filepath.Join(firmwareDir, ns),
	}
}

// writeTemplate writes a fake template ISO and its manifest into dir, as make probe-image
// does; bootmedia.LoadTemplate checks its size, SHA256 and zeroed embed area.
func writeTemplate(dir string) ([]byte, error) {
	iso := make([]byte, isoSize)
	if _, err := rand.Read(iso); err != nil {
		return nil, err
	}
	clear(iso[isoEmbedOffset : isoEmbedOffset+isoEmbedSize])
	sum := sha256.Sum256(iso)
	manifest, err := json.Marshal(bootmedia.Manifest{Size: isoSize, SHA256: hex.EncodeToString(sum[:]),
		EmbedOffset: isoEmbedOffset, EmbedSize: isoEmbedSize})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, bootmedia.ISOFile), iso, 0o644); err != nil {
		return nil, err
	}
	return iso, os.WriteFile(filepath.Join(dir, bootmedia.ManifestFile), manifest, 0o644)
}

// startService runs a service in a manager of its own, as the binary does.
func startService(ctx context.Context, cfg boot.Config) (*boot.Service, error) {
	s, err := boot.New(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme,
		NewClient:  countingStatusWrites,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return nil, err
	}
	if err := s.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("cache did not sync")
	}
	return s, nil
}

// statusWrites counts the status writes the services send, by object name: the API server
// drops a patch that changes nothing without a trace, so only the client can tell. updates
// counts the updates the API server took from them, by kind and object name.
var statusWrites = struct {
	sync.Mutex
	byName  map[string]int
	updates map[string]int
}{byName: map[string]int{}, updates: map[string]int{}}

func countingStatusWrites(cfg *rest.Config, opts client.Options) (client.Client, error) {
	c, err := client.NewWithWatch(cfg, opts)
	if err != nil {
		return nil, err
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			// Counted when the API server took it.
			if err := c.Update(ctx, obj, opts...); err != nil {
				return err
			}
			statusWrites.Lock()
			statusWrites.updates[fmt.Sprintf("%T %s/%s", obj, obj.GetNamespace(), obj.GetName())]++
			statusWrites.Unlock()
			return nil
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			// Counted before it is sent, so that a test that sees the write in the API server
			// sees it counted; taken back if the API server refused it (a conflict).
			key := obj.GetNamespace() + "/" + obj.GetName()
			statusWrites.Lock()
			statusWrites.byName[key]++
			statusWrites.Unlock()
			err := c.SubResource(sub).Patch(ctx, obj, patch, opts...)
			if err != nil {
				statusWrites.Lock()
				statusWrites.byName[key]--
				statusWrites.Unlock()
			}
			return err
		},
	}), nil
}

// secretUpdatesOf is how many updates of Secret ns/name the services sent.
func secretUpdatesOf(ns, name string) int {
	statusWrites.Lock()
	defer statusWrites.Unlock()
	return statusWrites.updates[fmt.Sprintf("%T %s/%s", &corev1.Secret{}, ns, name)]
}

func statusWritesOf(ns, name string) int {
	statusWrites.Lock()
	defer statusWrites.Unlock()
	return statusWrites.byName[ns+"/"+name]
}

// Objects.

func createServer(t *testing.T, name string, labels map[string]string, macs ...string) *metalv1alpha1.Server {
	t.Helper()
	ctx := context.Background()
	s := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: metalv1alpha1.ServerSpec{SystemUUID: uuidOf(name)}}
	require.NoError(t, k8s.Create(ctx, s))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), s) })
	if len(macs) > 0 {
		setMACs(t, name, macs...)
	}
	return s
}

// uuidOf is a stable, non-placeholder UUID for a test server name.
func uuidOf(name string) string {
	var sum uint32
	for _, c := range name {
		sum = sum*31 + uint32(c)
	}
	return fmt.Sprintf("%08x-1111-2222-3333-444455556666", sum)
}

func setMACs(t *testing.T, server string, macs ...string) {
	t.Helper()
	var s metalv1alpha1.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: server}, &s))
	inv := &metalv1alpha1.Inventory{}
	for i, mac := range macs {
		inv.NetworkInterfaces = append(inv.NetworkInterfaces, metalv1alpha1.NetworkInterface{Name: fmt.Sprintf("eth%d", i), MACAddress: mac})
	}
	s.Status.Inventory = inv
	require.NoError(t, k8s.Status().Update(context.Background(), &s))
}

func createSecret(t *testing.T, ns, name string, data []byte) {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if data != nil {
		sec.Data = map[string][]byte{ignition.SecretKey: data}
	}
	require.NoError(t, k8s.Create(context.Background(), sec))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), sec) })
}

func createSBC(t *testing.T, ns, name, server string, purpose metalv1alpha1.BootPurpose, secret string) *metalv1alpha1.ServerBootConfiguration {
	t.Helper()
	sbc := &metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Annotations: map[string]string{metalv1alpha1.AnnotationProbeBoot: "boot-" + name}},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef: metalv1alpha1.LocalObjectReference{Name: server}, Purpose: purpose, Image: "metalprobe:test"},
	}
	if secret != "" {
		sbc.Spec.IgnitionSecretRef = &metalv1alpha1.LocalObjectReference{Name: secret}
	}
	require.NoError(t, k8s.Create(context.Background(), sbc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), sbc) })
	return sbc
}

func getSBC(t *testing.T, ns, name string) *metalv1alpha1.ServerBootConfiguration {
	t.Helper()
	var sbc metalv1alpha1.ServerBootConfiguration
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sbc))
	return &sbc
}

// waitFor polls the boot configuration until its state and Ready reason are as wanted, and
// returns its Ready condition.
func waitFor(t *testing.T, ns, name string, state metalv1alpha1.BootConfigurationState, reason string) *metav1.Condition {
	t.Helper()
	var last metalv1alpha1.ServerBootConfiguration
	var ready *metav1.Condition
	if !assert.Eventually(t, func() bool {
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &last); err != nil {
			return false
		}
		ready = meta.FindStatusCondition(last.Status.Conditions, metalv1alpha1.ConditionReady)
		return ready != nil && last.Status.State == state && ready.Reason == reason
	}, wait, poll) {
		t.Fatalf("boot configuration %s/%s: want state %s reason %s, have state %q conditions %+v", ns, name, state, reason, last.Status.State, last.Status.Conditions)
	}
	return ready
}
