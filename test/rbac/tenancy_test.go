package rbac

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// The tenancy model (docs/tenancy.md): a tenant is a namespace; its people hold the shipped
// roles through RoleBindings there. An editor claims servers and approves maintenance on its
// own claims; a viewer reads its namespace's claims, boot configurations and maintenances.
// Servers, BMCs, their credentials, Endpoints and Ironfleet's own Secrets (probe ignitions,
// registry keys) are cluster-scoped or in the system and boot namespaces: no tenant role
// reaches them. Maintenance is an admin act.
const (
	tenantA, tenantB = "tenant-a", "tenant-b"
	systemNS         = "ironfleet-system"
	cluster          = "" // the scope of cluster-scoped kinds
)

// kind is one kind the table tries, with a valid object of it for fixtures.
type kind struct {
	name       string
	namespaced bool
	object     func(name, namespace string) client.Object
	list       client.ObjectList
	status     bool // has a status subresource
}

var kinds = []kind{
	{name: "endpoints", object: func(n, _ string) client.Object {
		return &m.Endpoint{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.EndpointSpec{MACAddress: "3c:ec:ef:01:02:03", IP: "10.0.0.5"}}
	}, list: &m.EndpointList{}, status: true},
	{name: "bmcs", object: func(n, _ string) client.Object {
		return &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.BMCSpec{
			Access: &m.BMCAccess{Address: "redfish+https://10.0.0.5/redfish/v1"}, BMCSecretRef: m.LocalObjectReference{Name: n}}}
	}, list: &m.BMCList{}, status: true},
	{name: "bmcsecrets", object: func(n, _ string) client.Object {
		return &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.BMCSecretSpec{Username: "root", Password: "calvin-" + n}}
	}, list: &m.BMCSecretList{}},
	{name: "servers", object: func(n, _ string) client.Object {
		return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.ServerSpec{SystemUUID: "38947555-7742-3448-3784-823347823834"}}
	}, list: &m.ServerList{}, status: true},
	{name: "serverclaims", namespaced: true, object: func(n, ns string) client.Object {
		return &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: m.ServerClaimSpec{Power: m.PowerOn}}
	}, list: &m.ServerClaimList{}, status: true},
	{name: "serverbootconfigurations", namespaced: true, object: func(n, ns string) client.Object {
		return &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: m.ServerBootConfigurationSpec{
			ServerRef: m.LocalObjectReference{Name: "some-server"}, Image: "metalprobe:latest", Purpose: m.BootPurposeDiscovery}}
	}, list: &m.ServerBootConfigurationList{}, status: true},
	{name: "servermaintenances", namespaced: true, object: func(n, ns string) client.Object {
		return &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Spec: m.ServerMaintenanceSpec{
			ServerRef: m.LocalObjectReference{Name: "another-tenants-server"}, Reason: "take it", Policy: m.MaintenanceEnforced}}
	}, list: &m.ServerMaintenanceList{}, status: true},
	{name: "serverfirmwares", object: func(n, _ string) client.Object {
		return &m.ServerFirmware{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.ServerFirmwareSpec{ServerRef: m.LocalObjectReference{Name: n}}}
	}, list: &m.ServerFirmwareList{}, status: true},
	{name: "firmwarebaselines", object: func(n, _ string) client.Object {
		return &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: n}, Spec: m.FirmwareBaselineSpec{
			Components: []m.BaselineComponent{{Component: "BIOS", Version: "2.0", Image: m.FirmwareImage{URL: "https://fw.example/bios.bin"}}}}}
	}, list: &m.FirmwareBaselineList{}, status: true},
	{name: "secrets", namespaced: true, object: func(n, ns string) client.Object {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: ns}, Data: map[string][]byte{"ignition.json": []byte("{}")}}
	}, list: &corev1.SecretList{}},
}

var verbs = []string{"get", "list", "watch", "create", "update", "patch", "delete", "update status"}

// scopes are where a kind's objects are tried: every namespaced kind in both tenants' namespaces
// and the system and boot namespaces, every cluster-scoped kind at the cluster.
func scopes(k kind) []string {
	if k.namespaced {
		return []string{tenantA, tenantB, systemNS, bootNS}
	}
	return []string{cluster}
}

// user is one person and what the tenancy model lets them do.
type user struct {
	name    string
	allowed func(k kind, scope, verb string) bool
}

func reads(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

var users = []user{
	{name: "admin", allowed: func(kind, string, string) bool { return true }},
	// An editor of tenant A: its claims, every verb but their status; its boot configurations
	// and maintenances, to read. Nothing of tenant B, nothing cluster-scoped, no Secret (the
	// shipped role grants none; a namespace's own Secrets come from Kubernetes' edit role).
	{name: "editor-of-a", allowed: func(k kind, scope, verb string) bool {
		if scope != tenantA {
			return false
		}
		switch k.name {
		case "serverclaims":
			return verb != "update status"
		case "serverbootconfigurations", "servermaintenances":
			return reads(verb)
		}
		return false
	}},
	// A viewer of tenant A: its claims, boot configurations and maintenances, to read.
	{name: "viewer-of-a", allowed: func(k kind, scope, verb string) bool {
		return scope == tenantA && reads(verb) &&
			(k.name == "serverclaims" || k.name == "serverbootconfigurations" || k.name == "servermaintenances")
	}},
}

// TestTenantsAreFencedOff: users holding each shipped role (and an admin) try every verb on
// every kind in both tenants' namespaces, the system namespace and at the cluster, through the
// real apiserver with impersonation. Mutations are dry runs: authorization is decided the same
// way, and the fixtures stay as they are for the next try.
func TestTenantsAreFencedOff(t *testing.T) {
	ctx := context.Background()
	env, err := testenv.Start()
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	admin := env.Client

	for _, ns := range []string{tenantA, tenantB, systemNS, bootNS} {
		require.NoError(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	// The shipped roles, as config/rbac has them, bound in tenant A.
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	for role, who := range map[string]string{"metal_editor_role.yaml": "editor-of-a", "metal_viewer_role.yaml": "viewer-of-a"} {
		data, err := os.ReadFile(filepath.Join(root, "config", "rbac", role))
		require.NoError(t, err)
		var cr rbacv1.ClusterRole
		require.NoError(t, yaml.UnmarshalStrict(data, &cr))
		require.NoError(t, admin.Create(ctx, &cr))
		require.NoError(t, admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: tenantA, Name: who},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: cr.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: who}}}))
	}
	require.NoError(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "admin"}}}))

	// One fixture per kind and scope, made by the test's own (unimpersonated) client.
	for _, k := range kinds {
		for _, scope := range scopes(k) {
			require.NoError(t, admin.Create(ctx, k.object("fixture", scope)), "%s in %q", k.name, scope)
		}
	}

	tried, refusedAsWanted := 0, 0
	for _, u := range users {
		cfg := rest.CopyConfig(env.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: u.name}
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: env.Scheme})
		require.NoError(t, err)
		for _, k := range kinds {
			for _, scope := range scopes(k) {
				for _, verb := range verbs {
					if verb == "update status" && !k.status {
						continue
					}
					err := try(ctx, c, admin, k, scope, verb)
					want := u.allowed(k, scope, verb)
					where := scope
					if where == cluster {
						where = "the cluster"
					}
					tried++
					if apierrors.IsForbidden(err) {
						if !want {
							refusedAsWanted++
						}
						assert.False(t, want, "%s may %s %s in %s, but was refused: %v", u.name, verb, k.name, where, err)
						continue
					}
					assert.True(t, want, "%s must not %s %s in %s, but was let through (%v)", u.name, verb, k.name, where, err)
					assert.NoError(t, err, "%s %s %s in %s", u.name, verb, k.name, where)
				}
			}
		}
	}
	t.Logf("%d tries, %d refused as the model says", tried, refusedAsWanted)
}

// try does verb on the kind's fixture in scope (dry runs for changes) and returns the
// apiserver's answer.
func try(ctx context.Context, c client.WithWatch, admin client.Client, k kind, scope, verb string) error {
	fixture := k.object("fixture", scope)
	key := client.ObjectKeyFromObject(fixture)
	dry := client.DryRunAll
	switch verb {
	case "get":
		return c.Get(ctx, key, fixture)
	case "list":
		return c.List(ctx, k.list, client.InNamespace(scope))
	case "watch":
		w, err := c.Watch(ctx, k.list, client.InNamespace(scope))
		if err == nil {
			w.Stop()
		}
		return err
	case "create":
		return c.Create(ctx, k.object("new", scope), dry)
	case "delete":
		return c.Delete(ctx, fixture, client.DryRunAll)
	}
	// update, patch, update status: the fixture as it is now, with a label.
	if err := admin.Get(ctx, key, fixture); err != nil {
		return fmt.Errorf("reading the fixture: %w", err)
	}
	before := fixture.DeepCopyObject().(client.Object)
	fixture.SetLabels(map[string]string{"tried-by": strings.ReplaceAll(verb, " ", "-")})
	switch verb {
	case "update":
		return c.Update(ctx, fixture, dry)
	case "patch":
		return c.Patch(ctx, fixture, client.MergeFrom(before), dry)
	default: // update status
		return c.Status().Update(ctx, fixture, client.DryRunAll)
	}
}
