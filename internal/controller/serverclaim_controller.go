package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// ClaimFinalizer holds a claim until its server is released.
const ClaimFinalizer = "metal.ironfleet.dev/claim"

// Field indexes: servers by the claim holding them; bindable servers; claims still waiting.
const (
	indexServerByClaim  = "spec.serverClaimRef"
	indexServerBindable = "bindable"
	indexClaimPending   = "pending"
)

// Reasons of a claim's conditions.
const (
	ReasonBindConflict     = "BindConflict"
	ReasonServerLost       = "ServerLost"
	ReasonProvisioning     = "Provisioning"
	ReasonServerReady      = "ServerReady"
	ReasonWaitingForServer = "WaitingForServer"
	// ReasonStaleBootConfiguration: the claim's boot configuration was for a server it does not
	// hold, and was deleted.
	ReasonStaleBootConfiguration = "StaleBootConfiguration"
)

// ServerClaimReconciler binds claims to servers, asks the boot service for their image, and
// releases the server when the claim is deleted.
//
// Binding is two optimistic-concurrency writes: the claim records which server it is about to
// take (its intent), then the server records its claim. A stale read of the claim fails at the
// first write, a server someone else took fails at the second: two claims never hold one
// server, and one claim never holds two.
type ServerClaimReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Events    events.EventRecorder
	Settings  Settings
	// BootOperator labels the boot configurations of claims' images (ProbeBoot.BootOperator).
	BootOperator string
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverclaims/finalizers,verbs=update
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverbootconfigurations,verbs=get;list;watch;create;update;patch;delete

// Reconcile binds, provisions or releases one claim.
func (r *ServerClaimReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var claim metalv1alpha1.ServerClaim
	if err := r.Client.Get(ctx, req.NamespacedName, &claim); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.dropOrphanBootConfig(ctx, req.NamespacedName, nil)
		}
		return ctrl.Result{}, err
	}
	if err := r.dropOrphanBootConfig(ctx, req.NamespacedName, &claim); err != nil {
		return ctrl.Result{}, err
	}
	if !claim.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.release(ctx, &claim)
	}
	if controllerutil.AddFinalizer(&claim, ClaimFinalizer) {
		if err := r.Client.Update(ctx, &claim); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	original := claim.DeepCopy()
	result, err := r.sync(ctx, &claim)
	if errors.Is(err, errRetryBind) {
		return ctrl.Result{RequeueAfter: retryJitter()}, nil
	}
	claim.Status.ObservedGeneration = claim.Generation
	return finishWithStatus(ctx, r.Client, &claim, original, result, err)
}

// errRetryBind means a bind lost a race; the claim is tried again shortly, with another server.
var errRetryBind = errors.New("bind lost a race")

func retryJitter() time.Duration {
	return 20*time.Millisecond + time.Duration(time.Now().UnixNano()%int64(80*time.Millisecond))
}

func (r *ServerClaimReconciler) sync(ctx context.Context, claim *metalv1alpha1.ServerClaim) (ctrl.Result, error) {
	server, err := r.boundServer(ctx, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if server == nil {
		if server, err = r.bind(ctx, claim); err != nil || server == nil {
			if err == nil {
				err = r.dropStrayBootConfig(ctx, claim)
			}
			return ctrl.Result{}, err
		}
	}
	claim.Status.Phase = metalv1alpha1.ClaimPhaseBound
	claim.Status.ServerRef = &metalv1alpha1.LocalObjectReference{Name: server.Name}
	if claim.Status.BoundAt == nil {
		now := metav1.Now()
		claim.Status.BoundAt = &now
	}
	setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionBound, metav1.ConditionTrue, metalv1alpha1.ClaimReasonBound, "bound to server "+server.Name)
	return ctrl.Result{}, r.provision(ctx, claim, server)
}

// boundServer is the server that holds this claim, found from the server side (the truth).
func (r *ServerClaimReconciler) boundServer(ctx context.Context, claim *metalv1alpha1.ServerClaim) (*metalv1alpha1.Server, error) {
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerByClaim: claim.Namespace + "/" + claim.Name}); err != nil {
		return nil, err
	}
	for i := range servers.Items {
		if ref := servers.Items[i].Spec.ServerClaimRef; ref != nil && ref.UID == string(claim.UID) {
			return &servers.Items[i], nil
		}
	}
	// The claim says which server it took (or was about to): ask the API, not the cache, which
	// may not have seen that server's binding yet. Binding a second server here would give one
	// claim two.
	if ref := claim.Status.ServerRef; ref != nil {
		var server metalv1alpha1.Server
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: ref.Name}, &server)
		if err == nil && server.Spec.ServerClaimRef != nil && server.Spec.ServerClaimRef.UID == string(claim.UID) {
			return &server, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, nil
}

// bind takes a matching server: first the claim's intent, then the server's reference.
func (r *ServerClaimReconciler) bind(ctx context.Context, claim *metalv1alpha1.ServerClaim) (*metalv1alpha1.Server, error) {
	candidates, err := r.candidates(ctx, claim)
	if err != nil {
		return nil, err
	}
	if len(candidates) == 0 {
		claim.Status.Phase, claim.Status.ServerRef = metalv1alpha1.ClaimPhasePending, nil
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionBound, metav1.ConditionFalse, metalv1alpha1.ClaimReasonNoMatchingServer,
			"no Available server matches; the claim binds as soon as one does")
		return nil, nil
	}
	// Claims racing for the same servers start at different ones.
	h := fnv.New32a()
	h.Write([]byte(claim.UID))
	pick := candidates[int(h.Sum32()%uint32(len(candidates)))]

	before := claim.DeepCopy()
	claim.Status.Phase = metalv1alpha1.ClaimPhasePending
	claim.Status.ServerRef = &metalv1alpha1.LocalObjectReference{Name: pick.Name}
	if err := r.Client.Status().Patch(ctx, claim, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return nil, errRetryBind // we read a stale claim
		}
		return nil, err
	}

	server := pick.DeepCopy()
	server.Spec.ServerClaimRef = &metalv1alpha1.ObjectReference{Namespace: claim.Namespace, Name: claim.Name, UID: string(claim.UID)}
	if err := r.Client.Patch(ctx, server, client.MergeFromWithOptions(pick, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionBound, metav1.ConditionFalse, ReasonBindConflict,
				"server "+pick.Name+" was taken first; trying another")
			claim.Status.ServerRef = nil
			return nil, errRetryBindAfter(ctx, r.Client, claim)
		}
		return nil, err
	}
	r.Events.Eventf(claim, server, corev1.EventTypeNormal, metalv1alpha1.ClaimReasonBound, "Bind", "bound to server %s", server.Name)
	return server, nil
}

// errRetryBindAfter clears the claim's stale intent, then asks for a retry.
func errRetryBindAfter(ctx context.Context, c client.Client, claim *metalv1alpha1.ServerClaim) error {
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"status":{"serverRef":null}}`))
	if err := c.Status().Patch(ctx, claim, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return errRetryBind
}

// candidates are the bindable servers that match, in a stable order. They are the cache's own
// objects (a fleet of thousands is not copied per claim): read them, never change them.
func (r *ServerClaimReconciler) candidates(ctx context.Context, claim *metalv1alpha1.ServerClaim) ([]*metalv1alpha1.Server, error) {
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerBindable: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var out []*metalv1alpha1.Server
	for i := range servers.Items {
		s := &servers.Items[i]
		if !bindable(s) {
			continue
		}
		ok, err := matches(claim, s)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// provision asks the boot service for the claim's image and hands the server its boot
// configuration and power.
func (r *ServerClaimReconciler) provision(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) error {
	var bootRef *metalv1alpha1.ObjectReference
	if installsImages(r.BootOperator) {
		// The probe installs the image (the server's own boot): a configuration at the
		// claim's name is a stray (a create that landed late, or from before).
		if err := r.dropStrayBootConfig(ctx, claim); err != nil {
			return err
		}
	} else if claim.Spec.Image != "" {
		sbc, err := r.ensureBootConfig(ctx, claim, server)
		if err != nil {
			return err
		}
		bootRef = &metalv1alpha1.ObjectReference{Namespace: sbc.Namespace, Name: sbc.Name, UID: string(sbc.UID)}
	}
	power := orDefault(claim.Spec.Power, metalv1alpha1.PowerOn)
	if server.Spec.Power != power || !sameRef(server.Spec.BootConfigurationRef, bootRef) {
		err := patchHeldServer(ctx, r.Client, server, claim, func(spec *metalv1alpha1.ServerSpec) {
			spec.Power, spec.BootConfigurationRef = power, bootRef
		})
		if err != nil {
			return fmt.Errorf("handing server %s its boot configuration and power: %w", server.Name, err)
		}
	}
	switch {
	case server.Status.State != metalv1alpha1.ServerStateReserved:
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonWaitingForServer,
			fmt.Sprintf("server %s is %s", server.Name, server.Status.State))
	case claim.Spec.Image != "" && installsImages(r.BootOperator):
		showInstall(claim, server, power)
	case meta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionProvisioned) || claim.Spec.Image == "":
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim, power %s", server.Name, power))
	default:
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, ReasonProvisioning,
			"waiting for the boot service to serve "+claim.Spec.Image)
	}
	return nil
}

// installsImages says whether claims' images are installed to disk by Ironfleet's probe: with
// Ironfleet's boot operator. Another boot operator is handed a boot configuration to serve.
func installsImages(bootOperator string) bool {
	return bootOperator == "" || bootOperator == metalv1alpha1.BootOperatorIronfleet
}

// showInstall mirrors the server's install onto the claim: its Provisioned condition, its
// progress, and Ready once the image is installed.
func showInstall(claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server, power metalv1alpha1.Power) {
	prov := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionProvisioned)
	if prov == nil {
		prov = &metav1.Condition{Status: metav1.ConditionFalse, Reason: ReasonInstalling, Message: "waiting for the server to start installing " + claim.Spec.Image}
	}
	setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionProvisioned, prov.Status, prov.Reason, prov.Message)
	claim.Status.InstallProgress = ""
	if prov.Status == metav1.ConditionTrue {
		if last := server.Status.LastInstall; last != nil && last.Bytes > 0 {
			claim.Status.InstallProgress = metalv1alpha1.HumanBytes(last.Bytes) + " written"
		}
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionTrue, ReasonServerReady,
			fmt.Sprintf("server %s is reserved for this claim with %s installed, power %s", server.Name, claim.Spec.Image, power))
		return
	}
	if probe := meta.FindStatusCondition(server.Status.Conditions, conditionProbe); probe != nil && probe.Reason == ReasonInstalling && prov.Reason == ReasonInstalling {
		claim.Status.InstallProgress = probe.Message
	}
	setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionReady, metav1.ConditionFalse, prov.Reason, prov.Message)
}

func sameRef(a, b *metalv1alpha1.ObjectReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func (r *ServerClaimReconciler) ensureBootConfig(ctx context.Context, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	key := client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := r.Client.Get(ctx, key, &sbc)
	if err == nil {
		return r.usableBootConfig(ctx, &sbc, claim, server)
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name, Labels: bootConfigLabels(server, r.BootOperator)},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             claim.Spec.Image,
			IgnitionSecretRef: claim.Spec.IgnitionSecretRef,
			Purpose:           metalv1alpha1.BootPurposeProvisioning,
		},
	}
	if err := controllerutil.SetControllerReference(claim, &sbc, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Client.Create(ctx, &sbc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			if err := r.Client.Get(ctx, key, &sbc); err != nil {
				return nil, err
			}
			return r.usableBootConfig(ctx, &sbc, claim, server)
		}
		return nil, fmt.Errorf("creating boot configuration %s: %w", key, err)
	}
	return &sbc, nil
}

// usableBootConfig passes the boot configuration at the claim's name when it is this claim's and
// for this server. One of an earlier claim of the name is refused (dropOrphanBootConfig deletes
// it); one this claim made for a server it does not hold now (it lost that server, or the create
// landed after it had) is deleted, for it would boot the claim's image into that server. Either
// way the claim is tried again.
func (r *ServerClaimReconciler) usableBootConfig(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration, claim *metalv1alpha1.ServerClaim, server *metalv1alpha1.Server) (*metalv1alpha1.ServerBootConfiguration, error) {
	if !metav1.IsControlledBy(sbc, claim) {
		return nil, fmt.Errorf("boot configuration %s/%s belongs to an earlier claim of this name; waiting until it is deleted", sbc.Namespace, sbc.Name)
	}
	if sbc.Spec.ServerRef.Name == server.Name {
		return sbc, nil
	}
	if err := deleteBootConfig(ctx, r.Client, sbc); err != nil {
		return nil, err
	}
	r.Events.Eventf(claim, sbc, corev1.EventTypeWarning, ReasonStaleBootConfiguration, "Delete",
		"deleted boot configuration %s, made for server %s, which the claim does not hold", sbc.Name, sbc.Spec.ServerRef.Name)
	return nil, fmt.Errorf("boot configuration %s/%s was for server %s, which the claim does not hold: deleted, to make one for server %s",
		sbc.Namespace, sbc.Name, sbc.Spec.ServerRef.Name, server.Name)
}

// dropOrphanBootConfig deletes the boot configuration at a claim's name when the claim that
// made it is gone: live is the claim as cached, nil when the cache has none.
//
// release deletes it before the claim goes, but a create sent by a manager that was then killed
// can land after its successor released the claim. Garbage collection removes such a
// configuration in time, if the cluster runs it; until then the boot service would serve the
// old tenant's image to whatever network-boots that server next — the wipe of its next
// release, or the next tenant. The owner is looked up in the API before anything is deleted:
// the cache may not have seen a claim created a moment ago.
func (r *ServerClaimReconciler) dropOrphanBootConfig(ctx context.Context, key client.ObjectKey, live *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := r.Client.Get(ctx, key, &sbc); err != nil {
		return client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(&sbc)
	if owner == nil || owner.Kind != "ServerClaim" || owner.APIVersion != metalv1alpha1.GroupVersion.String() || !sbc.DeletionTimestamp.IsZero() {
		return nil
	}
	if live != nil && live.UID == owner.UID {
		return nil
	}
	var claim metalv1alpha1.ServerClaim
	err := r.APIReader.Get(ctx, key, &claim)
	if err == nil && claim.UID == owner.UID {
		return nil
	}
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := deleteBootConfig(ctx, r.Client, &sbc); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("deleted the boot configuration of a claim that is gone", "bootConfiguration", key.String(), "server", sbc.Spec.ServerRef.Name, "claimUID", owner.UID)
	return nil
}

// dropStrayBootConfig deletes the boot configuration of a claim that holds no server (it lost
// the server the configuration was made for, or a killed manager's create landed late): there is
// nothing it may boot.
func (r *ServerClaimReconciler) dropStrayBootConfig(ctx context.Context, claim *metalv1alpha1.ServerClaim) error {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := r.Client.Get(ctx, client.ObjectKeyFromObject(claim), &sbc); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(&sbc, claim) || !sbc.DeletionTimestamp.IsZero() {
		return nil
	}
	return deleteBootConfig(ctx, r.Client, &sbc)
}

// deleteBootConfig deletes this boot configuration: not one made in its place since it was read.
func deleteBootConfig(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration) error {
	uid := sbc.UID
	err := c.Delete(ctx, sbc, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("deleting boot configuration %s/%s (server %s): %w", sbc.Namespace, sbc.Name, sbc.Spec.ServerRef.Name, err)
}

// release gives the server back (it goes to Cleanup) and lets the claim go.
func (r *ServerClaimReconciler) release(ctx context.Context, claim *metalv1alpha1.ServerClaim) error {
	if !controllerutil.ContainsFinalizer(claim, ClaimFinalizer) {
		return nil
	}
	if claim.Status.Phase != metalv1alpha1.ClaimPhaseReleasing {
		before := claim.DeepCopy()
		claim.Status.Phase = metalv1alpha1.ClaimPhaseReleasing
		setCondition(&claim.Status.Conditions, claim.Generation, metalv1alpha1.ConditionBound, metav1.ConditionFalse, metalv1alpha1.ClaimReasonReleasing, "the claim is being deleted")
		if err := r.Client.Status().Patch(ctx, claim, client.MergeFrom(before)); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	// The image's boot configuration goes before the server does: a released server is
	// network-booted for its wipe, and a boot service still holding this image for it would
	// serve that instead (a manager that died between the two steps left exactly that).
	sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: claim.Namespace, Name: claim.Name}}
	if err := r.Client.Delete(ctx, sbc); client.IgnoreNotFound(err) != nil {
		return err
	}
	server, err := r.boundServer(ctx, claim)
	if err != nil {
		return err
	}
	if server != nil {
		err := patchHeldServer(ctx, r.Client, server, claim, func(spec *metalv1alpha1.ServerSpec) {
			spec.ServerClaimRef, spec.BootConfigurationRef, spec.Power = nil, nil, ""
		})
		if err != nil {
			return fmt.Errorf("releasing server %s: %w", server.Name, err)
		}
		r.Events.Eventf(claim, server, corev1.EventTypeNormal, metalv1alpha1.ClaimReasonReleasing, "Release", "released server %s for cleanup", server.Name)
	}
	controllerutil.RemoveFinalizer(claim, ClaimFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, claim))
}

// patchHeldServer changes the spec of a server this claim holds with a JSON patch whose first
// operation tests that the server's claim reference is still this claim's. Unlike an optimistic
// lock, it does not fail because the server's status moved on meanwhile — its own reconciler
// and its BMC's polls write status all the time, and every such conflict cost a claim a retry
// with backoff — yet it never changes a server another claim holds.
func patchHeldServer(ctx context.Context, c client.Client, server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim, change func(*metalv1alpha1.ServerSpec)) error {
	before := server.Spec.DeepCopy()
	after := server.Spec.DeepCopy()
	change(after)
	ops, err := specPatchOps(before, after)
	if err != nil || len(ops) == 0 {
		return err
	}
	ops = append([]map[string]any{{"op": "test", "path": "/spec/serverClaimRef/uid", "value": string(claim.UID)}}, ops...)
	data, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	return c.Patch(ctx, server, client.RawPatch(types.JSONPatchType, data))
}

// specPatchOps are the JSON patch operations that turn one server spec into another, field by
// field: add (or replace) what changed, remove what was cleared.
func specPatchOps(before, after *metalv1alpha1.ServerSpec) ([]map[string]any, error) {
	var oldFields, newFields map[string]json.RawMessage
	for _, pair := range []struct {
		spec *metalv1alpha1.ServerSpec
		into *map[string]json.RawMessage
	}{{before, &oldFields}, {after, &newFields}} {
		data, err := json.Marshal(pair.spec)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(data, pair.into); err != nil {
			return nil, err
		}
	}
	var ops []map[string]any
	for _, field := range slices.Sorted(maps.Keys(oldFields)) {
		if _, kept := newFields[field]; !kept {
			ops = append(ops, map[string]any{"op": "remove", "path": "/spec/" + field})
		}
	}
	for _, field := range slices.Sorted(maps.Keys(newFields)) {
		if !bytes.Equal(oldFields[field], newFields[field]) {
			ops = append(ops, map[string]any{"op": "add", "path": "/spec/" + field, "value": newFields[field]})
		}
	}
	return ops, nil
}

// SetupWithManager registers the reconciler, its index, and its watches.
func (r *ServerClaimReconciler) SetupWithManager(mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.Server{}, indexServerByClaim, func(o client.Object) []string {
		if ref := o.(*metalv1alpha1.Server).Spec.ServerClaimRef; ref != nil {
			return []string{ref.Namespace + "/" + ref.Name}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.Server{}, indexServerBindable, func(o client.Object) []string {
		if bindable(o.(*metalv1alpha1.Server)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := indexer.IndexField(context.Background(), &metalv1alpha1.ServerClaim{}, indexClaimPending, func(o client.Object) []string {
		if pending(o.(*metalv1alpha1.ServerClaim)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("serverclaim").
		For(&metalv1alpha1.ServerClaim{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&metalv1alpha1.ServerBootConfiguration{}).
		Watches(&metalv1alpha1.Server{}, handler.EnqueueRequestsFromMapFunc(r.claimsForServer), builder.WithPredicates(claimRelevantServerChange())).
		WithOptions(r.Settings.controllerOptions("serverclaim")).
		Complete(r)
}

// claimsForServer: a server that became bindable wakes the waiting claims it would satisfy;
// any other change wakes the claim that holds the server.
func (r *ServerClaimReconciler) claimsForServer(ctx context.Context, o client.Object) []reconcile.Request {
	server, ok := o.(*metalv1alpha1.Server)
	if !ok {
		return nil
	}
	if ref := server.Spec.ServerClaimRef; ref != nil {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}}}
	}
	if !bindable(server) {
		return nil
	}
	var claims metalv1alpha1.ServerClaimList
	if err := r.Client.List(ctx, &claims, client.MatchingFields{indexClaimPending: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range claims.Items {
		c := &claims.Items[i]
		if ok, err := matches(c, server); ok || err != nil {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return reqs
}

// conditionNews says whether a server's condition of type t changed in a way its claim shows.
func conditionNews(old, now *metalv1alpha1.Server, t string) bool {
	a, b := meta.FindStatusCondition(old.Status.Conditions, t), meta.FindStatusCondition(now.Status.Conditions, t)
	if a == nil || b == nil {
		return (a == nil) != (b == nil)
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
}

// pending is a claim still waiting for a server.
func pending(c *metalv1alpha1.ServerClaim) bool {
	return c.Status.Phase != metalv1alpha1.ClaimPhaseBound && c.DeletionTimestamp.IsZero()
}

// claimRelevantServerChange passes server changes a claim reacts to: becoming bindable, and
// state, claim or provisioning changes of a claimed server.
func claimRelevantServerChange() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			old, ok1 := e.ObjectOld.(*metalv1alpha1.Server)
			now, ok2 := e.ObjectNew.(*metalv1alpha1.Server)
			if !ok1 || !ok2 {
				return false
			}
			if bindable(now) && !bindable(old) {
				return true
			}
			return now.Spec.ServerClaimRef != nil && (old.Status.State != now.Status.State ||
				!sameRef(old.Spec.ServerClaimRef, now.Spec.ServerClaimRef) ||
				conditionNews(old, now, metalv1alpha1.ConditionProvisioned) || conditionNews(old, now, conditionProbe))
		},
		CreateFunc: func(e event.CreateEvent) bool { s, ok := e.Object.(*metalv1alpha1.Server); return ok && bindable(s) },
		DeleteFunc: func(e event.DeleteEvent) bool {
			s, ok := e.Object.(*metalv1alpha1.Server)
			return ok && s.Spec.ServerClaimRef != nil
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
