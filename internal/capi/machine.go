package capi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// MachineReconciler gives each IronfleetMachine a server: a ServerClaim of its name with the
// Machine's bootstrap data as ignition; once the server runs the image, the machine's
// providerID, addresses and failure domain; on deletion, the claim released.
type MachineReconciler struct {
	Client client.Client
	// APIReader reads what the provider does not cache: bootstrap-data Secrets, and a Server
	// once, when its machine is provisioned (an inventory is large; no cache of every Server).
	APIReader client.Reader
	Events    events.EventRecorder
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ironfleetmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ironfleetmachines/status;ironfleetmachines/finalizers,verbs=get;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ironfleetmachinetemplates,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters;machines,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one IronfleetMachine a step closer to its server, or gives the server back.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var m infrav1.IronfleetMachine
	if err := r.Client.Get(ctx, req.NamespacedName, &m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	original := m.DeepCopy()
	machine, err := util.GetOwnerMachine(ctx, r.Client, m.ObjectMeta)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the owner Machine: %w", err)
	}
	var cluster *clusterv1.Cluster
	if machine != nil {
		if cluster, err = util.GetClusterFromMetadata(ctx, r.Client, machine.ObjectMeta); err != nil && !apierrors.IsNotFound(err) && !errors.Is(err, util.ErrNoCluster) {
			return ctrl.Result{}, fmt.Errorf("reading the Machine's Cluster: %w", err)
		}
	}
	// Paused first, deletion included: clusterctl move pauses the Cluster, then deletes the
	// source's objects; deleting the claim then would release a running node's server.
	if paused := cluster != nil && annotations.IsPaused(cluster, &m) || annotations.HasPaused(&m); paused {
		status.SetCondition(&m.Status.Conditions, m.Generation, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused,
			"reconciliation is paused (the Cluster's spec.paused or the cluster.x-k8s.io/paused annotation)")
		return r.finish(ctx, &m, original, ctrl.Result{}, nil)
	}
	status.SetCondition(&m.Status.Conditions, m.Generation, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused, "")

	if !m.DeletionTimestamp.IsZero() {
		return r.delete(ctx, &m, original)
	}
	if controllerutil.AddFinalizer(&m, infrav1.MachineFinalizer) {
		// The finalizer is written before any claim exists, so none can outlive the machine.
		if err := r.Client.Patch(ctx, &m, client.MergeFrom(original)); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding the finalizer: %w", err)
		}
		original = m.DeepCopy()
	}
	result, err := r.reconcile(ctx, &m, machine, cluster)
	return r.finish(ctx, &m, original, result, err)
}

// reconcile walks the machine's prerequisites in order; the first one missing is the Ready
// condition's reason.
func (r *MachineReconciler) reconcile(ctx context.Context, m *infrav1.IronfleetMachine, machine *clusterv1.Machine, cluster *clusterv1.Cluster) (ctrl.Result, error) {
	wait := func(reason, format string, args ...any) (ctrl.Result, error) {
		setMachineReady(m, reason, fmt.Sprintf(format, args...))
		return ctrl.Result{}, nil
	}
	switch {
	case machine == nil:
		return wait(infrav1.MachineReasonWaitingForMachine, "no Machine owns this IronfleetMachine yet")
	case cluster == nil:
		return wait(infrav1.MachineReasonWaitingForCluster, "Machine %s names no existing Cluster (label %s)", machine.Name, clusterv1.ClusterNameLabel)
	case !ptr.Deref(cluster.Status.Initialization.InfrastructureProvisioned, false):
		return wait(infrav1.MachineReasonWaitingForClusterInfrastructure, "Cluster %s's infrastructure is not provisioned yet", cluster.Name)
	case machine.Spec.Bootstrap.DataSecretName == nil:
		return wait(infrav1.MachineReasonWaitingForBootstrapData, "Machine %s has no bootstrap data Secret yet", machine.Name)
	}
	data, reason, err := r.bootstrapData(ctx, m.Namespace, *machine.Spec.Bootstrap.DataSecretName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if reason != nil {
		// Nothing watches Secrets (no cache of every Secret): look again for the Secret, or its
		// fix, a little later.
		_, _ = wait(reason.reason, "%s", reason.message)
		return ctrl.Result{RequeueAfter: bootstrapDataRecheck}, nil
	}
	label, err := r.failureDomainLabel(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	if taken, err := r.ensureIgnitionSecret(ctx, m, cluster.Name, data); err != nil || taken {
		if err != nil {
			return ctrl.Result{}, err
		}
		_, _ = wait(infrav1.MachineReasonClaimNameTaken, "Secret %s/%s%s exists and is not this machine's (no label %s=%s): rename or delete it",
			m.Namespace, m.Name, bootstrapSecretSuffix, infrav1.LabelMachine, m.Name)
		return ctrl.Result{RequeueAfter: bootstrapDataRecheck}, nil // nothing watches Secrets
	}
	claim, taken, err := r.ensureClaim(ctx, m, machine, cluster.Name, label)
	if err != nil {
		return ctrl.Result{}, err
	}
	if taken {
		return wait(infrav1.MachineReasonClaimNameTaken, "ServerClaim %s/%s exists and is not this machine's (no label %s=%s): rename or delete it", m.Namespace, m.Name, infrav1.LabelMachine, m.Name)
	}
	return r.observeClaim(ctx, m, claim, label)
}

// bootstrapDataRecheck is how soon a machine whose bootstrap data Secret is missing or invalid
// looks again.
const bootstrapDataRecheck = 10 * time.Second

// waitReason is why a machine cannot go on, for its Ready condition.
type waitReason struct{ reason, message string }

// bootstrapData reads a Machine's bootstrap data: the "value" of its Secret, which must fit
// on a config drive.
func (r *MachineReconciler) bootstrapData(ctx context.Context, namespace, name string) ([]byte, *waitReason, error) {
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &waitReason{infrav1.MachineReasonWaitingForBootstrapData, fmt.Sprintf("bootstrap data Secret %s does not exist yet", name)}, nil
		}
		return nil, nil, fmt.Errorf("reading bootstrap data Secret %s: %w", name, err)
	}
	data, ok := s.Data[infrav1.BootstrapDataKey]
	switch {
	case !ok || len(data) == 0:
		return nil, &waitReason{infrav1.MachineReasonBootstrapDataInvalid, fmt.Sprintf("bootstrap data Secret %s has no %q key", name, infrav1.BootstrapDataKey)}, nil
	case len(data) > metalv1alpha1.MaxUserDataBytes:
		return nil, &waitReason{infrav1.MachineReasonBootstrapDataInvalid, fmt.Sprintf("bootstrap data Secret %s holds %d bytes, more than the %d a config drive takes", name, len(data), metalv1alpha1.MaxUserDataBytes)}, nil
	}
	return data, nil, nil
}

// ensureIgnitionSecret keeps <machine>-bootstrap-data, the claim's ignition Secret, equal to
// the bootstrap data, byte for byte; taken when a Secret of that name is someone else's.
func (r *MachineReconciler) ensureIgnitionSecret(ctx context.Context, m *infrav1.IronfleetMachine, clusterName string, data []byte) (taken bool, err error) {
	name := m.Name + bootstrapSecretSuffix
	var s corev1.Secret
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: m.Namespace, Name: name}, &s)
	switch {
	case apierrors.IsNotFound(err):
		s = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: name, Labels: ownLabels(m, clusterName)},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{metalv1alpha1.IgnitionSecretKey: data},
		}
		if err := r.Client.Create(ctx, &s); err != nil {
			return false, fmt.Errorf("creating ignition Secret %s: %w", name, err)
		}
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading ignition Secret %s: %w", name, err)
	case s.Labels[infrav1.LabelMachine] != m.Name:
		return true, nil
	case bytes.Equal(s.Data[metalv1alpha1.IgnitionSecretKey], data):
		return false, nil
	}
	s.Data = map[string][]byte{metalv1alpha1.IgnitionSecretKey: data}
	if err := r.Client.Update(ctx, &s); err != nil {
		return false, fmt.Errorf("updating ignition Secret %s: %w", name, err)
	}
	return false, nil
}

// ensureClaim returns the machine's claim, made if missing; taken when a claim of its name is
// someone else's.
func (r *MachineReconciler) ensureClaim(ctx context.Context, m *infrav1.IronfleetMachine, machine *clusterv1.Machine, clusterName, failureDomainLabel string) (*metalv1alpha1.ServerClaim, bool, error) {
	var claim metalv1alpha1.ServerClaim
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), &claim)
	switch {
	case err == nil:
		return &claim, claim.Labels[infrav1.LabelMachine] != m.Name, nil
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("reading ServerClaim %s: %w", m.Name, err)
	}
	claim = metalv1alpha1.ServerClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, Labels: ownLabels(m, clusterName)},
		Spec: metalv1alpha1.ServerClaimSpec{
			ServerSelector:    selector(m, machine, failureDomainLabel),
			MinCPUCores:       m.Spec.MinCPUCores,
			MinMemory:         m.Spec.MinMemory,
			MinTotalDisk:      m.Spec.MinTotalDisk,
			Power:             metalv1alpha1.PowerOn,
			Image:             m.Spec.Image,
			ImageChecksum:     m.Spec.ImageChecksum,
			RootDeviceHints:   m.Spec.RootDeviceHints,
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: m.Name + bootstrapSecretSuffix},
		},
	}
	if err := r.Client.Create(ctx, &claim); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, false, fmt.Errorf("ServerClaim %s appeared meanwhile: %w", m.Name, err)
		}
		return nil, false, fmt.Errorf("creating ServerClaim %s: %w", m.Name, err)
	}
	r.Events.Eventf(m, &claim, corev1.EventTypeNormal, infrav1.MachineReasonClaimCreated, "Claim", "ServerClaim %s asks for a server with image %s", claim.Name, claim.Spec.Image)
	return &claim, false, nil
}

// selector is the machine's server selector, narrowed to its Machine's failure domain: the
// Servers whose failure-domain label (the IronfleetCluster's) has that value.
func selector(m *infrav1.IronfleetMachine, machine *clusterv1.Machine, failureDomainLabel string) *metalv1alpha1.ServerSelector {
	sel := m.Spec.ServerSelector.DeepCopy()
	if machine.Spec.FailureDomain == "" {
		return sel
	}
	if sel == nil {
		sel = &metalv1alpha1.ServerSelector{}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metalv1alpha1.ServerSelectorRequirement{
		Key: failureDomainLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{machine.Spec.FailureDomain},
	})
	return sel
}

// failureDomainLabel is the Server label of the cluster's IronfleetCluster.
func (r *MachineReconciler) failureDomainLabel(ctx context.Context, cluster *clusterv1.Cluster) (string, error) {
	ref := cluster.Spec.InfrastructureRef
	if ref.Kind != "IronfleetCluster" || ref.Name == "" {
		return infrav1.DefaultFailureDomainLabel, nil
	}
	var ic infrav1.IronfleetCluster
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: ref.Name}, &ic); err != nil {
		return "", fmt.Errorf("reading IronfleetCluster %s: %w", ref.Name, err)
	}
	if ic.Spec.FailureDomainLabel == "" {
		return infrav1.DefaultFailureDomainLabel, nil
	}
	return ic.Spec.FailureDomainLabel, nil
}

// observeClaim turns the claim's progress into the machine's: its reasons pass through until
// the server runs the image; then providerID, addresses and failure domain.
func (r *MachineReconciler) observeClaim(ctx context.Context, m *infrav1.IronfleetMachine, claim *metalv1alpha1.ServerClaim, failureDomainLabel string) (ctrl.Result, error) {
	notReady := func(reason, message string) (ctrl.Result, error) {
		setMachineReady(m, reason, message)
		return ctrl.Result{}, nil
	}
	if claim.Status.Phase != metalv1alpha1.ClaimPhaseBound || claim.Status.ServerRef == nil {
		reason, message := infrav1.MachineReasonWaitingForServer, fmt.Sprintf("ServerClaim %s holds no server yet", claim.Name)
		if c := meta.FindStatusCondition(claim.Status.Conditions, metalv1alpha1.ConditionBound); c != nil && c.Status != metav1.ConditionTrue {
			reason, message = c.Reason, fmt.Sprintf("ServerClaim %s: %s", claim.Name, c.Message)
		}
		return notReady(reason, message)
	}
	server := claim.Status.ServerRef.Name
	if m.Spec.ProviderID != "" && m.Spec.ProviderID != infrav1.ProviderIDPrefix+server {
		return notReady(infrav1.MachineReasonServerReplaced, fmt.Sprintf("ServerClaim %s is bound to %s now, not to the server of %s: replace the Machine", claim.Name, server, m.Spec.ProviderID))
	}
	m.Status.ServerRef = &metalv1alpha1.LocalObjectReference{Name: server}
	if !meta.IsStatusConditionTrue(claim.Status.Conditions, metalv1alpha1.ConditionProvisioned) || !meta.IsStatusConditionTrue(claim.Status.Conditions, metalv1alpha1.ConditionReady) {
		reason, message := infrav1.MachineReasonWaitingForInstall, "waiting for the image to be installed"
		if c := meta.FindStatusCondition(claim.Status.Conditions, metalv1alpha1.ConditionReady); c != nil {
			reason, message = c.Reason, c.Message
		}
		return notReady(reason, fmt.Sprintf("ServerClaim %s on server %s: %s", claim.Name, server, message))
	}
	var s metalv1alpha1.Server
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: server}, &s); err != nil {
		return ctrl.Result{}, fmt.Errorf("reading Server %s: %w", server, err)
	}
	if m.Spec.ProviderID == "" {
		before := m.DeepCopy()
		m.Spec.ProviderID = infrav1.ProviderIDPrefix + server
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, fmt.Errorf("setting providerID: %w", err)
		}
		r.Events.Eventf(m, &s, corev1.EventTypeNormal, infrav1.MachineReasonProvisioned, "Provision", "server %s runs image %s", server, m.Spec.Image)
	}
	m.Status.Addresses = addresses(m.Name, &s)
	m.Status.FailureDomain = s.Labels[failureDomainLabel]
	m.Status.Initialization.Provisioned = ptr.To(true)
	setMachineReady(m, infrav1.MachineReasonProvisioned,
		fmt.Sprintf("server %s runs image %s with the Machine's bootstrap data", server, m.Spec.Image))
	return ctrl.Result{}, nil
}

// addresses are the machine's name as its hostname (the claim's name, which the config drive
// gives the OS) and every IP its NICs had when the probe ran, as internal addresses.
func addresses(hostname string, s *metalv1alpha1.Server) clusterv1.MachineAddresses {
	out := clusterv1.MachineAddresses{{Type: clusterv1.MachineHostName, Address: hostname}}
	if s.Status.Inventory == nil {
		return out
	}
	for _, nic := range s.Status.Inventory.NetworkInterfaces {
		for _, ip := range nic.IPAddresses {
			if ip = strings.TrimSpace(strings.SplitN(ip, "/", 2)[0]); ip != "" {
				out = append(out, clusterv1.MachineAddress{Type: clusterv1.MachineInternalIP, Address: ip})
			}
		}
	}
	return out
}

// delete releases the claim (the operator wipes and pools its server) and waits for it to go
// before letting the machine go.
func (r *MachineReconciler) delete(ctx context.Context, m, original *infrav1.IronfleetMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, infrav1.MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	var claim metalv1alpha1.ServerClaim
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), &claim)
	switch {
	case err == nil && claim.Labels[infrav1.LabelMachine] == m.Name:
		if claim.DeletionTimestamp.IsZero() {
			if err := r.Client.Delete(ctx, &claim); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, fmt.Errorf("deleting ServerClaim %s: %w", claim.Name, err)
			}
			r.Events.Eventf(m, &claim, corev1.EventTypeNormal, infrav1.MachineReasonDeleting, "Release", "ServerClaim %s deleted: its server is wiped and returned to the pool", claim.Name)
		}
		setMachineReady(m, infrav1.MachineReasonDeleting,
			fmt.Sprintf("waiting for ServerClaim %s to release its server", claim.Name))
		// The claim's deletion wakes this machine (the claim watch).
		return r.finish(ctx, m, original, ctrl.Result{}, nil)
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("reading ServerClaim %s: %w", m.Name, err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name + bootstrapSecretSuffix}}
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(secret), &s); err == nil && s.Labels[infrav1.LabelMachine] == m.Name {
		if err := r.Client.Delete(ctx, &s); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("deleting ignition Secret %s: %w", s.Name, err)
		}
	} else if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading ignition Secret %s: %w", secret.Name, err)
	}
	before := m.DeepCopy()
	controllerutil.RemoveFinalizer(m, infrav1.MachineFinalizer)
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing the finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// finish writes the status once, when it changed.
func (r *MachineReconciler) finish(ctx context.Context, m, original *infrav1.IronfleetMachine, result ctrl.Result, err error) (ctrl.Result, error) {
	m.Status.ObservedGeneration = m.Generation
	if equality.Semantic.DeepEqual(m.Status, original.Status) {
		return result, err
	}
	if perr := r.Client.Status().Patch(ctx, m, client.MergeFrom(original)); perr != nil && !apierrors.IsNotFound(perr) {
		return ctrl.Result{}, errors.Join(err, fmt.Errorf("patching status: %w", perr))
	}
	return result, err
}

// ownLabels mark a claim or Secret as a machine's, and of which cluster.
func ownLabels(m *infrav1.IronfleetMachine, clusterName string) map[string]string {
	return map[string]string{infrav1.LabelMachine: m.Name, clusterv1.ClusterNameLabel: clusterName}
}

// setMachineReady is the one place the machine's Ready condition is set: True once its server
// runs the image with the Machine's bootstrap data (Provisioned); False with what it waits for
// (a prerequisite, the claim's progress) or that it is being deleted.
func setMachineReady(m *infrav1.IronfleetMachine, reason, message string) {
	status.SetCondition(&m.Status.Conditions, m.Generation, infrav1.ConditionReady,
		status.BoolStatus(reason == infrav1.MachineReasonProvisioned), reason, message)
}
