package capi

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// The reconcilers run one reconcile at a time, called by the test, against a real apiserver
// with Cluster API's CRDs and the provider's; nothing else runs: each step is the test's.
var k8s client.Client

func TestMain(mm *testing.M) {
	env, err := testenv.StartWith(testenv.Options{ClusterAPI: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	k8s = env.Client
	code := mm.Run()
	_ = env.Stop()
	os.Exit(code)
}

const checksum = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func machineReconciler() *MachineReconciler {
	return &MachineReconciler{Client: k8s, APIReader: k8s, Events: events.NewFakeRecorder(100)}
}

func reconcileMachine(t *testing.T, name string) *infrav1.IronfleetMachine {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Namespace: "default", Name: name}
	_, err := machineReconciler().Reconcile(ctx, ctrl.Request{NamespacedName: key})
	require.NoError(t, err)
	var im infrav1.IronfleetMachine
	if err := k8s.Get(ctx, key, &im); apierrors.IsNotFound(err) {
		return nil
	} else {
		require.NoError(t, err)
	}
	return &im
}

func readyReason(t *testing.T, im *infrav1.IronfleetMachine) string {
	t.Helper()
	c := meta.FindStatusCondition(im.Status.Conditions, infrav1.ConditionReady)
	require.NotNil(t, c, "the machine has a Ready condition")
	return c.Reason
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		require.NoError(t, k8s.Create(context.Background(), o), "creating %T %s", o, o.GetName())
	}
}

// fixture is a Cluster, its IronfleetCluster, a Machine and its IronfleetMachine, named after
// the test; the Machine's bootstrap data is in <name>-bootstrap.
type fixture struct {
	name    string
	cluster *clusterv1.Cluster
	machine *clusterv1.Machine
	im      *infrav1.IronfleetMachine
}

func newFixture(t *testing.T, name string) *fixture {
	t.Helper()
	f := &fixture{name: name}
	f.cluster = &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "IronfleetCluster", Name: name}}}
	f.machine = &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: clusterv1.MachineSpec{ClusterName: name,
			// A bootstrap provider's config; its data Secret is named later (setBootstrapSecret).
			Bootstrap:         clusterv1.Bootstrap{ConfigRef: clusterv1.ContractVersionedObjectReference{APIGroup: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig", Name: name}},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupVersion.Group, Kind: "IronfleetMachine", Name: name}}}
	f.im = &infrav1.IronfleetMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Spec: infrav1.IronfleetMachineSpec{
			ServerSelector: &m.ServerSelector{MatchLabels: map[string]m.LabelValue{"pool": "workers"}},
			MinCPUCores:    ptr.To(int32(8)), MinMemory: ptr.To(resource.MustParse("32Gi")),
			Image: "https://images.example/node.raw.gz", ImageChecksum: checksum,
			RootDeviceHints: &m.RootDeviceHints{SerialNumber: "disk-1"},
		}}
	return f
}

// own makes the Machine the IronfleetMachine's owner, as Cluster API's machine controller does.
func (f *fixture) own(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.machine), f.machine))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.im), f.im))
	f.im.OwnerReferences = []metav1.OwnerReference{{APIVersion: clusterv1.GroupVersion.String(), Kind: "Machine", Name: f.machine.Name, UID: f.machine.UID, Controller: ptr.To(true)}}
	require.NoError(t, k8s.Update(ctx, f.im))
}

func (f *fixture) provisionClusterInfrastructure(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.cluster), f.cluster))
	f.cluster.Status.Initialization.InfrastructureProvisioned = ptr.To(true)
	require.NoError(t, k8s.Status().Update(ctx, f.cluster))
}

func (f *fixture) setBootstrapSecret(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.machine), f.machine))
	f.machine.Spec.Bootstrap.DataSecretName = ptr.To(name)
	require.NoError(t, k8s.Update(ctx, f.machine))
}

// ready walks a fixture to a claim: everything exists, the bootstrap data is valid.
func (f *fixture) ready(t *testing.T, data []byte) *m.ServerClaim {
	t.Helper()
	create(t, f.cluster, &infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name}}, f.machine, f.im,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name + "-bootstrap"}, Data: map[string][]byte{"value": data}})
	f.own(t)
	f.provisionClusterInfrastructure(t)
	f.setBootstrapSecret(t, f.name+"-bootstrap")
	reconcileMachine(t, f.name)
	var claim m.ServerClaim
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: f.name}, &claim))
	return &claim
}

func TestMachineWaitsForEachPrerequisiteInTurn(t *testing.T) {
	f := newFixture(t, "waits")
	create(t, f.im)
	im := reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonWaitingForMachine, readyReason(t, im))
	assert.Contains(t, im.Finalizers, infrav1.MachineFinalizer, "the finalizer comes before any claim")

	create(t, f.machine)
	f.own(t)
	assert.Equal(t, infrav1.MachineReasonWaitingForCluster, readyReason(t, reconcileMachine(t, f.name)))

	create(t, f.cluster, &infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name}})
	assert.Equal(t, infrav1.MachineReasonWaitingForClusterInfrastructure, readyReason(t, reconcileMachine(t, f.name)))

	f.provisionClusterInfrastructure(t)
	assert.Equal(t, infrav1.MachineReasonWaitingForBootstrapData, readyReason(t, reconcileMachine(t, f.name)), "no dataSecretName yet")

	f.setBootstrapSecret(t, "waits-bootstrap")
	assert.Equal(t, infrav1.MachineReasonWaitingForBootstrapData, readyReason(t, reconcileMachine(t, f.name)), "the Secret does not exist yet")
	result, err := machineReconciler().Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.im)})
	require.NoError(t, err)
	assert.Equal(t, bootstrapDataRecheck, result.RequeueAfter, "nothing watches Secrets: the machine looks again")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "waits-bootstrap"}, Data: map[string][]byte{"format": []byte("cloud-config")}}
	create(t, secret)
	assert.Equal(t, infrav1.MachineReasonBootstrapDataInvalid, readyReason(t, reconcileMachine(t, f.name)), "no value")

	secret.Data["value"] = make([]byte, m.MaxUserDataBytes+1)
	require.NoError(t, k8s.Update(context.Background(), secret))
	im = reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonBootstrapDataInvalid, readyReason(t, im), "too large for a config drive")
	assert.Contains(t, meta.FindStatusCondition(im.Status.Conditions, infrav1.ConditionReady).Message, "more than")
	var claims m.ServerClaimList
	require.NoError(t, k8s.List(context.Background(), &claims, client.InNamespace("default"), client.MatchingLabels{infrav1.LabelMachine: f.name}))
	assert.Empty(t, claims.Items, "no claim while the machine waits")

	data := []byte("#cloud-config\nhostname: waits\n\x00binary too\n")
	secret.Data["value"] = data
	require.NoError(t, k8s.Update(context.Background(), secret))
	im = reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonWaitingForServer, readyReason(t, im))

	var claim m.ServerClaim
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: f.name}, &claim), "the claim has the machine's name")
	assert.Equal(t, f.name, claim.Labels[infrav1.LabelMachine])
	assert.Equal(t, f.name, claim.Labels[clusterv1.ClusterNameLabel])
	assert.Empty(t, claim.OwnerReferences, "no owner reference: garbage collection must never release a node's server")
	assert.Equal(t, f.im.Spec.Image, claim.Spec.Image)
	assert.Equal(t, checksum, claim.Spec.ImageChecksum)
	assert.Equal(t, f.im.Spec.RootDeviceHints, claim.Spec.RootDeviceHints)
	assert.Equal(t, f.im.Spec.ServerSelector, claim.Spec.ServerSelector)
	assert.Equal(t, int32(8), *claim.Spec.MinCPUCores)
	assert.Equal(t, "32Gi", claim.Spec.MinMemory.String())
	assert.Equal(t, m.PowerOn, claim.Spec.Power)
	require.NotNil(t, claim.Spec.IgnitionSecretRef)
	var ign corev1.Secret
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: claim.Spec.IgnitionSecretRef.Name}, &ign))
	assert.Equal(t, f.name+"-bootstrap-data", ign.Name)
	assert.Equal(t, data, ign.Data[m.IgnitionSecretKey], "the bootstrap data, byte for byte")

	// New bootstrap data reaches the ignition Secret.
	secret.Data["value"] = []byte("#cloud-config\nhostname: again\n")
	require.NoError(t, k8s.Update(context.Background(), secret))
	reconcileMachine(t, f.name)
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(&ign), &ign))
	assert.Equal(t, secret.Data["value"], ign.Data[m.IgnitionSecretKey])
}

func TestClaimReasonsPassThroughUntilProvisioned(t *testing.T) {
	f := newFixture(t, "passes")
	claim := f.ready(t, []byte("#cloud-config\n"))
	ctx := context.Background()

	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: m.ConditionBound, Status: metav1.ConditionFalse, Reason: m.ClaimReasonNoMatchingServer, Message: "no Available server has 8 cores"})
	claim.Status.Phase = m.ClaimPhasePending
	require.NoError(t, k8s.Status().Update(ctx, claim))
	im := reconcileMachine(t, f.name)
	assert.Equal(t, m.ClaimReasonNoMatchingServer, readyReason(t, im), "the claim's reason passes through")
	assert.Contains(t, meta.FindStatusCondition(im.Status.Conditions, infrav1.ConditionReady).Message, "8 cores")

	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "passes-server", Labels: map[string]string{infrav1.DefaultFailureDomainLabel: "zone-c"}}}
	create(t, server)
	server.Status.Inventory = &m.Inventory{NetworkInterfaces: []m.NetworkInterface{
		{MACAddress: "52:54:00:00:00:01", IPAddresses: []string{"10.1.0.7", "fd00::7"}},
		{MACAddress: "52:54:00:00:00:02"},
	}}
	require.NoError(t, k8s.Status().Update(ctx, server))
	claim.Status.Phase = m.ClaimPhaseBound
	claim.Status.ServerRef = &m.LocalObjectReference{Name: server.Name}
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: m.ConditionBound, Status: metav1.ConditionTrue, Reason: m.ClaimReasonBound})
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: m.ConditionReady, Status: metav1.ConditionFalse, Reason: "Installing", Message: "31 MiB of 64 MiB written"})
	require.NoError(t, k8s.Status().Update(ctx, claim))
	im = reconcileMachine(t, f.name)
	assert.Equal(t, "Installing", readyReason(t, im))
	assert.Empty(t, im.Spec.ProviderID, "no providerID before the image runs")
	assert.Nil(t, im.Status.Initialization.Provisioned)

	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: m.ConditionProvisioned, Status: metav1.ConditionTrue, Reason: "Installed"})
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: m.ConditionReady, Status: metav1.ConditionTrue, Reason: "ServerReady"})
	require.NoError(t, k8s.Status().Update(ctx, claim))
	im = reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonProvisioned, readyReason(t, im))
	assert.Equal(t, "ironfleet://passes-server", im.Spec.ProviderID)
	assert.True(t, *im.Status.Initialization.Provisioned)
	assert.Equal(t, "zone-c", im.Status.FailureDomain)
	assert.Equal(t, clusterv1.MachineAddresses{
		{Type: clusterv1.MachineHostName, Address: f.name},
		{Type: clusterv1.MachineInternalIP, Address: "10.1.0.7"},
		{Type: clusterv1.MachineInternalIP, Address: "fd00::7"},
	}, im.Status.Addresses)

	// The claim bound again to another server: the machine says so and keeps its providerID.
	claim.Status.ServerRef = &m.LocalObjectReference{Name: "another-server"}
	require.NoError(t, k8s.Status().Update(ctx, claim))
	im = reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonServerReplaced, readyReason(t, im))
	assert.Equal(t, "ironfleet://passes-server", im.Spec.ProviderID)

	// The apiserver keeps the providerID once set.
	im.Spec.ProviderID = "ironfleet://another-server"
	err := k8s.Update(ctx, im)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "providerID cannot change once set")
}

func TestClaimNameTaken(t *testing.T) {
	f := newFixture(t, "taken")
	someone := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "taken"}, Spec: m.ServerClaimSpec{Power: m.PowerOff}}
	create(t, someone)
	f.ready(t, []byte("#cloud-config\n"))
	im := reconcileMachine(t, f.name)
	assert.Equal(t, infrav1.MachineReasonClaimNameTaken, readyReason(t, im))
	var claim m.ServerClaim
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(someone), &claim))
	assert.Empty(t, claim.Labels, "someone else's claim is left as it is")
	assert.Equal(t, m.PowerOff, claim.Spec.Power)

	// Deleting the machine leaves it alone too.
	require.NoError(t, k8s.Delete(context.Background(), im))
	assert.Nil(t, reconcileMachine(t, f.name), "the machine goes")
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKeyFromObject(someone), &claim), "someone else's claim stays")
}

func TestIgnitionSecretNameTaken(t *testing.T) {
	ctx := context.Background()
	theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "secret-taken-bootstrap-data"}, Data: map[string][]byte{"ignition": []byte("theirs")}}
	create(t, theirs)
	f := newFixture(t, "secret-taken")
	create(t, f.cluster, &infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name}}, f.machine, f.im,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name + "-bootstrap"}, Data: map[string][]byte{"value": []byte("ours")}})
	f.own(t)
	f.provisionClusterInfrastructure(t)
	f.setBootstrapSecret(t, f.name+"-bootstrap")
	result, err := machineReconciler().Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(f.im)})
	require.NoError(t, err)
	assert.Equal(t, bootstrapDataRecheck, result.RequeueAfter, "nothing watches Secrets: the machine looks again")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.im), f.im))
	assert.Equal(t, infrav1.MachineReasonClaimNameTaken, readyReason(t, f.im))
	assert.Contains(t, meta.FindStatusCondition(f.im.Status.Conditions, infrav1.ConditionReady).Message, "Secret default/secret-taken-bootstrap-data")
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(theirs), theirs))
	assert.Equal(t, []byte("theirs"), theirs.Data["ignition"], "someone else's Secret is left as it is")
	err = k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: f.name}, &m.ServerClaim{})
	assert.True(t, apierrors.IsNotFound(err), "no claim names a Secret that is not the machine's: %v", err)
}

func TestFailureDomainNarrowsTheSelector(t *testing.T) {
	f := newFixture(t, "placed")
	f.machine.Spec.FailureDomain = "rack-7"
	ic := &infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: f.name}, Spec: infrav1.IronfleetClusterSpec{FailureDomainLabel: "example.com/rack"}}
	create(t, ic, f.cluster, f.machine, f.im,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "placed-bootstrap"}, Data: map[string][]byte{"value": []byte("x")}})
	f.own(t)
	f.provisionClusterInfrastructure(t)
	f.setBootstrapSecret(t, "placed-bootstrap")
	reconcileMachine(t, f.name)
	var claim m.ServerClaim
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: f.name}, &claim))
	require.NotNil(t, claim.Spec.ServerSelector)
	assert.Equal(t, map[string]m.LabelValue{"pool": "workers"}, claim.Spec.ServerSelector.MatchLabels, "the template's selector is kept")
	assert.Equal(t, []m.ServerSelectorRequirement{{Key: "example.com/rack", Operator: metav1.LabelSelectorOpIn, Values: []string{"rack-7"}}},
		claim.Spec.ServerSelector.MatchExpressions, "and narrowed to the Machine's failure domain, by the cluster's label")
	assert.Nil(t, f.im.Spec.ServerSelector.MatchExpressions, "the machine's own spec is not changed")
}

func TestPausedMachineKeepsItsClaimEvenDeleted(t *testing.T) {
	f := newFixture(t, "paused")
	claim := f.ready(t, []byte("#cloud-config\n"))
	ctx := context.Background()
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(f.cluster), f.cluster))
	f.cluster.Spec.Paused = ptr.To(true)
	require.NoError(t, k8s.Update(ctx, f.cluster))

	require.NoError(t, k8s.Delete(ctx, f.im))
	im := reconcileMachine(t, f.name)
	require.NotNil(t, im, "the finalizer holds the deleted machine")
	assert.True(t, meta.IsStatusConditionTrue(im.Status.Conditions, infrav1.ConditionPaused))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim), "a paused machine's claim stays, deleted or not (clusterctl move)")
	assert.True(t, claim.DeletionTimestamp.IsZero())

	// The annotation pauses it as well.
	f.cluster.Spec.Paused = nil
	require.NoError(t, k8s.Update(ctx, f.cluster))
	im.Annotations = map[string]string{clusterv1.PausedAnnotation: ""}
	require.NoError(t, k8s.Update(ctx, im))
	im = reconcileMachine(t, f.name)
	assert.True(t, meta.IsStatusConditionTrue(im.Status.Conditions, infrav1.ConditionPaused))
	require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))

	// Unpaused, the deletion goes on: the claim is deleted, then the machine lets go.
	delete(im.Annotations, clusterv1.PausedAnnotation)
	require.NoError(t, k8s.Update(ctx, im))
	im = reconcileMachine(t, f.name)
	require.NotNil(t, im)
	assert.False(t, meta.IsStatusConditionTrue(im.Status.Conditions, infrav1.ConditionPaused))
	assert.Equal(t, infrav1.MachineReasonDeleting, readyReason(t, im))
	err := k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim)
	assert.True(t, apierrors.IsNotFound(err), "the claim is deleted (nothing else holds it here): %v", err)
	assert.Nil(t, reconcileMachine(t, f.name), "with its claim gone, the machine goes")
	err = k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: f.name + "-bootstrap-data"}, &corev1.Secret{})
	assert.True(t, apierrors.IsNotFound(err), "and its copy of the bootstrap data: %v", err)
}

func TestClusterIsReadyOnceItsEndpointIsValid(t *testing.T) {
	ctx := context.Background()
	r := &ClusterReconciler{Client: k8s}
	ic := &infrav1.IronfleetCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "endpoint"}, Spec: infrav1.IronfleetClusterSpec{FailureDomainLabel: "example.com/room"}}
	create(t, ic,
		&m.Server{ObjectMeta: metav1.ObjectMeta{Name: "room-b-1", Labels: map[string]string{"example.com/room": "b"}}},
		&m.Server{ObjectMeta: metav1.ObjectMeta{Name: "room-a-1", Labels: map[string]string{"example.com/room": "a"}}},
		&m.Server{ObjectMeta: metav1.ObjectMeta{Name: "room-a-2", Labels: map[string]string{"example.com/room": "a"}}},
		&m.Server{ObjectMeta: metav1.ObjectMeta{Name: "no-room"}})
	observe := func() *infrav1.IronfleetCluster {
		_, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ic)})
		require.NoError(t, err)
		var got infrav1.IronfleetCluster
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(ic), &got))
		return &got
	}
	for _, tc := range []struct {
		ep    clusterv1.APIEndpoint
		ready bool
		says  string
	}{
		{clusterv1.APIEndpoint{}, false, "host is not set"},
		{clusterv1.APIEndpoint{Host: "not a host!", Port: 6443}, false, "neither an IP address nor a DNS name"},
		{clusterv1.APIEndpoint{Host: "10.0.0.10"}, false, "port 0"},
		{clusterv1.APIEndpoint{Host: "api.cluster.example", Port: 6443}, true, "api.cluster.example:6443"},
		{clusterv1.APIEndpoint{Host: "10.0.0.10", Port: 443}, true, "10.0.0.10:443"},
	} {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(ic), ic))
		ic.Spec.ControlPlaneEndpoint = tc.ep
		require.NoError(t, k8s.Update(ctx, ic))
		got := observe()
		c := meta.FindStatusCondition(got.Status.Conditions, infrav1.ConditionReady)
		require.NotNil(t, c)
		assert.Equal(t, tc.ready, c.Status == metav1.ConditionTrue, "%+v: %s", tc.ep, c.Message)
		assert.Contains(t, c.Message, tc.says)
		if tc.ready {
			assert.Equal(t, infrav1.ClusterReasonProvisioned, c.Reason)
			assert.True(t, *got.Status.Initialization.Provisioned)
		} else {
			assert.Equal(t, infrav1.ClusterReasonControlPlaneEndpointMissing, c.Reason)
		}
		var names []string
		for _, fd := range got.Status.FailureDomains {
			names = append(names, fd.Name)
			assert.True(t, *fd.ControlPlane)
		}
		assert.Equal(t, []string{"a", "b"}, names, "the failure domains are the values of the cluster's label, once each")
	}
}

func TestTheAPIRefusesWhatCannotWork(t *testing.T) {
	ctx := context.Background()
	for name, spec := range map[string]infrav1.IronfleetMachineSpec{
		"http image without checksum": {Image: "https://images.example/node.raw"},
		"ftp image":                   {Image: "ftp://images.example/node.raw", ImageChecksum: checksum},
		"bad checksum":                {Image: "https://images.example/node.raw", ImageChecksum: "md5:abc"},
	} {
		im := &infrav1.IronfleetMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "refused-" + strings.ReplaceAll(name, " ", "-")}, Spec: spec}
		assert.Error(t, k8s.Create(ctx, im), "%s: refused", name)
		tmpl := &infrav1.IronfleetMachineTemplate{ObjectMeta: im.ObjectMeta,
			Spec: infrav1.IronfleetMachineTemplateSpec{Template: infrav1.IronfleetMachineTemplateResource{Spec: spec}}}
		assert.Error(t, k8s.Create(ctx, tmpl), "%s: a template refused when created, not when machines are made of it", name)
	}
	ok := &infrav1.IronfleetMachineTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "accepted"},
		Spec: infrav1.IronfleetMachineTemplateSpec{Template: infrav1.IronfleetMachineTemplateResource{Spec: infrav1.IronfleetMachineSpec{Image: "oci://registry.example/node:1"}}}}
	assert.NoError(t, k8s.Create(ctx, ok), "an oci:// image needs no checksum")
}
