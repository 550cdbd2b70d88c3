package install

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ociimage"
	"github.com/ironfleet/ironfleet/test/node"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// byDigest names an image by its digest: OLM pulls an image named by a tag whenever it runs a
// pod of it, and one named by digest only when the node lacks it.
func byDigest(w ociimage.Written) string {
	name := w.Ref
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name + "@" + w.Digest
}

// olmManifests are OLM's release manifests for the pinned module, rendered from its chart with
// the values of its upstream release by the pinned helm (as OLM's release does), with the images
// this node has: OLM's own from make test-images, and the catalog image (its opm) for unpacking
// bundles; without the community catalog, which would be pulled. The CRDs come first, the rest
// after.
func olmManifests(t *testing.T, root, olmRef, catalogRef string) (crds, rest []byte) {
	t.Helper()
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/operator-framework/operator-lifecycle-manager")
	cmd.Dir = filepath.Join(root, "hack", "tools", "olm")
	out, err := cmd.Output()
	require.NoError(t, err, "the pinned OLM module (make olm-tools downloads it)")
	deploy := filepath.Join(strings.TrimSpace(string(out)), "deploy")
	helm := os.Getenv("IRONFLEET_HELM") // the Makefile's
	if helm == "" {
		found, _ := filepath.Glob(filepath.Join(testenv.ToolsDir(), "helm-*"))
		require.NotEmpty(t, found, "helm is built by make olm-tools (make test does it)")
		helm = found[len(found)-1]
	}
	var stderr bytes.Buffer
	render := exec.Command(helm, "template", "olm", filepath.Join(deploy, "chart"), "-f", filepath.Join(deploy, "upstream", "values.yaml"),
		"--include-crds", "--set", strings.Join([]string{
			"olm.image.ref=" + olmRef, "catalog.image.ref=" + olmRef, "package.image.ref=" + olmRef,
			"package.image.pullPolicy=IfNotPresent",
			"catalog.commandArgs=--configmapServerImage=" + catalogRef, "catalog.opmImageArgs=--opmImage=" + catalogRef,
		}, ","))
	render.Stderr = &stderr
	rendered, err := render.Output()
	require.NoError(t, err, stderr.String())
	var crdDocs, restDocs []string
	for _, doc := range strings.Split(string(rendered), "\n---\n") {
		switch {
		case strings.Contains(doc, "\nkind: CatalogSource"):
		case strings.Contains(doc, "\nkind: CustomResourceDefinition"):
			crdDocs = append(crdDocs, doc)
		default:
			restDocs = append(restDocs, doc)
		}
	}
	rest = []byte(strings.Join(restDocs, "\n---\n"))
	require.NotContains(t, string(rest), "quay.io", "every image is one the node has")
	require.NotContains(t, string(rest), "imagePullPolicy: Always", "nothing is pulled")
	return []byte(strings.Join(crdDocs, "\n---\n")), rest
}

func applyFile(t *testing.T, ctx context.Context, n *node.Node, data []byte, extra ...string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifests.yaml")
	require.NoError(t, os.WriteFile(file, data, 0o644))
	out, err := n.Kubectl(ctx, append([]string{"apply", "--server-side", "-f", file}, extra...)...)
	require.NoError(t, err, string(out))
}

func get(ctx context.Context, c client.Client, gvk schema.GroupVersionKind, ns, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)
}

var (
	csvGVK        = schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "ClusterServiceVersion"}
	deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

func csvPhase(ctx context.Context, c client.Client, ns, name string) string {
	u, err := get(ctx, c, csvGVK, ns, name)
	if err != nil {
		return ""
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return phase
}

func available(ctx context.Context, c client.Client, ns, name string) bool {
	u, err := get(ctx, c, deploymentGVK, ns, name)
	if err != nil {
		return false
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "status", "availableReplicas")
	return n >= 1
}

// olmNamespace is where the OLM test subscribes to Ironfleet: a namespace of the user's choice
// (not config/default's), labelled for the boot service's host networking. OLM's own
// operators namespace enforces the baseline Pod Security level, which refuses it.
const olmNamespace = "metal-system"

// TestOLMInstall: OLM from its release manifests on a real node, then Ironfleet through it as
// users install it: CatalogSource (the catalog image) → a namespace with an OperatorGroup →
// Subscription → InstallPlan → CSV Succeeded → the manager and the boot service running there
// with the bundle's RBAC, and working.
func TestOLMInstall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	n, root, imgs := startNode(t, ctx, "manager", "boot-service", "bundle", "catalog", "olm")
	c, err := client.New(n.Config, client.Options{Scheme: testenv.Scheme()})
	require.NoError(t, err)
	olmExplain := func() string {
		var b bytes.Buffer
		for _, args := range [][]string{
			{"get", "pods,jobs,deployments,catalogsources,subscriptions,installplans,csv", "-A", "-o", "wide"},
			{"get", "events", "-A", "--sort-by=.lastTimestamp"},
			{"-n", "olm", "logs", "deploy/catalog-operator", "--tail=30"},
			{"-n", "olm", "logs", "deploy/olm-operator", "--tail=30"},
		} {
			out, err := n.Kubectl(ctx, args...)
			b.WriteString("\n$ kubectl " + strings.Join(args, " ") + "\n" + string(out) + errOrEmpty(err))
		}
		return b.String()
	}

	crds, olm := olmManifests(t, root, byDigest(imgs["olm"]), byDigest(imgs["catalog"]))
	applyFile(t, ctx, n, crds)
	file := filepath.Join(t.TempDir(), "crds.yaml")
	require.NoError(t, os.WriteFile(file, crds, 0o644))
	// kubectl wait fails at once, rather than waiting, on a CRD the apiserver has not written a
	// status for yet ("<nil> is of the type <nil>"): asked again until all are Established.
	var waited []byte
	eventually(t, 2*time.Minute, func() bool {
		var err error
		waited, err = n.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "-f", file)
		return err == nil
	}, func() string { return "\n" + string(waited) }, "OLM's CRDs are Established")
	applyFile(t, ctx, n, olm)
	eventually(t, 5*time.Minute, func() bool {
		return available(ctx, c, "olm", "olm-operator") && available(ctx, c, "olm", "catalog-operator")
	}, olmExplain, "OLM's operators run")
	eventually(t, 5*time.Minute, func() bool { return csvPhase(ctx, c, "olm", "packageserver") == "Succeeded" }, olmExplain,
		"OLM's packageserver is installed")

	applyFile(t, ctx, n, catalogSource(byDigest(imgs["catalog"])))
	applyFile(t, ctx, n, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: `+olmNamespace+`
  labels:
    pod-security.kubernetes.io/enforce: privileged
---
apiVersion: operators.coreos.com/v1
kind: OperatorGroup
metadata:
  name: ironfleet
  namespace: `+olmNamespace+`
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: ironfleet
  namespace: `+olmNamespace+`
spec:
  channel: alpha
  name: ironfleet
  source: ironfleet
  sourceNamespace: olm
  installPlanApproval: Automatic
`))
	eventually(t, 8*time.Minute, func() bool { return csvPhase(ctx, c, olmNamespace, "ironfleet.v0.1.0") == "Succeeded" }, olmExplain,
		"the Subscription installs Ironfleet's CSV")
	for _, name := range []string{"ironfleet-controller-manager", "ironfleet-boot-service"} {
		eventually(t, 3*time.Minute, func() bool { return available(ctx, c, olmNamespace, name) }, olmExplain, name+" runs")
	}
	works(t, ctx, n, c, olmNamespace, explainer(ctx, n, olmNamespace))
	upgradeAndUninstall(t, ctx, n, c, root, imgs, olmExplain)
}

// upgradeAndUninstall builds a second version of the bundle, whose manager image is the same
// image under a new tag, and a catalog of both; the CatalogSource moves to that catalog and OLM
// replaces the operator, with no claim lost. Then the operator is uninstalled as OLM users do
// (Subscription and CSV deleted): the CRDs and every object stay.
func upgradeAndUninstall(t *testing.T, ctx context.Context, n *node.Node, c client.Client, root string, imgs map[string]ociimage.Written, explain func() string) {
	t.Helper()
	const next = "ironfleet.v0.1.1"
	retagged := map[string]string{} // each image of the operator, under its new tag
	for _, image := range []string{"manager", "boot-service"} {
		old := imgs[image].Ref
		now := strings.TrimSuffix(old, ":v0.1.0") + ":v0.1.1"
		require.NotEqual(t, old, now, "the %s image is tagged v0.1.0", image)
		out, err := n.Exec(ctx, "ctr", "--address", n.ContainerdSocket(), "-n", "k8s.io", "images", "tag", old, now)
		require.NoError(t, err, string(out))
		retagged[old] = now
	}

	// Bundle v0.1.1: the CSV renamed, its version and its images changed.
	dir := t.TempDir()
	for _, sub := range []string{"manifests", "metadata"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, sub), os.DirFS(filepath.Join(root, "bundle", sub))))
	}
	csvFile := filepath.Join(dir, "manifests", "ironfleet.clusterserviceversion.yaml")
	data, err := os.ReadFile(csvFile)
	require.NoError(t, err)
	csv := string(data)
	changes := map[string]string{"name: ironfleet.v0.1.0": "name: " + next, "\n  version: 0.1.0\n": "\n  version: 0.1.1\n"}
	maps.Copy(changes, retagged)
	for old, now := range changes {
		require.Contains(t, csv, old)
		csv = strings.ReplaceAll(csv, old, now)
	}
	require.NoError(t, os.WriteFile(csvFile, []byte(csv), 0o644))
	images := t.TempDir()
	build := func(spec ociimage.Spec, name string) ociimage.Written {
		img, err := ociimage.Build(spec)
		require.NoError(t, err)
		w, err := ociimage.Write(img, spec.Ref, images, name)
		require.NoError(t, err)
		require.NoError(t, n.Import(ctx, w.Archive))
		return w
	}
	bundleSpec, err := ociimage.BundleSpec(dir, "ghcr.io/ironfleet/ironfleet-bundle:v0.1.1")
	require.NoError(t, err)
	bundle2 := build(bundleSpec, "bundle")
	catalogSpec, err := ociimage.CatalogSpec(ociimage.Catalog{Ref: "ghcr.io/ironfleet/ironfleet-catalog:v0.1.1",
		Bundles: []ociimage.CatalogBundle{{Dir: filepath.Join(root, "bundle"), Ref: byDigest(imgs["bundle"])}, {Dir: dir, Ref: byDigest(bundle2)}},
		OPM:     tool(t, "opm-*"), GRPCHealthProbe: tool(t, "grpc_health_probe-*"), Dir: filepath.Join(t.TempDir(), "fbc"), User: "65532:65532"})
	require.NoError(t, err)
	catalog2 := build(catalogSpec, "catalog")

	var claim m.ServerClaim
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &claim))
	applyFile(t, ctx, n, catalogSource(byDigest(catalog2)))
	eventually(t, 8*time.Minute, func() bool { return csvPhase(ctx, c, olmNamespace, next) == "Succeeded" }, explain,
		"OLM upgrades Ironfleet to "+next)
	for name, image := range map[string]string{"ironfleet-controller-manager": "manager", "ironfleet-boot-service": "boot-service"} {
		eventually(t, 3*time.Minute, func() bool {
			var d appsv1.Deployment
			if c.Get(ctx, client.ObjectKey{Namespace: olmNamespace, Name: name}, &d) != nil {
				return false
			}
			return d.Spec.Template.Spec.Containers[0].Image == retagged[imgs[image].Ref] && d.Status.UpdatedReplicas == 1 && d.Status.AvailableReplicas == 1 &&
				csvPhase(ctx, c, olmNamespace, "ironfleet.v0.1.0") == ""
		}, explain, name+" runs the new image, and the old CSV is gone")
	}
	var after m.ServerClaim
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &after))
	assert.Equal(t, claim.UID, after.UID, "the claim is the same")
	assert.Equal(t, m.ClaimPhaseBound, after.Status.Phase, "and still bound")
	assert.Equal(t, claim.Status.ServerRef, after.Status.ServerRef, "to the same server")

	// Uninstall: the Subscription and the CSV go; the CRDs and the objects stay.
	out, err := n.Kubectl(ctx, "-n", olmNamespace, "delete", "subscription", "ironfleet")
	require.NoError(t, err, string(out))
	out, err = n.Kubectl(ctx, "-n", olmNamespace, "delete", "csv", next)
	require.NoError(t, err, string(out))
	for _, name := range []string{"ironfleet-controller-manager", "ironfleet-boot-service"} {
		eventually(t, 3*time.Minute, func() bool {
			var d appsv1.Deployment
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: olmNamespace, Name: name}, &d))
		}, explain, name+" goes with its CSV")
	}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &after), "the claim stays")
	assert.Equal(t, claim.UID, after.UID)
	var servers m.ServerList
	require.NoError(t, c.List(ctx, &servers))
	assert.Len(t, servers.Items, 1, "the server stays")
	var bmcs m.BMCList
	require.NoError(t, c.List(ctx, &bmcs))
	assert.Len(t, bmcs.Items, 1, "the BMC stays")
}

// catalogSource is Ironfleet's CatalogSource in OLM's namespace, serving the catalog image.
func catalogSource(image string) []byte {
	return []byte(`apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: ironfleet
  namespace: olm
spec:
  sourceType: grpc
  image: ` + image + `
  displayName: Ironfleet
`)
}

// tool is a tool the Makefile builds into the tools cache (make test builds them first).
func tool(t *testing.T, pattern string) string {
	t.Helper()
	found, _ := filepath.Glob(filepath.Join(testenv.ToolsDir(), pattern))
	require.NotEmpty(t, found, "%s is not built in %s: make test builds it", pattern, testenv.ToolsDir())
	return found[len(found)-1]
}
