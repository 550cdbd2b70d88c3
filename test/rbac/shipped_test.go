package rbac

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/test/testenv"
)

// What config/default installs, by name: the manager's namespace and its Secrets, the boot
// namespace, and the boot service's ServiceAccount.
const (
	bootNS          = "ironfleet-boot"
	registrySecret  = "ironfleet-registry-credentials" // config/manager: --registry-secret
	macDBSecret     = "ironfleet-mac-prefixes"
	bootServiceUser = "system:serviceaccount:" + systemNS + ":ironfleet-boot-service"
)

// shipped is `kustomize build config/default`, applied to a fresh apiserver: its namespaces and
// RBAC created for real (the Deployments and Services are not needed to authorize), and the
// objects of the other kinds returned by kind.
func shipped(t *testing.T, ctx context.Context, env *testenv.Env) map[string][]*unstructured.Unstructured {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	found, _ := filepath.Glob(filepath.Join(testenv.ToolsDir(), "kustomize-*"))
	if k := os.Getenv("KUSTOMIZE"); k != "" {
		found = []string{k}
	}
	require.NotEmpty(t, found, "kustomize is not built: run `make test` (it builds kustomize-<version> into the tools cache)")
	sort.Strings(found)
	var out, errOut bytes.Buffer
	cmd := exec.Command(found[len(found)-1], "build", filepath.Join(root, "config", "default"))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	objs, err := testenv.DecodeObjects(out.Bytes())
	require.NoError(t, err)

	byKind := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	for _, kind := range []string{"Namespace", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
		for _, o := range byKind[kind] {
			require.NoError(t, env.Client.Create(ctx, o.DeepCopy()), "%s %s", kind, o.GetName())
		}
	}
	return byKind
}

// impersonating is a client acting as user, with a ServiceAccount's groups when it is one.
func impersonating(t *testing.T, env *testenv.Env, user string, groups ...string) client.WithWatch {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
	require.NoError(t, err)
	return c
}

// readsSecret tries get of the Secret at key, and list and watch of the Secrets of its namespace (of
// the cluster when it has none); it returns the answer of each.
func readsSecret(ctx context.Context, c client.WithWatch, key client.ObjectKey) map[string]error {
	opts := []client.ListOption{}
	if key.Namespace != "" {
		opts = append(opts, client.InNamespace(key.Namespace))
	}
	answers := map[string]error{}
	if key.Name != "" {
		answers["get"] = c.Get(ctx, key, &corev1.Secret{})
	}
	answers["list"] = c.List(ctx, &corev1.SecretList{}, opts...)
	w, err := c.Watch(ctx, &corev1.SecretList{}, opts...)
	if err == nil {
		w.Stop()
	}
	answers["watch"] = err
	return answers
}

// TestBootServiceReadsOnlyTheBoots: the boot service, holding exactly the RBAC config/default
// ships, bound to its ServiceAccount as the manifests bind it, cannot read the registry's keys,
// the BMC credentials, any other Secret of the manager's namespace, a tenant's Secrets, or the
// cluster's; it reads the boots' Secrets. (That it serves a boot under this RBAC, reading
// only these, is internal/boot's TestShippedRBACServesVirtualMedia.)
func TestBootServiceReadsOnlyTheBoots(t *testing.T) {
	ctx := context.Background()
	env, err := testenv.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	objs := shipped(t, ctx, env)
	require.NoError(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantA}}))

	// The Secrets of a running install: the registry's keys (the manager makes them), the BMC
	// credentials (shipped), one the site keeps there; a probe boot's ignition and the URL key
	// in the boot namespace; a tenant's user data.
	secret := func(ns, name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{"k": []byte("v")}}
	}
	fixtures := []*corev1.Secret{secret(systemNS, registrySecret), secret(systemNS, "site-secret"),
		secret(bootNS, "server-1-discovery-ignition"), secret(bootNS, "ironfleet-boot-url-key"), secret(tenantA, "user-data")}
	for _, o := range objs["Secret"] {
		require.Equal(t, macDBSecret, o.GetName(), "the only Secret shipped is the MAC-prefix database")
		require.NoError(t, env.Client.Create(ctx, o.DeepCopy()))
	}
	for _, s := range fixtures {
		require.NoError(t, env.Client.Create(ctx, s))
	}

	c := impersonating(t, env, bootServiceUser, "system:serviceaccounts", "system:serviceaccounts:"+systemNS)
	refused := []client.ObjectKey{
		{Namespace: systemNS, Name: registrySecret}, {Namespace: systemNS, Name: macDBSecret},
		{Namespace: systemNS, Name: "site-secret"}, {Namespace: tenantA, Name: "user-data"},
		{}, // every Secret of the cluster
	}
	for _, key := range refused {
		for verb, err := range readsSecret(ctx, c, key) {
			assert.True(t, apierrors.IsForbidden(err), "the boot service must not %s Secret %q, but was answered %v", verb, key, err)
		}
	}
	for _, key := range []client.ObjectKey{{Namespace: bootNS, Name: "server-1-discovery-ignition"}, {Namespace: bootNS, Name: "ironfleet-boot-url-key"}} {
		for verb, err := range readsSecret(ctx, c, key) {
			assert.NoError(t, err, "the boot service must %s Secret %q", verb, key)
		}
	}
	// It makes its URL key and the boot media Secrets there; nowhere else.
	assert.NoError(t, c.Create(ctx, secret(bootNS, "new"), client.DryRunAll))
	err = c.Create(ctx, secret(systemNS, "new"), client.DryRunAll)
	assert.True(t, apierrors.IsForbidden(err), "the boot service must not create Secrets in %s: %v", systemNS, err)
}

// TestDefaultCredentialsAreNotForViewers: the MAC-prefix database, which holds the BMCs'
// default passwords, ships as a Secret, and neither Kubernetes' view role nor Ironfleet's
// viewer and editor roles (which aggregate into view and edit) bound in the manager's
// namespace let anyone read it. The ConfigMap it was before is what view does read. (view's
// rules are system:aggregate-to-view's, which kube-controller-manager copies into it; none
// runs here. Kubernetes' edit reads Secrets: bind it in no Ironfleet namespace.)
func TestDefaultCredentialsAreNotForViewers(t *testing.T) {
	ctx := context.Background()
	env, err := testenv.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	objs := shipped(t, ctx, env)
	require.Empty(t, objs["ConfigMap"], "nothing ships as a ConfigMap: view reads them all")
	require.Len(t, objs["Secret"], 1)
	require.Equal(t, macDBSecret, objs["Secret"][0].GetName())
	require.NoError(t, env.Client.Create(ctx, objs["Secret"][0].DeepCopy()))
	old := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: macDBSecret}, Data: map[string]string{"mac-prefixes.yaml": "macPrefixes: []"}}
	require.NoError(t, env.Client.Create(ctx, old))

	for user, role := range map[string]string{"viewer": "system:aggregate-to-view", "metal-viewer": "ironfleet-metal-viewer-role", "metal-editor": "ironfleet-metal-editor-role"} {
		require.NoError(t, env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: user},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}))
	}
	for _, user := range []string{"viewer", "metal-viewer", "metal-editor"} {
		c := impersonating(t, env, user)
		for verb, err := range readsSecret(ctx, c, client.ObjectKey{Namespace: systemNS, Name: macDBSecret}) {
			assert.True(t, apierrors.IsForbidden(err), "%s must not %s the default credentials, but was answered %v", user, verb, err)
		}
	}
	// The test can fail: view reads a ConfigMap, as it read the database when it was one.
	assert.NoError(t, impersonating(t, env, "viewer").Get(ctx, client.ObjectKeyFromObject(old), &corev1.ConfigMap{}))
}
