package firmware

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// BaselineReconciler counts, for each FirmwareBaseline, the servers it selects by where they
// stand, as their ServerFirmwares say (the Reconciler judges each server), and says whether
// its settings are valid on them and whether another baseline conflicts with it, and where its
// rollout stands (each server's update is the Reconciler's).
type BaselineReconciler struct {
	Client client.Client
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=firmwarebaselines,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=firmwarebaselines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverfirmwares,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch

// maxNamed bounds how many servers a condition's message names.
const maxNamed = 5

// Reconcile counts one baseline's servers.
func (r *BaselineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var b metalv1alpha1.FirmwareBaseline
	if err := r.Client.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			forgetBaseline(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	original := b.DeepCopy()
	sel, err := metav1.LabelSelectorAsSelector(&b.Spec.ServerSelector)
	if err != nil {
		return ctrl.Result{}, nil // the API validates selectors; one it let through selects nothing
	}
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return ctrl.Result{}, err
	}
	c := tally{baseline: b.Name}
	for i := range servers.Items {
		s := &servers.Items[i]
		if !s.DeletionTimestamp.IsZero() {
			continue
		}
		var sfw metalv1alpha1.ServerFirmware
		err := r.Client.Get(ctx, client.ObjectKey{Name: s.Name}, &sfw)
		if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		c.add(s.Name, &sfw, err == nil)
	}
	b.Status.Matched, b.Status.Compliant, b.Status.Unsupported, b.Status.Conflicting = c.matched, c.compliant, c.unsupported, c.conflicting
	b.Status.Updating, b.Status.Failed = c.updating, c.failed
	b.Status.Rollout = c.rollout(&b)
	b.Status.ObservedGeneration = b.Generation
	setValid(&b, c.invalid)
	setConflict(&b, c.conflicts)
	recordBaseline(&b)
	return status.Finish(ctx, r.Client, &b, original, ctrl.Result{}, nil)
}

// tally is one baseline's servers, counted.
type tally struct {
	baseline                                     string
	matched, compliant, unsupported, conflicting int32
	updating, failed                             int32
	invalid, conflicts                           []string
}

// rollout is where the baseline's rollout stands: Stopped while maxFailures of its servers have
// a failed update (until retried or given back), Complete when every server it may touch runs what it wants (or
// refuses it: an invalid setting is the baseline's to fix, said by Valid), else Progressing.
func (c *tally) rollout(b *metalv1alpha1.FirmwareBaseline) metalv1alpha1.RolloutState {
	switch {
	case c.failed >= max(b.Spec.Rollout.MaxFailures, 1):
		return metalv1alpha1.RolloutStopped
	case c.updating == 0 && c.failed == 0 && c.compliant+c.unsupported+c.conflicting == c.matched:
		return metalv1alpha1.RolloutComplete
	case b.Spec.Rollout.Paused:
		return metalv1alpha1.RolloutPaused
	}
	return metalv1alpha1.RolloutProgressing
}

// add counts a server the baseline selects, by its ServerFirmware (found: it has one).
func (c *tally) add(server string, sfw *metalv1alpha1.ServerFirmware, found bool) {
	c.matched++
	if u := sfw.Status.Update; found && u != nil && u.Baseline == c.baseline {
		switch {
		case u.State == metalv1alpha1.FirmwareUpdateFailed:
			c.failed++
		case holdsPlace(u):
			c.updating++
		}
	}
	if !found || !slices.Contains(strings.Split(sfw.Status.Baseline, ","), c.baseline) {
		return // not judged by this baseline yet
	}
	if read := apimeta.FindStatusCondition(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareRead); read != nil &&
		read.Reason == metalv1alpha1.ReasonFirmwareManagementUnsupported {
		c.unsupported++
		return
	}
	compliant := apimeta.FindStatusCondition(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareCompliant)
	if compliant == nil {
		return
	}
	switch compliant.Reason {
	case metalv1alpha1.ReasonFirmwareCompliant:
		c.compliant++
	case metalv1alpha1.ReasonConflictingBaselines:
		c.conflicting++
		c.conflicts = append(c.conflicts, fmt.Sprintf("server %s: %s", server, strings.TrimPrefix(compliant.Message, "not touched: ")))
	}
	for _, d := range sfw.Status.Differences {
		if d.Baseline == c.baseline && d.Invalid != "" {
			c.invalid = append(c.invalid, fmt.Sprintf("server %s: %s=%q: %s", server, d.Name, d.Want, d.Invalid))
		}
	}
}

// setValid sets the Valid condition: False naming the settings some server's BMC refuses.
func setValid(b *metalv1alpha1.FirmwareBaseline, invalid []string) {
	if len(invalid) == 0 {
		status.SetCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionBaselineValid, metav1.ConditionTrue,
			metalv1alpha1.ReasonSettingsValid, "every setting is one the registries of the servers read so far allow")
		return
	}
	status.SetCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionBaselineValid, metav1.ConditionFalse,
		metalv1alpha1.ReasonInvalidSetting, "refused before anything is sent: "+named(invalid))
}

// setConflict sets the Conflict condition: True naming the servers another baseline wants
// something else of.
func setConflict(b *metalv1alpha1.FirmwareBaseline, conflicts []string) {
	if len(conflicts) == 0 {
		status.SetCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionBaselineConflict, metav1.ConditionFalse,
			metalv1alpha1.ReasonNoConflict, "no other baseline wants something else of its servers")
		return
	}
	status.SetCondition(&b.Status.Conditions, b.Generation, metalv1alpha1.ConditionBaselineConflict, metav1.ConditionTrue,
		metalv1alpha1.ReasonConflictingBaselines, "these servers are not touched: "+named(conflicts))
}

// named is the first maxNamed of items, sorted, and how many more.
func named(items []string) string {
	slices.Sort(items)
	if len(items) <= maxNamed {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:maxNamed], "; "), len(items)-maxNamed)
}

// SetupWithManager watches baselines, the ServerFirmwares that say how each server stands,
// and Servers (a label change may select or unselect one).
func (r *BaselineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("firmwarebaseline").
		For(&metalv1alpha1.FirmwareBaseline{}).
		Watches(&metalv1alpha1.ServerFirmware{}, handler.EnqueueRequestsFromMapFunc(r.allBaselines)).
		// Only what changes which servers a baseline selects: a Server's status changes often,
		// and each baseline's reconcile lists every Server.
		Watches(&metalv1alpha1.Server{}, handler.EnqueueRequestsFromMapFunc(r.allBaselines), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) ||
					e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
			},
		})).
		Complete(r)
}

// allBaselines are every baseline: there are few, and any may select the server.
func (r *BaselineReconciler) allBaselines(ctx context.Context, _ client.Object) []reconcile.Request {
	var list metalv1alpha1.FirmwareBaselineList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing firmware baselines")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, b := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: b.Name}})
	}
	return out
}
