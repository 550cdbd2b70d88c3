package boot_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// shippedRBAC is config/boot-namespace/role.yaml (generated from this package's markers): the
// ClusterRole's rules and the Role's, with the Role's namespace.
func shippedRBAC(t *testing.T) (cluster []rbacv1.PolicyRule, ns string, rules []rbacv1.PolicyRule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "boot-namespace", "role.yaml"))
	require.NoError(t, err)
	objs, err := testenv.DecodeObjects(data)
	require.NoError(t, err)
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var cr rbacv1.ClusterRole
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &cr))
			cluster = cr.Rules
		case "Role":
			var r rbacv1.Role
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &r))
			ns, rules = r.Namespace, r.Rules
		}
	}
	require.NotEmpty(t, cluster)
	require.NotEmpty(t, rules)
	return cluster, ns, rules
}

// The boot service, run as the binary runs it (its cache on its namespace, the URL key in a
// Secret) with exactly its shipped RBAC, serves a PXE and a virtual-media boot, publishes the
// ISO's URL and writes it back when changed, and serves a firmware image, without one refused
// request.
func TestShippedRBACServesVirtualMedia(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cluster, ns, rules := shippedRBAC(t)
	err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	refused := &testenv.Refusals{}
	cfg, err := env.UserWith(ctx, testenv.Grant{User: "ironfleet-boot-service-rbac-test", ClusterRules: cluster, Namespace: ns, Rules: rules}, refused)
	require.NoError(t, err)

	direct, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	key, err := boot.LoadOrCreateURLKey(ctx, direct, client.ObjectKey{Namespace: ns, Name: "ironfleet-boot-url-key"})
	require.NoError(t, err)
	bc := testConfig(ns, nil)
	bc.URLKey, bc.Name = key, "boot-service-rbac"
	s, err := boot.New(bc)
	require.NoError(t, err)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme,
		Cache:      cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultTransform: cache.TransformStripManagedFields()},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: ctrlconfig.Controller{SkipNameValidation: ptr.To(true)}})
	require.NoError(t, err)
	require.NoError(t, s.SetupWithManager(mgr))
	go func() { _ = mgr.Start(ctx) }()
	require.True(t, mgr.GetCache().WaitForCacheSync(ctx))

	createServer(t, "rbac-1", nil, "52:54:00:ee:00:01")
	createSecret(t, ns, "rbac-1-ignition", ignitionJSON)
	pxe := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac-1-cleanup"},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{ServerRef: metalv1alpha1.LocalObjectReference{Name: "rbac-1"},
			Purpose: metalv1alpha1.BootPurposeCleanup, Image: "metalprobe:test",
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: "rbac-1-ignition"}}}
	vm := pxe.DeepCopy()
	vm.Name, vm.Spec.Purpose, vm.Spec.BootMethod = "rbac-1-discovery", metalv1alpha1.BootPurposeDiscovery, metalv1alpha1.BootMethodVirtualMedia
	for _, sbc := range []*metalv1alpha1.ServerBootConfiguration{pxe, vm} {
		require.NoError(t, k8s.Create(ctx, sbc))
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), sbc) })
		waitFor(t, ns, sbc.Name, metalv1alpha1.BootConfigurationStateReady, metalv1alpha1.ReasonBootReady)
	}

	media := client.ObjectKey{Namespace: ns, Name: "rbac-1-discovery-boot-media"}
	var sec corev1.Secret
	require.NoError(t, k8s.Get(ctx, media, &sec))
	isoURL := string(sec.Data[boot.MediaURLKey])
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	at, _ := isoAt(t, srv.URL, isoURL)
	resp, iso := fetch(t, http.MethodGet, at, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Len(t, iso, isoSize)

	// Changed: updated back.
	sec.Data[boot.MediaURLKey] = []byte("http://elsewhere/x.iso")
	require.NoError(t, k8s.Update(ctx, &sec))
	require.Eventually(t, func() bool {
		var now corev1.Secret
		return k8s.Get(ctx, media, &now) == nil && string(now.Data[boot.MediaURLKey]) == isoURL
	}, wait, poll)

	// A firmware image asked of it: served-url written into the Secret, the image served.
	o := newOrigin(t, false)
	image := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rbac-1-firmware",
		Labels: map[string]string{metalv1alpha1.LabelFirmwareImage: "true"}}, StringData: imageData(o, o.checksum())}
	require.NoError(t, k8s.Create(ctx, image))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), image) })
	fw, _ := firmwareAt(t, srv.URL, servedURL(t, ns, image.Name))
	resp, body := fetch(t, http.MethodGet, fw, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, o.image, body)
	assert.Empty(t, refused.List(), "requests the shipped RBAC refused")
}
