package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/macdb"
)

// Reasons of an Endpoint's conditions.
const (
	EndpointReasonMatched          = "Matched"
	EndpointReasonNoMatchingPrefix = "NoMatchingPrefix"
	EndpointReasonBMCCreated       = "BMCCreated"
	EndpointReasonNoIP             = "NoIPAddress"
	EndpointReasonNoCredential     = "NoDefaultCredentialAuthenticated"

	// AnnotationCredentialIndex on a BMCSecret records which of the MAC-prefix entry's default
	// credentials authenticated.
	AnnotationCredentialIndex = "metal.ironfleet.dev/default-credential-index"
)

// EndpointReconciler matches an Endpoint's MAC against the MAC-prefix database and, on a match,
// creates the BMC and BMCSecret for it with the first default credential that authenticates.
type EndpointReconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	MACDB    *macdb.DB
	Connect  bmc.Connector
	Settings Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile matches one Endpoint.
func (r *EndpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep metalv1alpha1.Endpoint
	if err := r.Client.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	original := ep.DeepCopy()
	result, err := r.reconcile(ctx, &ep)
	ep.Status.ObservedGeneration = ep.Generation
	return finishWithStatus(ctx, r.Client, &ep, original, result, err)
}

func (r *EndpointReconciler) reconcile(ctx context.Context, ep *metalv1alpha1.Endpoint) (ctrl.Result, error) {
	entry, ok := r.MACDB.Lookup(ep.Spec.MACAddress)
	if !ok {
		ep.Status.MACPrefix, ep.Status.Manufacturer, ep.Status.Protocol, ep.Status.Scheme, ep.Status.Port = "", "", "", "", 0
		setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionMatched, metav1.ConditionFalse, EndpointReasonNoMatchingPrefix,
			fmt.Sprintf("MAC %s matches none of the %d prefixes in the MAC-prefix database; no BMC was created", ep.Spec.MACAddress, r.MACDB.Len()))
		return ctrl.Result{}, nil
	}
	ep.Status.MACPrefix, ep.Status.Manufacturer = entry.MACPrefix, entry.Manufacturer
	ep.Status.Protocol, ep.Status.Scheme, ep.Status.Port = string(entry.Protocol), entry.Scheme, entry.Port
	setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionMatched, metav1.ConditionTrue, EndpointReasonMatched,
		fmt.Sprintf("MAC prefix %s: %s, %s", entry.MACPrefix, entry.Manufacturer, entry.Protocol))

	if ep.Spec.IP == "" {
		setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, EndpointReasonNoIP, "waiting for spec.ip to reach the BMC")
		return ctrl.Result{}, nil
	}

	var existing metalv1alpha1.BMC
	err := r.Client.Get(ctx, client.ObjectKey{Name: ep.Name}, &existing)
	if err == nil {
		ep.Status.BMCRef = &metalv1alpha1.LocalObjectReference{Name: existing.Name}
		setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, EndpointReasonBMCCreated, "BMC "+existing.Name+" manages this endpoint")
		return ctrl.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}

	index, err := r.findCredential(ctx, ep, entry)
	if err != nil {
		reason := bmc.Reason(err)
		if reason == metalv1alpha1.BMCReasonAuthenticationFailed {
			reason = EndpointReasonNoCredential
		}
		setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
		// Returned so that the workqueue retries with exponential backoff.
		return ctrl.Result{}, err
	}
	if err := r.createBMC(ctx, ep, entry, index); err != nil {
		return ctrl.Result{}, err
	}
	ep.Status.BMCRef = &metalv1alpha1.LocalObjectReference{Name: ep.Name}
	setCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, EndpointReasonBMCCreated,
		fmt.Sprintf("BMC %s created with default credential #%d of prefix %s", ep.Name, index+1, entry.MACPrefix))
	r.Events.Eventf(ep, nil, corev1.EventTypeNormal, EndpointReasonBMCCreated, "CreateBMC",
		"created BMC %s (%s) with default credential #%d", ep.Name, entry.Manufacturer, index+1)
	return ctrl.Result{}, nil
}

// findCredential tries each default credential in turn and returns the index of the first that
// authenticates. IPMI BMCs cannot be probed yet: the first credential is used, and the BMC will
// report UnsupportedProtocol.
func (r *EndpointReconciler) findCredential(ctx context.Context, ep *metalv1alpha1.Endpoint, entry macdb.Entry) (int, error) {
	addr, err := bmc.ParseAddress(entry.Address(ep.Spec.IP))
	if err != nil {
		return 0, nil // the BMC reconciler reports the address problem on the BMC itself
	}
	logger := log.FromContext(ctx)
	var lastErr error
	for i, cred := range entry.DefaultCredentials {
		c, err := r.Connect(ctx, bmc.Target{Address: addr, Credentials: bmc.Credentials(cred)})
		if err == nil {
			c.Close()
			return i, nil
		}
		lastErr = err
		if bmc.Reason(err) != metalv1alpha1.BMCReasonAuthenticationFailed {
			return 0, err // unreachable or broken: trying other passwords would not help
		}
		logger.V(1).Info("default credential refused", "index", i+1, "prefix", entry.MACPrefix)
	}
	return 0, bmc.Classify(metalv1alpha1.BMCReasonAuthenticationFailed,
		fmt.Errorf("none of the %d default credentials for prefix %s authenticated: %w", len(entry.DefaultCredentials), entry.MACPrefix, lastErr))
}

func (r *EndpointReconciler) createBMC(ctx context.Context, ep *metalv1alpha1.Endpoint, entry macdb.Entry, index int) error {
	cred := entry.DefaultCredentials[index]
	secret := &metalv1alpha1.BMCSecret{ObjectMeta: metav1.ObjectMeta{
		Name:        ep.Name,
		Annotations: map[string]string{AnnotationCredentialIndex: fmt.Sprint(index)},
	}, Spec: metalv1alpha1.BMCSecretSpec{Username: cred.Username, Password: cred.Password}}
	if err := controllerutil.SetControllerReference(ep, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating BMCSecret %s: %w", secret.Name, err)
	}
	// Made with its finalizer, so the BMC reconciler need not write it again to add it.
	b := &metalv1alpha1.BMC{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Labels: ep.Labels, Finalizers: []string{BMCFinalizer}}, Spec: metalv1alpha1.BMCSpec{
		EndpointRef:  &metalv1alpha1.LocalObjectReference{Name: ep.Name},
		BMCSecretRef: metalv1alpha1.LocalObjectReference{Name: secret.Name},
	}}
	if err := controllerutil.SetControllerReference(ep, b, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating BMC %s: %w", b.Name, err)
	}
	return nil
}

// SetupWithManager registers the reconciler.
func (r *EndpointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("endpoint").
		For(&metalv1alpha1.Endpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&metalv1alpha1.BMC{}, builder.WithPredicates(deletedOnly())).
		WithOptions(r.Settings.controllerOptions("endpoint")).
		Complete(r)
}
