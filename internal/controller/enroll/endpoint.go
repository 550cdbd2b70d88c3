// Package enroll reconciles what brings a machine in: Endpoints (matched against the MAC-prefix
// database, default credentials tried), BMCs (polled over Redfish or IPMI; a Server per system,
// its power and identity kept current) and BMCSecrets. No reconciler logs, records or writes a
// credential.
package enroll

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
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/settings"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/macdb"
)

// EndpointReconciler matches an Endpoint's MAC against the MAC-prefix database and, on a match,
// creates the BMC and BMCSecret for it with the first default credential that authenticates.
type EndpointReconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	MACDB    *macdb.DB
	Connect  bmc.Connector
	Settings settings.Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile matches one Endpoint.
func (r *EndpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep metalv1alpha1.Endpoint
	if err := r.Client.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.delete(ctx, &ep)
	}
	if controllerutil.AddFinalizer(&ep, metalv1alpha1.EndpointFinalizer) {
		if err := r.Client.Update(ctx, &ep); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	original := ep.DeepCopy()
	result, err := r.reconcile(ctx, &ep)
	ep.Status.ObservedGeneration = ep.Generation
	return status.Finish(ctx, r.Client, &ep, original, result, err)
}

func (r *EndpointReconciler) reconcile(ctx context.Context, ep *metalv1alpha1.Endpoint) (ctrl.Result, error) {
	entry, ok := r.MACDB.Lookup(ep.Spec.MACAddress)
	if !ok {
		ep.Status.MACPrefix, ep.Status.Manufacturer, ep.Status.Protocol, ep.Status.Scheme, ep.Status.Port = "", "", "", "", 0
		status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionMatched, metav1.ConditionFalse, metalv1alpha1.EndpointReasonNoMatchingPrefix,
			fmt.Sprintf("MAC %s matches none of the %d prefixes in the MAC-prefix database; no BMC was created", ep.Spec.MACAddress, r.MACDB.Len()))
		return ctrl.Result{}, nil
	}
	ep.Status.MACPrefix, ep.Status.Manufacturer = entry.MACPrefix, entry.Manufacturer
	ep.Status.Protocol, ep.Status.Scheme, ep.Status.Port = string(entry.Protocol), entry.Scheme, entry.Port
	status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionMatched, metav1.ConditionTrue, metalv1alpha1.EndpointReasonMatched,
		fmt.Sprintf("MAC prefix %s: %s, %s", entry.MACPrefix, entry.Manufacturer, entry.Protocol))

	if ep.Spec.IP == "" {
		status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, metalv1alpha1.EndpointReasonNoIP, "waiting for spec.ip to reach the BMC")
		return ctrl.Result{}, nil
	}

	var existing metalv1alpha1.BMC
	err := r.Client.Get(ctx, client.ObjectKey{Name: ep.Name}, &existing)
	if err == nil {
		if metav1.IsControlledBy(&existing, ep) {
			if err := r.restoreSecret(ctx, ep, entry, existing.Spec.BMCSecretRef.Name); err != nil {
				return ctrl.Result{}, err
			}
		}
		ep.Status.BMCRef = &metalv1alpha1.LocalObjectReference{Name: existing.Name}
		status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, metalv1alpha1.EndpointReasonBMCCreated, "BMC "+existing.Name+" manages this endpoint")
		return ctrl.Result{}, nil
	}
	if !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}

	index, err := r.findCredential(ctx, ep, entry)
	if err != nil {
		reason := bmc.Reason(err)
		if reason == metalv1alpha1.BMCReasonAuthenticationFailed {
			reason = metalv1alpha1.EndpointReasonNoCredential
		}
		status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, reason, err.Error())
		// Returned so that the workqueue retries with exponential backoff.
		return ctrl.Result{}, err
	}
	if err := r.createBMC(ctx, ep, entry, index); err != nil {
		return ctrl.Result{}, err
	}
	ep.Status.BMCRef = &metalv1alpha1.LocalObjectReference{Name: ep.Name}
	status.SetCondition(&ep.Status.Conditions, ep.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, metalv1alpha1.EndpointReasonBMCCreated,
		fmt.Sprintf("BMC %s created with default credential #%d of prefix %s", ep.Name, index+1, entry.MACPrefix))
	r.Events.Eventf(ep, nil, corev1.EventTypeNormal, metalv1alpha1.EndpointReasonBMCCreated, "CreateBMC",
		"created BMC %s (%s) with default credential #%d", ep.Name, entry.Manufacturer, index+1)
	return ctrl.Result{}, nil
}

// findCredential tries each default credential in turn and returns the index of the first that
// authenticates, over Redfish or IPMI as the entry says (an IPMI credential is tried with one
// RMCP+ session: open, then closed).
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
		fmt.Errorf("none of the %d default credentials for prefix %s authenticated (add the right one to the --mac-prefixes-file database, or create a BMCSecret and a BMC for this address yourself): %w", len(entry.DefaultCredentials), entry.MACPrefix, lastErr))
}

// bmcSecret is the BMCSecret the Endpoint makes for its BMC, with the entry's default
// credential index. It is made with the finalizer the BMC it is for would have given it
// (BMCSecretReconciler): one write, not two; should that BMC never be made, the finalizer
// goes when the BMCSecret is deleted.
func (r *EndpointReconciler) bmcSecret(ep *metalv1alpha1.Endpoint, entry macdb.Entry, index int) (*metalv1alpha1.BMCSecret, error) {
	cred := entry.DefaultCredentials[index]
	secret := &metalv1alpha1.BMCSecret{ObjectMeta: metav1.ObjectMeta{
		Name:        ep.Name,
		Finalizers:  []string{metalv1alpha1.BMCSecretFinalizer},
		Annotations: map[string]string{metalv1alpha1.AnnotationCredentialIndex: fmt.Sprint(index)},
	}, Spec: metalv1alpha1.BMCSecretSpec{Username: cred.Username, Password: cred.Password}}
	return secret, controllerutil.SetControllerReference(ep, secret, r.Client.Scheme())
}

// restoreSecret makes again the BMCSecret of the BMC the Endpoint made, when it is gone: the
// garbage collector can take the one an earlier Endpoint of this name left just as this one
// takes it over, and one deleted before its BMC was first seen is not kept (BMCSecretFinalizer).
// Without it the BMC, and the wipes of its servers, would wait for credentials for ever.
func (r *EndpointReconciler) restoreSecret(ctx context.Context, ep *metalv1alpha1.Endpoint, entry macdb.Entry, name string) error {
	if name != ep.Name {
		return nil // not one the Endpoint made
	}
	err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &metalv1alpha1.BMCSecret{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	index, err := r.findCredential(ctx, ep, entry)
	if err != nil {
		return fmt.Errorf("finding the credential to make BMCSecret %s again: %w", name, err)
	}
	secret, err := r.bmcSecret(ep, entry, index)
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		return client.IgnoreAlreadyExists(err)
	}
	r.Events.Eventf(ep, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonBMCSecretRestored, "CreateBMCSecret",
		"BMCSecret %s of BMC %s was gone: made again with default credential #%d", name, ep.Name, index+1)
	return nil
}

func (r *EndpointReconciler) createBMC(ctx context.Context, ep *metalv1alpha1.Endpoint, entry macdb.Entry, index int) error {
	secret, err := r.bmcSecret(ep, entry, index)
	if err != nil {
		return err
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating BMCSecret %s: %w", secret.Name, err)
		}
		if err := r.adoptSecret(ctx, ep, secret.Name); err != nil {
			return err
		}
	}
	// Made with its finalizer, so the BMC reconciler need not write it again to add it.
	b := &metalv1alpha1.BMC{ObjectMeta: metav1.ObjectMeta{Name: ep.Name, Labels: ep.Labels, Finalizers: []string{metalv1alpha1.BMCFinalizer}}, Spec: metalv1alpha1.BMCSpec{
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

// adoptSecret takes over the BMCSecret an earlier Endpoint of this name made (deleted, then made
// again: the admin enrols the machine again): it is this Endpoint's now, or the garbage
// collector would delete it, its owner gone, under the BMC about to use it. One on its way out
// is waited for, and made anew.
func (r *EndpointReconciler) adoptSecret(ctx context.Context, ep *metalv1alpha1.Endpoint, name string) error {
	var have metalv1alpha1.BMCSecret
	if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &have); err != nil {
		return fmt.Errorf("reading BMCSecret %s: %w", name, err) // not cached yet: again
	}
	if !have.DeletionTimestamp.IsZero() {
		return fmt.Errorf("BMCSecret %s of an earlier Endpoint %s is being deleted: waiting for it to go", name, ep.Name)
	}
	owner := metav1.GetControllerOf(&have)
	if owner == nil || owner.Kind != "Endpoint" || owner.Name != ep.Name || owner.UID == ep.UID {
		return nil // this Endpoint's, or someone else's to look after
	}
	before := have.DeepCopy()
	have.OwnerReferences = nil
	for _, ref := range before.OwnerReferences {
		if ref.UID != owner.UID {
			have.OwnerReferences = append(have.OwnerReferences, ref)
		}
	}
	if err := controllerutil.SetControllerReference(ep, &have, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, &have, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("taking over BMCSecret %s: %w", name, err)
	}
	return nil
}

// delete deletes the BMC the Endpoint made and lets the Endpoint go once it is gone
// (EndpointFinalizer).
func (r *EndpointReconciler) delete(ctx context.Context, ep *metalv1alpha1.Endpoint) error {
	if !controllerutil.ContainsFinalizer(ep, metalv1alpha1.EndpointFinalizer) {
		return nil
	}
	var b metalv1alpha1.BMC
	err := r.Client.Get(ctx, client.ObjectKey{Name: ep.Name}, &b)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err == nil && metav1.IsControlledBy(&b, ep) {
		if b.DeletionTimestamp.IsZero() {
			uid := b.UID
			if err := r.Client.Delete(ctx, &b, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting BMC %s: %w", b.Name, err)
			}
			r.Events.Eventf(ep, &b, corev1.EventTypeNormal, metalv1alpha1.ReasonDeletingBMC, "Delete",
				"deleted BMC %s; the Endpoint goes once it is gone (after its servers' wipes, which need this address)", b.Name)
		}
		return nil // its deletion brings the Endpoint back
	}
	controllerutil.RemoveFinalizer(ep, metalv1alpha1.EndpointFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, ep))
}

// SetupWithManager registers the reconciler.
func (r *EndpointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("endpoint").
		For(&metalv1alpha1.Endpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&metalv1alpha1.BMC{}, builder.WithPredicates(deletedOnly())).
		Owns(&metalv1alpha1.BMCSecret{}, builder.WithPredicates(deletedOnly())).
		WithOptions(r.Settings.ControllerOptions("endpoint")).
		Complete(r)
}

// deletedOnly passes only delete events: used to re-create owned objects someone removed,
// without waking the owner for every status change of its children.
func deletedOnly() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
	}
}
