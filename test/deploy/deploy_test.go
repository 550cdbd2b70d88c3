// Package deploy checks that the shipped manifests are what a real apiserver accepts.
package deploy

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/test/testenv"
)

// kustomize finds the pinned kustomize the Makefile builds ($KUSTOMIZE, else the tools cache's
// kustomize-*).
func kustomize(t *testing.T, root string) string {
	t.Helper()
	if k := os.Getenv("KUSTOMIZE"); k != "" {
		return k
	}
	found, _ := filepath.Glob(filepath.Join(testenv.ToolsDir(), "kustomize-*"))
	if len(found) == 0 {
		t.Fatal("kustomize is not built: run `make test` (it builds kustomize-<version> into the tools cache)")
	}
	sort.Strings(found)
	return found[len(found)-1]
}

// build renders a kustomization into objects.
func build(t *testing.T, root, dir string) []*unstructured.Unstructured {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(kustomize(t, root), "build", filepath.Join(root, dir))
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Run(), errOut.String())
	objs, err := testenv.DecodeObjects(out.Bytes())
	require.NoError(t, err)
	return objs
}

// TestDefaultManifestsAreAccepted applies `kustomize build config/default` to a real apiserver
// with server-side dry-run: every object must pass the apiserver's validation.
func TestDefaultManifestsAreAccepted(t *testing.T) {
	env, err := testenv.Start()
	require.NoError(t, err)
	defer func() { _ = env.Stop() }()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	ctx := context.Background()

	objs := build(t, root, "config/default")
	kinds := map[string]int{}
	for _, obj := range objs {
		kinds[obj.GetKind()]++
	}
	assert.Equal(t, 9, kinds["CustomResourceDefinition"])
	for _, kind := range []string{"Namespace", "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service", "Secret"} {
		assert.Positive(t, kinds[kind], "the manifests include a %s", kind)
	}

	// The namespace exists for real, so namespaced objects can be dry-run into it.
	for _, obj := range objs {
		if obj.GetKind() == "Namespace" {
			require.NoError(t, env.Client.Create(ctx, obj.DeepCopy()))
		}
	}
	for _, obj := range objs {
		t.Run(fmt.Sprintf("%s/%s", obj.GetKind(), obj.GetName()), func(t *testing.T) {
			obj := obj.DeepCopy()
			err := env.Client.Patch(ctx, obj, client.Apply, client.DryRunAll, client.FieldOwner("ironfleet-deploy-test"), client.ForceOwnership)
			assert.NoError(t, err)
		})
	}
}

// TestSamplesBuild keeps config/samples a valid kustomization.
func TestSamplesBuild(t *testing.T) {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	assert.Len(t, build(t, root, "config/samples"), 8, "one sample per kind people make (ServerFirmwares are the operator's)")
}
