package capi

// What Ironfleet ships for Cluster API (docs/capi.md), checked with the pinned clusterctl and a
// real apiserver: the provider's components as clusterctl installs them, and the cluster
// template as `clusterctl generate cluster` renders it.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilptr "k8s.io/utils/ptr"
	bootstrapv1 "sigs.k8s.io/cluster-api/api/bootstrap/kubeadm/v1beta2"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

const (
	providerLabel    = "cluster.x-k8s.io/provider"
	providerName     = "infrastructure-ironfleet"
	namePrefix       = "ironfleet-capi-"
	clusterNamespace = "demo"
)

// The template's variables, as a user sets them (docs/capi.md); the machine counts and the
// Kubernetes version come from clusterctl's flags.
var templateVariables = map[string]string{
	"CONTROL_PLANE_ENDPOINT_HOST": "192.0.2.10",
	"IRONFLEET_IMAGE_URL":         "https://images.example.test/node-v1.36.3.raw.zst",
	"IRONFLEET_IMAGE_CHECKSUM":    "sha256:" + strings.Repeat("ab", 32),
}

// TestTemplateClusterctlRendersWhatTheAPIServerAccepts renders the provider's clusterctl
// repository (as make capi-release writes it) and templates/cluster-template.yaml with the pinned
// clusterctl, checks what they say, and creates every object in a real apiserver holding Cluster
// API's core and kubeadm CRDs and the provider's, with strict field validation.
func TestTemplateClusterctlRendersWhatTheAPIServerAccepts(t *testing.T) {
	bin := requiredTool(t, "IRONFLEET_CLUSTERCTL", "clusterctl")
	kustomize := requiredTool(t, "KUSTOMIZE", "test")
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	repo := writeRepository(t, root, kustomize)
	cc := clusterctl{bin: bin, home: t.TempDir(), vars: templateVariables}
	template := filepath.Join(root, "templates", "cluster-template.yaml")

	checkMetadata(t, root)

	// The variables a user must set are the ones docs/capi.md lists, and no others.
	listed := string(cc.run(t, "generate", "cluster", "demo", "--from", template, "--target-namespace", clusterNamespace, "--list-variables"))
	required, _, _ := strings.Cut(strings.TrimPrefix(listed, "Required Variables:"), "Optional Variables:")
	assert.ElementsMatch(t, []string{"CONTROL_PLANE_ENDPOINT_HOST", "IRONFLEET_IMAGE_CHECKSUM", "IRONFLEET_IMAGE_URL", "KUBERNETES_VERSION"},
		strings.Fields(strings.ReplaceAll(required, "- ", "")), "the template's required variables:\n%s", listed)

	generate := []string{"--target-namespace", clusterNamespace, "--kubernetes-version", "v1.36.3",
		"--control-plane-machine-count", "3", "--worker-machine-count", "2"}
	cluster := decodeObjects(t, cc.run(t, append([]string{"generate", "cluster", "demo", "--from", template}, generate...)...))
	// The same template, found by clusterctl in the provider's repository.
	fromRepo := decodeObjects(t, cc.run(t, append([]string{"generate", "cluster", "demo", "--infrastructure", "ironfleet:" + repo.version, "--config", repo.config}, generate...)...))
	assert.Equal(t, cluster, fromRepo, "the repository's template renders as templates/cluster-template.yaml does")
	checkClusterObjects(t, cluster)

	// The components as clusterctl init would apply them (its namespace and labels fixed up),
	// and as written (kustomize build config/capi).
	components := decodeObjects(t, cc.run(t, "generate", "provider", "--infrastructure", "ironfleet:"+repo.version, "--config", repo.config))
	written := decodeObjects(t, repo.components)
	assert.Equal(t, objectIdentities(written), objectIdentities(components), "clusterctl installs every object of infrastructure-components.yaml, and no other")
	checkComponents(t, root, written)

	env, err := testenv.StartWith(testenv.Options{ClusterAPI: true, CRDPaths: kubeadmCRDs(t)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()

	t.Run("components are accepted", func(t *testing.T) { createComponents(ctx, t, env.Client, components) })
	t.Run("the provider's pod passes the restricted Pod Security Standard", func(t *testing.T) {
		checkPodSecurity(ctx, t, env.Client, components)
	})
	t.Run("the generated cluster is accepted", func(t *testing.T) { createCluster(ctx, t, env.Client, cluster) })
}

// kubeadmCRDs are Cluster API's kubeadm bootstrap and control plane CRDs, from the pinned module.
func kubeadmCRDs(t *testing.T) []string {
	t.Helper()
	dir, err := testenv.ModuleDir("sigs.k8s.io/cluster-api")
	require.NoError(t, err)
	return []string{filepath.Join(dir, "bootstrap", "kubeadm", "config", "crd", "bases"), filepath.Join(dir, "controlplane", "kubeadm", "config", "crd", "bases")}
}

// checkMetadata: metadata.yaml is clusterctl's, and its release series implement the contract
// the CRDs are labelled with.
func checkMetadata(t *testing.T, root string) {
	data, err := os.ReadFile(filepath.Join(root, "metadata.yaml"))
	require.NoError(t, err)
	var md clusterctlMetadata
	require.NoError(t, yaml.UnmarshalStrict(data, &md))
	assert.Equal(t, "clusterctl.cluster.x-k8s.io/v1alpha3", md.APIVersion)
	assert.Equal(t, "Metadata", md.Kind)
	require.NotEmpty(t, md.ReleaseSeries)
	contract := strings.TrimPrefix(infrav1.ContractLabel, "cluster.x-k8s.io/")
	for _, s := range md.ReleaseSeries {
		assert.Equal(t, contract, s.Contract, "release series v%d.%d", s.Major, s.Minor)
	}
}

// checkClusterObjects: the template makes a Cluster on an IronfleetCluster with a kubeadm
// control plane and a MachineDeployment, every reference resolving among its objects, and every
// kubelet's provider ID ironfleet://<server>.
func checkClusterObjects(t *testing.T, objs []*unstructured.Unstructured) {
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		assert.Equal(t, clusterNamespace, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
	}
	assert.Equal(t, map[string]int{"Cluster": 1, "IronfleetCluster": 1, "KubeadmControlPlane": 1, "IronfleetMachineTemplate": 2,
		"MachineDeployment": 1, "KubeadmConfigTemplate": 1}, kinds)
	resolves := func(what string, ref clusterv1.ContractVersionedObjectReference, group, kind string) {
		assert.Equal(t, group, ref.APIGroup, what)
		assert.Equal(t, kind, ref.Kind, what)
		assert.NotNil(t, findObject(objs, ref.Kind, ref.Name), "%s names %s %q, which the template makes", what, ref.Kind, ref.Name)
	}

	cluster := asTyped[clusterv1.Cluster](t, findObject(objs, "Cluster", "demo"))
	resolves("Cluster's infrastructureRef", cluster.Spec.InfrastructureRef, infrav1.GroupVersion.Group, "IronfleetCluster")
	resolves("Cluster's controlPlaneRef", cluster.Spec.ControlPlaneRef, controlplanev1.GroupVersion.Group, "KubeadmControlPlane")
	assert.NotEmpty(t, cluster.Spec.ClusterNetwork.Pods.CIDRBlocks)
	assert.NotEmpty(t, cluster.Spec.ClusterNetwork.Services.CIDRBlocks)

	ic := asTyped[infrav1.IronfleetCluster](t, findObject(objs, "IronfleetCluster", cluster.Spec.InfrastructureRef.Name))
	assert.Equal(t, clusterv1.APIEndpoint{Host: templateVariables["CONTROL_PLANE_ENDPOINT_HOST"], Port: 6443}, ic.Spec.ControlPlaneEndpoint)
	assert.Equal(t, infrav1.DefaultFailureDomainLabel, ic.Spec.FailureDomainLabel)

	providerID := bootstrapv1.Arg{Name: "provider-id", Value: utilptr.To(providerIDArg)}
	kcp := asTyped[controlplanev1.KubeadmControlPlane](t, findObject(objs, "KubeadmControlPlane", cluster.Spec.ControlPlaneRef.Name))
	assert.Equal(t, utilptr.To[int32](3), kcp.Spec.Replicas)
	assert.Equal(t, "v1.36.3", kcp.Spec.Version)
	resolves("KubeadmControlPlane's machine template", kcp.Spec.MachineTemplate.Spec.InfrastructureRef, infrav1.GroupVersion.Group, "IronfleetMachineTemplate")
	assert.Equal(t, bootstrapv1.CloudConfig, kcp.Spec.KubeadmConfigSpec.Format, "cloud-config: CABPK's jinja header makes cloud-init render the provider ID")
	assert.Contains(t, kcp.Spec.KubeadmConfigSpec.InitConfiguration.NodeRegistration.KubeletExtraArgs, providerID, "the first control plane node's kubelet")
	assert.Contains(t, kcp.Spec.KubeadmConfigSpec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, providerID, "the joining control plane nodes' kubelets")

	md := asTyped[clusterv1.MachineDeployment](t, objectsOfKind(objs, "MachineDeployment")[0])
	assert.Equal(t, "demo", md.Spec.ClusterName)
	assert.Equal(t, "demo", md.Spec.Template.Spec.ClusterName)
	assert.Equal(t, utilptr.To[int32](2), md.Spec.Replicas)
	assert.Equal(t, "v1.36.3", md.Spec.Template.Spec.Version)
	selector, err := metav1.LabelSelectorAsSelector(&md.Spec.Selector)
	require.NoError(t, err)
	assert.True(t, selector.Matches(labels.Set(md.Spec.Template.ObjectMeta.Labels)), "the MachineDeployment's selector selects its machines")
	resolves("MachineDeployment's infrastructureRef", md.Spec.Template.Spec.InfrastructureRef, infrav1.GroupVersion.Group, "IronfleetMachineTemplate")
	resolves("MachineDeployment's bootstrap configRef", md.Spec.Template.Spec.Bootstrap.ConfigRef, bootstrapv1.GroupVersion.Group, "KubeadmConfigTemplate")
	assert.NotEqual(t, kcp.Spec.MachineTemplate.Spec.InfrastructureRef.Name, md.Spec.Template.Spec.InfrastructureRef.Name, "control plane and workers have templates of their own")

	kct := asTyped[bootstrapv1.KubeadmConfigTemplate](t, findObject(objs, "KubeadmConfigTemplate", md.Spec.Template.Spec.Bootstrap.ConfigRef.Name))
	assert.Equal(t, bootstrapv1.CloudConfig, kct.Spec.Template.Spec.Format)
	assert.Contains(t, kct.Spec.Template.Spec.JoinConfiguration.NodeRegistration.KubeletExtraArgs, providerID, "the workers' kubelets")

	for _, o := range objectsOfKind(objs, "IronfleetMachineTemplate") {
		imt := asTyped[infrav1.IronfleetMachineTemplate](t, o)
		assert.Equal(t, templateVariables["IRONFLEET_IMAGE_URL"], imt.Spec.Template.Spec.Image, imt.Name)
		assert.Equal(t, templateVariables["IRONFLEET_IMAGE_CHECKSUM"], imt.Spec.Template.Spec.ImageChecksum, imt.Name)
	}
}

// checkComponents: infrastructure-components.yaml as written, every object the provider's, in
// its namespace, with the generated RBAC and a restricted-compliant Deployment.
func checkComponents(t *testing.T, root string, objs []*unstructured.Unstructured) {
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		assert.Equal(t, providerName, o.GetLabels()[providerLabel], "%s %s: clusterctl finds a provider's objects by its label", o.GetKind(), o.GetName())
		if o.GetKind() != "CustomResourceDefinition" {
			assert.True(t, strings.HasPrefix(o.GetName(), namePrefix), "%s %s is prefixed %s", o.GetKind(), o.GetName(), namePrefix)
		}
	}
	assert.Equal(t, map[string]int{"Namespace": 1, "CustomResourceDefinition": 3, "ServiceAccount": 1, "ClusterRole": 2,
		"ClusterRoleBinding": 1, "Role": 1, "RoleBinding": 1, "Deployment": 1}, kinds)

	ns := asTyped[corev1.Namespace](t, objectsOfKind(objs, "Namespace")[0])
	assert.Equal(t, "ironfleet-capi-system", ns.Name)
	assert.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])
	for _, o := range objs {
		if o.GetKind() != "Namespace" && o.GetKind() != "CustomResourceDefinition" && o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
			assert.Equal(t, ns.Name, o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
	}

	var crds []string
	for _, o := range objectsOfKind(objs, "CustomResourceDefinition") {
		crd := asTyped[apiextensionsv1.CustomResourceDefinition](t, o)
		crds = append(crds, crd.Name)
		assert.Equal(t, "v1alpha1", crd.Labels[infrav1.ContractLabel], "%s: the contract label tells Cluster API which versions implement v1beta2", crd.Name)
	}
	assert.ElementsMatch(t, []string{"ironfleetclusters.infrastructure.cluster.x-k8s.io", "ironfleetmachines.infrastructure.cluster.x-k8s.io",
		"ironfleetmachinetemplates.infrastructure.cluster.x-k8s.io"}, crds)

	sa := asTyped[corev1.ServiceAccount](t, objectsOfKind(objs, "ServiceAccount")[0])
	subject := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns.Name}

	// The provider's ClusterRole is the generated one, bound to its ServiceAccount.
	crb := asTyped[rbacv1.ClusterRoleBinding](t, objectsOfKind(objs, "ClusterRoleBinding")[0])
	assert.Equal(t, []rbacv1.Subject{subject}, crb.Subjects)
	role := findObject(objs, "ClusterRole", crb.RoleRef.Name)
	require.NotNil(t, role, "the ClusterRoleBinding's role %s is among the components", crb.RoleRef.Name)
	assert.Equal(t, generatedRole(t, root).Rules, asTyped[rbacv1.ClusterRole](t, role).Rules, "the provider's ClusterRole is config/capi/rbac/role.yaml's")

	// Cluster API's core manager may read, label and delete the provider's objects.
	var aggregated *rbacv1.ClusterRole
	for _, o := range objectsOfKind(objs, "ClusterRole") {
		if o.GetName() != crb.RoleRef.Name {
			aggregated = asTyped[rbacv1.ClusterRole](t, o)
		}
	}
	require.NotNil(t, aggregated)
	assert.Equal(t, "true", aggregated.Labels["cluster.x-k8s.io/aggregate-to-manager"])
	for _, resource := range []string{"ironfleetclusters", "ironfleetmachines", "ironfleetmachinetemplates"} {
		for _, verb := range []string{"get", "list", "watch", "update", "patch", "delete"} {
			assert.True(t, rulesAllow(aggregated.Rules, infrav1.GroupVersion.Group, resource, verb), "Cluster API's manager may %s %s", verb, resource)
		}
	}

	// Leader election: the lease, in the provider's namespace.
	rb := asTyped[rbacv1.RoleBinding](t, objectsOfKind(objs, "RoleBinding")[0])
	assert.Equal(t, []rbacv1.Subject{subject}, rb.Subjects)
	le := asTyped[rbacv1.Role](t, findObject(objs, "Role", rb.RoleRef.Name))
	for _, verb := range []string{"get", "create", "update"} {
		assert.True(t, rulesAllow(le.Rules, "coordination.k8s.io", "leases", verb), "leader election may %s leases", verb)
	}
	assert.True(t, rulesAllow(le.Rules, "", "events", "create") || rulesAllow(le.Rules, "events.k8s.io", "events", "create"), "leader election records events")

	d := asTyped[appsv1.Deployment](t, objectsOfKind(objs, "Deployment")[0])
	pod := d.Spec.Template.Spec
	assert.Equal(t, sa.Name, pod.ServiceAccountName)
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "manager", c.Name)
	assert.NotEqual(t, "capi-provider", c.Image, "the image is stamped by kustomize (make capi-release's CAPI_IMG)")
	assert.Contains(t, c.Image, "capi-provider")
	assert.Subset(t, c.Args, []string{"--leader-elect", "--leader-election-namespace=$(POD_NAMESPACE)", "--health-probe-bind-address=:8081"})
	assert.Contains(t, c.Env, corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	for name, probe := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe} {
		require.NotNil(t, probe, name)
		require.NotNil(t, probe.HTTPGet, name)
		port := probe.HTTPGet.Port.IntValue()
		for _, p := range c.Ports {
			if p.Name == probe.HTTPGet.Port.String() {
				port = int(p.ContainerPort)
			}
		}
		assert.Equal(t, 8081, port, "the %s probe asks the provider's health port", name)
	}
	require.NotNil(t, pod.SecurityContext)
	assert.Equal(t, utilptr.To(true), pod.SecurityContext.RunAsNonRoot)
	require.NotNil(t, pod.SecurityContext.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type)
	require.NotNil(t, c.SecurityContext)
	assert.Equal(t, utilptr.To(false), c.SecurityContext.AllowPrivilegeEscalation)
	assert.Equal(t, utilptr.To(true), c.SecurityContext.ReadOnlyRootFilesystem)
	require.NotNil(t, c.SecurityContext.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop)
}

// createOrder installs a namespace and CRDs before what lives in or refers to them.
var createOrder = []string{"Namespace", "CustomResourceDefinition", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment"}

// createComponents creates every component with strict field validation. The provider's CRDs
// are installed already (testenv installs config/capi/crd/bases): each is sent as an update,
// dry run, so the apiserver validates it all the same.
func createComponents(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	objs = slices.Clone(objs)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return slices.Index(createOrder, a.GetKind()) - slices.Index(createOrder, b.GetKind())
	})
	for _, o := range objs {
		o := o.DeepCopy()
		what := fmt.Sprintf("%s %s", o.GetKind(), o.GetName())
		require.NotEqual(t, -1, slices.Index(createOrder, o.GetKind()), "%s: a kind the test does not order", what)
		if o.GetKind() == "CustomResourceDefinition" {
			existing := &unstructured.Unstructured{}
			existing.SetGroupVersionKind(o.GroupVersionKind())
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(o), existing), what)
			o.SetResourceVersion(existing.GetResourceVersion())
			assert.NoError(t, c.Update(ctx, o, client.DryRunAll, client.FieldValidation("Strict")), what)
			continue
		}
		assert.NoError(t, c.Create(ctx, o, client.FieldValidation("Strict")), what)
	}
}

// checkPodSecurity creates the Deployment's pod as a Pod, dry run, in the provider's namespace,
// which enforces restricted; and, so that the check is known to bite, the same pod allowed to
// escalate privileges, which the apiserver must refuse.
func checkPodSecurity(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	d := asTyped[appsv1.Deployment](t, objectsOfKind(objs, "Deployment")[0])
	var ns corev1.Namespace
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: d.Namespace}, &ns))
	require.Equal(t, "restricted", ns.Labels["pod-security.kubernetes.io/enforce"])

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: "pod-security-check", Labels: d.Spec.Template.Labels},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
	assert.NoError(t, c.Create(ctx, pod.DeepCopy(), client.DryRunAll, client.FieldValidation("Strict")), "the provider's pod passes restricted")

	escalating := pod.DeepCopy()
	escalating.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = utilptr.To(true)
	err := c.Create(ctx, escalating, client.DryRunAll)
	require.Error(t, err, "a pod that may escalate privileges is refused in the provider's namespace (Pod Security admission is on)")
	assert.Contains(t, err.Error(), "violates PodSecurity")
}

// createCluster creates every object clusterctl generated, with strict field validation, in the
// target namespace; and an IronfleetMachine of each IronfleetMachineTemplate, dry run, as Cluster
// API would make it.
func createCluster(ctx context.Context, t *testing.T, c client.Client, objs []*unstructured.Unstructured) {
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNamespace}}))
	for _, o := range objs {
		assert.NoError(t, c.Create(ctx, o.DeepCopy(), client.FieldValidation("Strict")), "%s %s", o.GetKind(), o.GetName())
	}
	for _, o := range objectsOfKind(objs, "IronfleetMachineTemplate") {
		imt := asTyped[infrav1.IronfleetMachineTemplate](t, o)
		m := &infrav1.IronfleetMachine{ObjectMeta: metav1.ObjectMeta{Namespace: imt.Namespace, Name: imt.Name + "-0"}, Spec: imt.Spec.Template.Spec}
		assert.NoError(t, c.Create(ctx, m, client.DryRunAll, client.FieldValidation("Strict")), "an IronfleetMachine of %s", imt.Name)
	}
}
