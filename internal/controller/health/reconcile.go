// Package health reads each Server's hardware health from its BMC (the System's roll-up, its
// failing parts, its chassis' fans, temperatures and power supplies) into the Server's
// status.health and Healthy condition, and taints a server metal.ironfleet.dev/unhealthy
// (NoClaim) while its health is at or beyond the level that taints, so that no new claim
// binds a failing machine; the taint goes when it is better.
package health

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/controller/taints"
)

// DefaultPoll is how often a server's health is read.
const DefaultPoll = 2 * time.Minute

// maxParts bounds the parts a Server's status lists.
const maxParts = 8

// Settings say how often health is read and which health taints.
type Settings struct {
	// Poll is how often each server's BMC is read (DefaultPoll when 0).
	Poll time.Duration
	// TaintAt is the health from which a server is tainted: Critical (the default when
	// empty), or Warning; "None" never taints.
	TaintAt string
	// Disabled reads no health at all (the controller tests' suite, whose other tests count
	// the requests their BMCs see).
	Disabled bool
}

func (s Settings) poll() time.Duration { return cmp.Or(s.Poll, DefaultPoll) }

// taints says whether health h taints.
func (s Settings) taints(h metalv1alpha1.HealthState) bool {
	switch cmp.Or(s.TaintAt, string(metalv1alpha1.HealthCritical)) {
	case "None":
		return false
	case string(metalv1alpha1.HealthWarning):
		return h == metalv1alpha1.HealthWarning || h == metalv1alpha1.HealthCritical
	}
	return h == metalv1alpha1.HealthCritical
}

// Reconciler reads the health of Servers.
type Reconciler struct {
	Client   client.Client
	Events   events.EventRecorder
	Clients  *bmc.Cache
	Settings Settings
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers/status,verbs=get;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch

// Reconcile reads the server's health from its BMC, writes what changed, taints or untaints
// it, and comes back at the next poll.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var server metalv1alpha1.Server
	if err := r.Client.Get(ctx, req.NamespacedName, &server); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !server.DeletionTimestamp.IsZero() || server.BMCName() == "" || server.Spec.SystemURI == "" || server.Status.State == "" {
		return ctrl.Result{}, nil // read once the lifecycle has taken it in (its state changes)
	}
	var b metalv1alpha1.BMC
	if err := r.Client.Get(ctx, client.ObjectKey{Name: server.BMCName()}, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !apimeta.IsStatusConditionTrue(b.Status.Conditions, metalv1alpha1.ConditionReady) {
		return ctrl.Result{}, nil // read once it answers: its Ready condition wakes this
	}
	result := ctrl.Result{RequeueAfter: r.Settings.poll()}
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err != nil {
		return result, r.write(ctx, &server, nil, metalv1alpha1.ReasonHealthReadFailed, fmt.Sprintf("BMC %s cannot be reached: %v", b.Name, err))
	}
	reader, ok := c.(bmc.HealthReader)
	if !ok {
		return ctrl.Result{}, r.write(ctx, &server, nil, metalv1alpha1.ReasonHealthUnsupported,
			fmt.Sprintf("BMC %s speaks %s, whose health (sensors, SEL) Ironfleet does not read yet", b.Name, b.Status.Protocol))
	}
	h, err := reader.Health(ctx, server.Spec.SystemURI)
	if err != nil {
		log.FromContext(ctx).Info("reading the server's health failed", "bmc", b.Name, "error", err.Error())
		return result, r.write(ctx, &server, nil, metalv1alpha1.ReasonHealthReadFailed,
			fmt.Sprintf("reading BMC %s failed (tried again in %s): %v", b.Name, r.Settings.poll(), err))
	}
	found := summarize(h)
	reason, message := judge(found)
	if err := r.write(ctx, &server, found, reason, message); err != nil {
		return ctrl.Result{}, err
	}
	return result, r.taint(ctx, &server, found)
}

// summarize is what a Server shows of a health read: the roll-up, and the worst parts first.
func summarize(h bmc.Health) *metalv1alpha1.ServerHealth {
	parts := slices.Clone(h.Components)
	slices.SortStableFunc(parts, func(a, b bmc.ComponentHealth) int {
		if a.Health != b.Health {
			return cmp.Compare(rank(b.Health), rank(a.Health))
		}
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	out := &metalv1alpha1.ServerHealth{State: metalv1alpha1.HealthState(h.Rollup)}
	for i, p := range parts {
		if i == maxParts {
			out.PartsNotShown = int32(len(parts) - maxParts)
			break
		}
		out.Parts = append(out.Parts, metalv1alpha1.HealthPart{Kind: truncate(p.Kind, 32), Name: truncate(p.Name, 128), Health: metalv1alpha1.HealthState(p.Health)})
	}
	return out
}

func rank(h bmc.HealthState) int {
	return map[bmc.HealthState]int{bmc.HealthOK: 1, bmc.HealthWarning: 2, bmc.HealthCritical: 3}[h]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// judge is the Healthy condition's reason and message for a read's findings.
func judge(h *metalv1alpha1.ServerHealth) (string, string) {
	var names []string
	for _, p := range h.Parts {
		names = append(names, fmt.Sprintf("%s %s is %s", p.Kind, p.Name, p.Health))
	}
	if h.PartsNotShown > 0 {
		names = append(names, fmt.Sprintf("and %d more", h.PartsNotShown))
	}
	switch h.State {
	case metalv1alpha1.HealthCritical:
		return metalv1alpha1.ReasonHealthCritical, "the BMC reports Critical: " + cmp.Or(strings.Join(names, "; "), "the system itself")
	case metalv1alpha1.HealthWarning:
		return metalv1alpha1.ReasonHealthWarning, "the BMC reports Warning: " + cmp.Or(strings.Join(names, "; "), "the system itself")
	case metalv1alpha1.HealthOK:
		return metalv1alpha1.ReasonHealthOK, "the BMC reports every part OK"
	}
	return metalv1alpha1.ReasonHealthUnsupported, "the BMC reports no health for this system"
}

// write sets status.health (nil: left as the last good read found it) and the Healthy
// condition, writing only what changed (a fleet at rest costs no writes), with an event when
// the reason changes.
func (r *Reconciler) write(ctx context.Context, server *metalv1alpha1.Server, found *metalv1alpha1.ServerHealth, reason, message string) error {
	original := server.DeepCopy()
	if found != nil {
		server.Status.Health = found
	}
	st := metav1.ConditionUnknown
	switch reason {
	case metalv1alpha1.ReasonHealthOK:
		st = metav1.ConditionTrue
	case metalv1alpha1.ReasonHealthWarning, metalv1alpha1.ReasonHealthCritical:
		st = metav1.ConditionFalse
	}
	before := apimeta.FindStatusCondition(original.Status.Conditions, metalv1alpha1.ConditionHealthy)
	status.SetCondition(&server.Status.Conditions, server.Generation, metalv1alpha1.ConditionHealthy, st, reason, message)
	if equality.Semantic.DeepEqual(server.Status, original.Status) {
		return nil
	}
	// With an optimistic lock: a merge patch replaces the whole conditions list, and a copy
	// older than the Server reconciler's last write would drop the conditions it wrote since
	// (Discovered, say). A conflict is read again.
	if err := status.Patch(ctx, r.Client, server, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{})); err != nil {
		return client.IgnoreNotFound(err)
	}
	// An event when the reason changes; not for a first read that finds the server OK (a fleet
	// coming up is not news).
	firstOK := before == nil && reason == metalv1alpha1.ReasonHealthOK
	if r.Events != nil && (before == nil || before.Reason != reason) && !firstOK {
		kind := corev1.EventTypeWarning
		if reason == metalv1alpha1.ReasonHealthOK {
			kind = corev1.EventTypeNormal
		}
		r.Events.Eventf(server, nil, kind, reason, "ReadHealth", "%s", message)
	}
	return nil
}

// taint sets Ironfleet's unhealthy taint while the health taints, and removes it (only it)
// otherwise.
func (r *Reconciler) taint(ctx context.Context, server *metalv1alpha1.Server, h *metalv1alpha1.ServerHealth) error {
	if r.Settings.taints(h.State) {
		now := metav1.Now()
		changed, err := taints.Set(ctx, r.Client, server, metalv1alpha1.Taint{Key: metalv1alpha1.TaintUnhealthy, Value: string(h.State),
			Effect: metalv1alpha1.TaintNoClaim, TimeAdded: &now})
		if changed && err == nil && r.Events != nil {
			r.Events.Eventf(server, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonUnhealthyTainted, "Taint",
				"tainted %s=%s:NoClaim: no new claim binds it until its health is better", metalv1alpha1.TaintUnhealthy, h.State)
		}
		return ignoreConflict(err)
	}
	changed, err := taints.Remove(ctx, r.Client, server, metalv1alpha1.TaintUnhealthy)
	if changed && err == nil && r.Events != nil {
		r.Events.Eventf(server, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonUnhealthyUntainted, "Taint",
			"health %s: the %s taint is removed", cmp.Or(string(h.State), "unknown"), metalv1alpha1.TaintUnhealthy)
	}
	return ignoreConflict(err)
}

// ignoreConflict: a taint patch tested against a spec that changed meanwhile is tried at the
// next reconcile, which the change itself brings.
func ignoreConflict(err error) error {
	if apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// SetupWithManager watches Servers (taken in, their BMC or system changed, their Healthy
// condition lost to another writer's stale copy) and BMCs (Ready again).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("serverhealth").
		For(&metalv1alpha1.Server{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*metalv1alpha1.Server), e.ObjectNew.(*metalv1alpha1.Server)
				return old.BMCName() != cur.BMCName() || old.Spec.SystemURI != cur.Spec.SystemURI ||
					(old.Status.State == "") != (cur.Status.State == "") ||
					apimeta.FindStatusCondition(old.Status.Conditions, metalv1alpha1.ConditionHealthy) != nil &&
						apimeta.FindStatusCondition(cur.Status.Conditions, metalv1alpha1.ConditionHealthy) == nil
			},
		})).
		Watches(&metalv1alpha1.BMC{}, handler.EnqueueRequestsFromMapFunc(r.serversOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*metalv1alpha1.BMC), e.ObjectNew.(*metalv1alpha1.BMC)
				return apimeta.IsStatusConditionTrue(old.Status.Conditions, metalv1alpha1.ConditionReady) !=
					apimeta.IsStatusConditionTrue(cur.Status.Conditions, metalv1alpha1.ConditionReady)
			},
		})).
		Complete(r)
}

func (r *Reconciler) serversOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{metalv1alpha1.LabelBMC: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "listing the servers of BMC "+o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
	}
	return out
}
