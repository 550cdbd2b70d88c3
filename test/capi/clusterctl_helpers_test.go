package capi

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// requiredTool is a tool the Makefile builds and exports: the test fails without it, never skips.
func requiredTool(t *testing.T, variable, target string) string {
	t.Helper()
	path := os.Getenv(variable)
	if path == "" {
		t.Fatalf("$%s is not set: run `make test`, or `make %s` and set %s to the binary it builds (the Makefile exports it)", variable, target, variable)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("$%s=%s: %v: run `make %s`", variable, path, err, target)
	}
	return path
}

// clusterctl runs the pinned clusterctl with nothing of the user's: a home and configuration
// of the test's own, no version check (it would ask the internet), and the template's variables.
type clusterctl struct {
	bin  string
	home string
	vars map[string]string
}

func (c clusterctl) run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + c.home, "XDG_CONFIG_HOME=" + filepath.Join(c.home, ".config"),
		"XDG_CACHE_HOME=" + filepath.Join(c.home, ".cache"), "CLUSTERCTL_DISABLE_VERSIONCHECK=true"}
	for k, v := range c.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "clusterctl %s: %s", strings.Join(args, " "), errOut.String())
	return out.Bytes()
}

// repository is a clusterctl local repository of infrastructure-ironfleet as make capi-release
// writes it, and a clusterctl configuration naming it.
type repository struct {
	config, version string
	// components is infrastructure-components.yaml: `kustomize build config/capi`.
	components []byte
}

// writeRepository builds config/capi with kustomize into a repository of the Makefile's
// VERSION, beside metadata.yaml and templates/cluster-template.yaml, as make capi-release does.
func writeRepository(t *testing.T, root, kustomize string) repository {
	t.Helper()
	version := "v" + makefileVersion(t, root)
	dir := t.TempDir()
	release := filepath.Join(dir, "infrastructure-ironfleet", version)
	require.NoError(t, os.MkdirAll(release, 0o755))

	var out, errOut bytes.Buffer
	cmd := exec.Command(kustomize, "build", filepath.Join(root, "config", "capi"))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), "kustomize build config/capi: %s", errOut.String())
	components := filepath.Join(release, "infrastructure-components.yaml")
	require.NoError(t, os.WriteFile(components, out.Bytes(), 0o644))
	for _, f := range []string{"metadata.yaml", filepath.Join("templates", "cluster-template.yaml")} {
		data, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(release, filepath.Base(f)), data, 0o644))
	}
	config := filepath.Join(dir, "clusterctl.yaml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil,
		"providers:\n- name: ironfleet\n  type: InfrastructureProvider\n  url: file://%s\n", components), 0o644))
	return repository{config: config, version: version, components: out.Bytes()}
}

// makefileVersion is the Makefile's VERSION: the release make capi-release writes.
func makefileVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(data)
	require.NotNil(t, m, "the Makefile sets VERSION ?= <version>")
	return string(m[1])
}

// clusterctlMetadata is metadata.yaml.
type clusterctlMetadata struct {
	APIVersion    string `json:"apiVersion"`
	Kind          string `json:"kind"`
	ReleaseSeries []struct {
		Major    int    `json:"major"`
		Minor    int    `json:"minor"`
		Contract string `json:"contract"`
	} `json:"releaseSeries"`
}

// decodeObjects splits multi-document YAML into objects.
func decodeObjects(t *testing.T, data []byte) []*unstructured.Unstructured {
	t.Helper()
	objs, err := testenv.DecodeObjects(data)
	require.NoError(t, err)
	return objs
}

// objectsOfKind are the objects of a kind.
func objectsOfKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// findObject is the object of a kind and name, or nil.
func findObject(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// asTyped converts an object into its Go type, failing on fields the type does not have.
func asTyped[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	require.NotNil(t, u)
	out := new(T)
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true), "%s %s", u.GetKind(), u.GetName())
	return out
}

// objectIdentities are "Kind namespace/name" of each object, sorted.
func objectIdentities(objs []*unstructured.Unstructured) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, fmt.Sprintf("%s %s/%s", o.GetKind(), o.GetNamespace(), o.GetName()))
	}
	slices.Sort(out)
	return out
}

// rulesAllow says whether rules grant verb on group's resource.
func rulesAllow(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
			return true
		}
	}
	return false
}

// generatedRole is config/capi/rbac/role.yaml, what `make manifests` generates from the
// provider's markers.
func generatedRole(t *testing.T, root string) rbacv1.ClusterRole {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "config", "capi", "rbac", "role.yaml"))
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.UnmarshalStrict(data, &role))
	require.NotEmpty(t, role.Rules)
	return role
}

// providerIDArg is the kubelet flag every node of the template gets: ironfleet://<server>,
// rendered by cloud-init from the config drive's meta.server.
var providerIDArg = infrav1.ProviderIDPrefix + "{{ ds.meta_data.meta.server }}"
