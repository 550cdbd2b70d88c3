package capi

import (
	"context"
	"fmt"
	"net"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util"
	"sigs.k8s.io/cluster-api/util/annotations"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/ironfleet/ironfleet/apis/infrastructure/v1alpha1"
	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// ClusterReconciler makes an IronfleetCluster ready once its control plane endpoint is valid,
// and lists its failure domains: the values of its failure-domain label among Servers.
type ClusterReconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ironfleetclusters,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=infrastructure.cluster.x-k8s.io,resources=ironfleetclusters/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=clusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch

// Reconcile observes one IronfleetCluster.
func (r *ClusterReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ic infrav1.IronfleetCluster
	if err := r.Client.Get(ctx, req.NamespacedName, &ic); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	original := ic.DeepCopy()
	cluster, err := util.GetOwnerCluster(ctx, r.Client, ic.ObjectMeta)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("reading the owner Cluster: %w", err)
	}
	if cluster != nil && annotations.IsPaused(cluster, &ic) || annotations.HasPaused(&ic) {
		status.SetCondition(&ic.Status.Conditions, ic.Generation, infrav1.ConditionPaused, metav1.ConditionTrue, infrav1.ReasonPaused,
			"reconciliation is paused (the Cluster's spec.paused or the cluster.x-k8s.io/paused annotation)")
		return ctrl.Result{}, r.finish(ctx, &ic, original)
	}
	status.SetCondition(&ic.Status.Conditions, ic.Generation, infrav1.ConditionPaused, metav1.ConditionFalse, infrav1.ReasonNotPaused, "")
	if !ic.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // nothing of the cluster's own to clean up: machines release their servers
	}

	domains, err := r.failureDomains(ctx, labelOf(&ic))
	if err != nil {
		return ctrl.Result{}, err
	}
	ic.Status.FailureDomains = domains
	if problem := endpointProblem(ic.Spec.ControlPlaneEndpoint); problem != "" {
		status.SetCondition(&ic.Status.Conditions, ic.Generation, infrav1.ConditionReady, metav1.ConditionFalse, infrav1.ClusterReasonControlPlaneEndpointMissing,
			problem+": set it to the VIP or DNS name in front of the control plane")
	} else {
		ic.Status.Initialization.Provisioned = ptr.To(true)
		status.SetCondition(&ic.Status.Conditions, ic.Generation, infrav1.ConditionReady, metav1.ConditionTrue, infrav1.ClusterReasonProvisioned,
			fmt.Sprintf("control plane endpoint %s, %d failure domains", ic.Spec.ControlPlaneEndpoint.String(), len(domains)))
	}
	return ctrl.Result{}, r.finish(ctx, &ic, original)
}

// endpointProblem says what is wrong with a control plane endpoint, or "".
func endpointProblem(ep clusterv1.APIEndpoint) string {
	switch {
	case ep.Host == "":
		return "spec.controlPlaneEndpoint.host is not set"
	case ep.Port < 1 || ep.Port > 65535:
		return fmt.Sprintf("spec.controlPlaneEndpoint.port %d is not a port (1–65535)", ep.Port)
	case net.ParseIP(ep.Host) == nil && len(validation.IsDNS1123Subdomain(ep.Host)) > 0:
		return fmt.Sprintf("spec.controlPlaneEndpoint.host %q is neither an IP address nor a DNS name", ep.Host)
	}
	return ""
}

func labelOf(ic *infrav1.IronfleetCluster) string {
	if ic.Spec.FailureDomainLabel == "" {
		return infrav1.DefaultFailureDomainLabel
	}
	return ic.Spec.FailureDomainLabel
}

// failureDomains are the values of label among Servers, sorted, each fit for control planes.
// Only Servers' metadata is read (and cached), never their inventories.
func (r *ClusterReconciler) failureDomains(ctx context.Context, label string) ([]clusterv1.FailureDomain, error) {
	servers := &metav1.PartialObjectMetadataList{}
	servers.SetGroupVersionKind(metalv1alpha1.GroupVersion.WithKind("ServerList"))
	if err := r.Client.List(ctx, servers, client.HasLabels{label}); err != nil {
		return nil, fmt.Errorf("listing Servers' %s labels: %w", label, err)
	}
	var names []string
	for _, s := range servers.Items {
		if v := s.Labels[label]; v != "" && !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	slices.Sort(names)
	if len(names) > 100 {
		names = names[:100] // the contract's bound
	}
	var out []clusterv1.FailureDomain
	for _, n := range names {
		out = append(out, clusterv1.FailureDomain{Name: n, ControlPlane: ptr.To(true)})
	}
	return out, nil
}

func (r *ClusterReconciler) finish(ctx context.Context, ic, original *infrav1.IronfleetCluster) error {
	ic.Status.ObservedGeneration = ic.Generation
	if equality.Semantic.DeepEqual(ic.Status, original.Status) {
		return nil
	}
	if err := r.Client.Status().Patch(ctx, ic, client.MergeFrom(original)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status: %w", err)
	}
	return nil
}

// SetupWithManager watches IronfleetClusters, their Clusters (pausing) and Servers' labels
// (failure domains), the last as metadata only.
func (r *ClusterReconciler) SetupWithManager(mgr ctrl.Manager) error {
	server := &metav1.PartialObjectMetadata{}
	server.SetGroupVersionKind(metalv1alpha1.GroupVersion.WithKind("Server"))
	labelsChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&infrav1.IronfleetCluster{}).
		Named("ironfleetcluster").
		Watches(&clusterv1.Cluster{}, handler.EnqueueRequestsFromMapFunc(util.ClusterToInfrastructureMapFunc(context.Background(),
			infrav1.GroupVersion.WithKind("IronfleetCluster"), mgr.GetClient(), &infrav1.IronfleetCluster{}))).
		WatchesMetadata(server, handler.EnqueueRequestsFromMapFunc(r.allClusters), builder.WithPredicates(labelsChanged)).
		Complete(r)
}

// allClusters wakes every IronfleetCluster: a Server's labels may add or remove a failure
// domain of any of them.
func (r *ClusterReconciler) allClusters(ctx context.Context, _ client.Object) []reconcile.Request {
	var list infrav1.IronfleetClusterList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, ic := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ic.Namespace, Name: ic.Name}})
	}
	return out
}
