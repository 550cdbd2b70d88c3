// Package firmware reconciles each Server's ServerFirmware: its BMC's firmware inventory and
// BIOS settings, read when the server is enrolled, when its BMC reports another BIOS or BMC
// version, and when a person asks, never on every poll (a registry can run to megabytes).
package firmware

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/controller/cached"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// DefaultRetry is the wait before a failed read is tried again.
const DefaultRetry = time.Minute

// Reconciler keeps one ServerFirmware per Server that has a BMC and a system, with its BMC's
// firmware as last read.
type Reconciler struct {
	Client client.Client
	// APIReader reads Secrets, which the manager does not cache.
	APIReader client.Reader
	Events    events.EventRecorder
	Clients   *bmc.Cache
	// Retry is the wait after a failed read; DefaultRetry when zero.
	Retry time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Update says where and how fast firmware updates go.
	Update UpdateSettings

	// written keeps a reconcile woken before the cache has a ServerFirmware's last write from
	// reading its BMC again on the older copy.
	written *cached.Writes
	// admitted are the servers this manager admitted to a rollout whose admission the cache
	// may not show yet.
	admitted *admissions
}

// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverfirmwares,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=serverfirmwares/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=firmwarebaselines,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcs,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=bmcsecrets,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=endpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers,verbs=patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servers/status,verbs=get;patch
// +kubebuilder:rbac:groups=metal.ironfleet.dev,resources=servermaintenances,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;delete;deletecollection

// Reconcile makes sure the server has its ServerFirmware, and reads its BMC when a read is due.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var server metalv1alpha1.Server
	if err := r.Client.Get(ctx, req.NamespacedName, &server); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !server.DeletionTimestamp.IsZero() || server.BMCName() == "" || server.Spec.SystemURI == "" {
		return ctrl.Result{}, nil // the ServerFirmware goes with its Server (owner reference)
	}
	if server.Status.State == "" {
		// Not taken in yet: its BMC has not written what it says of the system (the BIOS
		// version a read is compared with), and the lifecycle's first step wakes this.
		return ctrl.Result{}, nil
	}
	sfw, behind, err := r.ensure(ctx, &server)
	if err != nil || behind {
		return cached.CatchUpIf(behind), err
	}
	var b metalv1alpha1.BMC
	if err := r.Client.Get(ctx, client.ObjectKey{Name: server.BMCName()}, &b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // the BMC's watch brings it back
	}
	if !bmcReady(&b) {
		return ctrl.Result{}, nil // read once it answers: its Ready condition wakes this
	}
	var baselines metalv1alpha1.FirmwareBaselineList
	if err := r.Client.List(ctx, &baselines); err != nil {
		return ctrl.Result{}, err
	}
	bs := selecting(baselines.Items, &server)
	if err := r.summarize(ctx, &server, sfw); err != nil {
		return ctrl.Result{}, err
	}
	due, wait := r.readDue(sfw, &server, &b, observed(bs))
	if due {
		return r.read(ctx, sfw, &server, &b, bs)
	}
	res, err := r.update(ctx, sfw, &server, bs)
	if errors.Is(err, errReadAgain) {
		return r.read(ctx, sfw, &server, &b, bs)
	}
	if err != nil || res.Requeue || res.RequeueAfter > 0 {
		return res, err
	}
	if d := r.deadline(sfw.Status.Update); d > 0 {
		wait = min(cmp.Or(wait, d), d)
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// summarize copies the ServerFirmware's Compliant condition onto its Server as
// FirmwareCompliant (status, reason and message), so that the fleet's views need not read every
// ServerFirmware; under an optimistic lock, as the Server's own reconciler writes its status. A
// server no baseline ever selected has none.
func (r *Reconciler) summarize(ctx context.Context, server *metalv1alpha1.Server, sfw *metalv1alpha1.ServerFirmware) error {
	c := apimeta.FindStatusCondition(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareCompliant)
	if c == nil {
		return nil
	}
	have := apimeta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionServerFirmwareCompliant)
	if have == nil && c.Reason == metalv1alpha1.ReasonNoBaseline {
		return nil // nothing to summarize: a fleet without baselines costs no write per server
	}
	if have != nil && have.Status == c.Status && have.Reason == c.Reason && have.Message == c.Message {
		return nil
	}
	original := server.DeepCopy()
	status.SetCondition(&server.Status.Conditions, server.Generation, metalv1alpha1.ConditionServerFirmwareCompliant, c.Status, c.Reason, c.Message)
	err := status.Patch(ctx, r.Client, server, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the newer Server comes back with its watch, and this with it
	}
	return err
}

// ensure returns the server's ServerFirmware, made (owned by the server) if it has none;
// behind when the cache does not show this reconciler's last write of it yet (a read decided
// from the older copy would read the BMC twice).
func (r *Reconciler) ensure(ctx context.Context, server *metalv1alpha1.Server) (*metalv1alpha1.ServerFirmware, bool, error) {
	var sfw metalv1alpha1.ServerFirmware
	behind, err := r.written.Get(ctx, r.Client, client.ObjectKey{Name: server.Name}, &sfw)
	if err == nil || !apierrors.IsNotFound(err) {
		return &sfw, behind, err
	}
	sfw = metalv1alpha1.ServerFirmware{
		ObjectMeta: metav1.ObjectMeta{Name: server.Name, Labels: map[string]string{metalv1alpha1.LabelServer: server.Name}},
		Spec:       metalv1alpha1.ServerFirmwareSpec{ServerRef: metalv1alpha1.LocalObjectReference{Name: server.Name}},
	}
	if err := controllerutil.SetControllerReference(server, &sfw, r.Client.Scheme()); err != nil {
		return nil, false, err
	}
	if err := r.Client.Create(ctx, &sfw); err != nil {
		return nil, false, fmt.Errorf("creating the ServerFirmware of %s: %w", server.Name, err)
	}
	r.written.Wrote(&sfw)
	return &sfw, false, nil
}

func bmcReady(b *metalv1alpha1.BMC) bool {
	return apimeta.IsStatusConditionTrue(b.Status.Conditions, metalv1alpha1.ConditionReady)
}

// readDue says whether the BMC is read now: never read yet, asked for by a person, the BIOS
// or BMC version its polls show changed since the last read, or the baselines that select the
// server (obs: which, at which generations) are not those the last read was judged by. After a
// failed read only a person's request goes before the retry (wait): each failed read writes
// the ServerFirmware, which wakes this again, and a baseline or version that changed since would
// otherwise have a BMC that keeps failing read in a loop.
func (r *Reconciler) readDue(sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, b *metalv1alpha1.BMC, obs []metalv1alpha1.ObservedBaseline) (bool, time.Duration) {
	st := &sfw.Status
	_, asked := sfw.Annotations[metalv1alpha1.AnnotationReadFirmware]
	if st.LastReadTime == nil || asked {
		return true, 0
	}
	if c := apimeta.FindStatusCondition(st.Conditions, metalv1alpha1.ConditionFirmwareRead); c != nil && c.Reason == metalv1alpha1.ReasonFirmwareReadFailed {
		if left := st.LastReadTime.Add(r.retry()).Sub(r.now()); left > 0 {
			return false, left
		}
		return true, 0
	}
	changed := st.ReadBIOSVersion != server.Status.BIOSVersion || st.ReadBMCVersion != b.Status.FirmwareVersion ||
		!slices.Equal(st.ObservedBaselines, obs)
	return changed, 0
}

// read reads the BMC and writes what it found: the whole status when the read succeeded (the
// manager's cache keeps a ServerFirmware without its attributes and components, see
// cached.Options, so a patch against it could not remove an attribute that went), the Read
// condition alone when it did not, keeping what the last good read found.
func (r *Reconciler) read(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, b *metalv1alpha1.BMC, bs []*metalv1alpha1.FirmwareBaseline) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	now := metav1.NewTime(r.now())
	found, err := r.readBMC(ctx, server)
	original, read := sfw.DeepCopy(), sfw.ResourceVersion
	sfw.Status.LastReadTime = &now
	sfw.Status.ReadBIOSVersion, sfw.Status.ReadBMCVersion = server.Status.BIOSVersion, b.Status.FirmwareVersion
	var result ctrl.Result
	switch {
	case errors.Is(err, bmc.ErrUnsupported):
		setRead(sfw, metalv1alpha1.ReasonFirmwareManagementUnsupported, fmt.Sprintf("BMC %s offers no firmware management: %v", b.Name, err))
		sfw.Status.Components, sfw.Status.BIOS, sfw.Status.BMC, sfw.Status.BIOSVersion, sfw.Status.BMCVersion = nil, nil, nil, "", ""
		sfw.Status.Baseline, sfw.Status.ObservedBaselines, sfw.Status.Differences = names(bs), observed(bs), nil
		if len(bs) == 0 {
			setCompliant(sfw, metalv1alpha1.ReasonNoBaseline, "no FirmwareBaseline selects this server")
		} else {
			setCompliant(sfw, metalv1alpha1.ReasonFirmwareManagementUnsupported, "selected by "+names(bs)+", but its BMC offers no firmware management: never touched")
		}
	case err != nil:
		logger.Info("reading the server's firmware failed", "bmc", b.Name, "error", err.Error())
		setRead(sfw, metalv1alpha1.ReasonFirmwareReadFailed, fmt.Sprintf("reading BMC %s failed (tried again in %s): %v", b.Name, r.retry(), err))
		if r.Events != nil {
			r.Events.Eventf(sfw, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonFirmwareReadFailed, "ReadFirmware", "reading BMC %s failed: %v", b.Name, err)
		}
		result.RequeueAfter = r.retry()
		// Only the condition and the read's time and versions change: a patch keeps the last
		// good read's findings, which the cached copy does not hold.
		if _, err := status.Finish(ctx, r.Client, sfw, original, result, nil); err != nil {
			return ctrl.Result{}, err
		}
		r.written.Wrote(sfw, read)
		return result, r.forgetAsk(ctx, sfw, read)
	default:
		found.apply(&sfw.Status)
		setRead(sfw, metalv1alpha1.ReasonFirmwareRead, found.summary())
		// Judged against the baselines as they are now, with what was just read: the cached
		// copy holds neither the inventory nor the attributes.
		w, conflicts := merge(bs)
		var biosRegistry, bmcRegistry *bmc.SettingsRegistry
		if found.bios != nil {
			biosRegistry = found.bios.Registry
		}
		if found.bmc != nil {
			bmcRegistry = found.bmc.Registry
		}
		sfw.Status.Baseline, sfw.Status.ObservedBaselines, sfw.Status.Differences = names(bs), observed(bs), nil
		if len(conflicts) == 0 {
			sfw.Status.Differences = differences(w, &sfw.Status, biosRegistry, bmcRegistry)
		}
		readSteps(&sfw.Status)
		reason, message := judge(bs, w, conflicts, sfw.Status.Differences)
		setCompliant(sfw, reason, message)
		if r.Events != nil && (original.Status.BIOSVersion != sfw.Status.BIOSVersion || original.Status.BMCVersion != sfw.Status.BMCVersion) {
			r.Events.Eventf(sfw, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonFirmwareRead, "ReadFirmware", "%s", found.summary())
		}
	}
	if err := r.Client.Status().Update(ctx, sfw); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // a conflict comes back with the newer object
	}
	r.written.Wrote(sfw, read)
	return result, r.forgetAsk(ctx, sfw, read)
}

// setRead sets the Read condition: True only for a read that succeeded.
func setRead(sfw *metalv1alpha1.ServerFirmware, reason, message string) {
	status.SetCondition(&sfw.Status.Conditions, sfw.Generation, metalv1alpha1.ConditionFirmwareRead,
		status.BoolStatus(reason == metalv1alpha1.ReasonFirmwareRead), reason, message)
}

// setCompliant sets the Compliant condition: True when compliant, Unknown when it cannot be
// said (no baseline, no firmware management), False otherwise.
func setCompliant(sfw *metalv1alpha1.ServerFirmware, reason, message string) {
	st := metav1.ConditionFalse
	switch reason {
	case metalv1alpha1.ReasonFirmwareCompliant:
		st = metav1.ConditionTrue
	case metalv1alpha1.ReasonNoBaseline, metalv1alpha1.ReasonFirmwareManagementUnsupported:
		st = metav1.ConditionUnknown
	}
	status.SetCondition(&sfw.Status.Conditions, sfw.Generation, metalv1alpha1.ConditionFirmwareCompliant, st, reason, message)
}

// forgetAsk removes a person's read request once it was answered (the status write made the
// version sfw has; read is the one before it).
func (r *Reconciler) forgetAsk(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, read string) error {
	if _, asked := sfw.Annotations[metalv1alpha1.AnnotationReadFirmware]; !asked {
		return nil
	}
	written := sfw.ResourceVersion
	patch := []byte(`{"metadata":{"annotations":{"` + metalv1alpha1.AnnotationReadFirmware + `":null}}}`)
	if err := r.Client.Patch(ctx, sfw, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.written.Wrote(sfw, read, written)
	return nil
}

// found is what one read of the BMC found.
type found struct {
	components []bmc.FirmwareComponent
	bios       *bmc.Settings
	// bmc is the BMC's own settings, where the vendor exposes them (most do not: not missing).
	bmc *bmc.Settings
	// missing says what the BMC does not offer, when it offers the rest.
	missing []string
}

// readBMC reads the server's firmware inventory, BIOS settings and the BMC's own settings. It
// answers ErrUnsupported only when the BMC offers neither of the first two.
func (r *Reconciler) readBMC(ctx context.Context, server *metalv1alpha1.Server) (found, error) {
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err != nil {
		return found{}, err
	}
	reader, ok := c.(bmc.FirmwareReader)
	if !ok {
		return found{}, fmt.Errorf("its client reads no firmware: %w", bmc.ErrUnsupported)
	}
	var f found
	var errInventory, errBIOS error
	f.components, errInventory = reader.FirmwareInventory(ctx, server.Spec.SystemURI)
	settings, errBIOS := reader.BIOSSettings(ctx, server.Spec.SystemURI)
	if errBIOS == nil {
		f.bios = &settings
	}
	bmcSettings, errBMC := reader.ManagerSettings(ctx, server.Spec.SystemURI)
	if errBMC == nil {
		f.bmc = &bmcSettings
	}
	switch {
	case errors.Is(errInventory, bmc.ErrUnsupported) && errors.Is(errBIOS, bmc.ErrUnsupported):
		return found{}, fmt.Errorf("no firmware inventory (%v) and no BIOS settings (%v): %w", strip(errInventory), strip(errBIOS), bmc.ErrUnsupported)
	case errInventory != nil && !errors.Is(errInventory, bmc.ErrUnsupported):
		return found{}, fmt.Errorf("reading the firmware inventory: %w", errInventory)
	case errBIOS != nil && !errors.Is(errBIOS, bmc.ErrUnsupported):
		return found{}, fmt.Errorf("reading the BIOS settings: %w", errBIOS)
	case errBMC != nil && !errors.Is(errBMC, bmc.ErrUnsupported):
		return found{}, fmt.Errorf("reading the BMC's settings: %w", errBMC)
	}
	if errInventory != nil {
		f.missing = append(f.missing, "a firmware inventory")
	}
	if errBIOS != nil {
		f.missing = append(f.missing, "BIOS settings")
	}
	return f, nil
}

// strip is err's message without the ErrUnsupported suffix the reason already says.
func strip(err error) string {
	return strings.TrimSuffix(err.Error(), ": "+bmc.ErrUnsupported.Error())
}

// apply writes what was found into st, replacing the last read's findings.
func (f found) apply(st *metalv1alpha1.ServerFirmwareStatus) {
	st.Components, st.BIOSVersion, st.BMCVersion, st.BIOS, st.BMC = nil, "", "", nil, nil
	for _, c := range f.components {
		if !c.Installed {
			continue // a previous or available version, not what runs
		}
		class := metalv1alpha1.FirmwareComponentClass(c.Class)
		switch class {
		case metalv1alpha1.FirmwareComponentBIOS:
			st.BIOSVersion = cmp.Or(st.BIOSVersion, c.Version)
		case metalv1alpha1.FirmwareComponentBMC:
			st.BMCVersion = cmp.Or(st.BMCVersion, c.Version)
		default:
			class = metalv1alpha1.FirmwareComponentOther
		}
		st.Components = append(st.Components, metalv1alpha1.FirmwareComponent{
			ID: c.ID, Name: c.Name, Class: class, Version: c.Version, Updateable: c.Updateable})
	}
	slices.SortFunc(st.Components, func(a, b metalv1alpha1.FirmwareComponent) int { return strings.Compare(a.ID, b.ID) })
	st.Components = slices.CompactFunc(st.Components, func(a, b metalv1alpha1.FirmwareComponent) bool { return a.ID == b.ID })
	st.BIOS, st.BMC = firmwareSettings(f.bios), firmwareSettings(f.bmc)
}

// firmwareSettings is settings as a ServerFirmware shows them; nil for nil.
func firmwareSettings(settings *bmc.Settings) *metalv1alpha1.FirmwareSettings {
	if settings == nil {
		return nil
	}
	s := &metalv1alpha1.FirmwareSettings{Attributes: maps.Clone(settings.Current), Pending: maps.Clone(settings.Pending)}
	if settings.Registry != nil {
		s.Registry = settings.Registry.Name
	}
	return s
}

// summary says what the read found, for the Read condition's message.
func (f found) summary() string {
	installed := 0
	for _, c := range f.components {
		if c.Installed {
			installed++
		}
	}
	msg := fmt.Sprintf("%d firmware components", installed)
	for _, s := range []struct {
		what     string
		settings *bmc.Settings
	}{{"BIOS", f.bios}, {"BMC", f.bmc}} {
		if s.settings != nil {
			msg += fmt.Sprintf(", %d %s attributes", len(s.settings.Current), s.what)
			if s.settings.Registry == nil {
				msg += " (no attribute registry: values cannot be checked before they are sent)"
			}
		}
	}
	if len(f.missing) > 0 {
		msg += "; the BMC offers no " + strings.Join(f.missing, " and no ")
	}
	return msg
}

func (r *Reconciler) retry() time.Duration {
	if r.Retry > 0 {
		return r.Retry
	}
	return DefaultRetry
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager watches Servers (made, taken in by the lifecycle, their BMC, system or
// labels changed, another BIOS version polled), their ServerFirmwares (a person's read request; one deleted is made again), and
// BMCs (Ready again, another firmware version).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.written = cached.NewWrites()
	r.admitted = &admissions{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("serverfirmware").
		For(&metalv1alpha1.Server{}, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*metalv1alpha1.Server), e.ObjectNew.(*metalv1alpha1.Server)
				return old.BMCName() != cur.BMCName() || old.Spec.SystemURI != cur.Spec.SystemURI ||
					old.Status.BIOSVersion != cur.Status.BIOSVersion || !maps.Equal(old.Labels, cur.Labels) ||
					old.Status.State != cur.Status.State ||
					!metalv1alpha1.SameReference(old.Spec.MaintenanceRef, cur.Spec.MaintenanceRef) ||
					!metalv1alpha1.SameReference(old.Spec.ServerClaimRef, cur.Spec.ServerClaimRef) ||
					!slices.Equal(old.Spec.Taints, cur.Spec.Taints) || reportedAt(old) != reportedAt(cur) ||
					!sameCondition(old, cur, metalv1alpha1.ConditionServerFirmwareCompliant)
			},
		})).
		Owns(&metalv1alpha1.ServerFirmware{}).
		// An update's maintenance taking the server, or waiting for its owner.
		Watches(&metalv1alpha1.ServerMaintenance{}, handler.EnqueueRequestsFromMapFunc(maintainedServer)).
		Watches(&metalv1alpha1.BMC{}, handler.EnqueueRequestsFromMapFunc(r.serversOf), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			DeleteFunc: func(event.DeleteEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				old, cur := e.ObjectOld.(*metalv1alpha1.BMC), e.ObjectNew.(*metalv1alpha1.BMC)
				return bmcReady(old) != bmcReady(cur) || old.Status.FirmwareVersion != cur.Status.FirmwareVersion
			},
		})).
		// A baseline made, changed or deleted: the servers it selects, or selected, are judged
		// again (each reads its BMC only if its baselines are not those it was judged by). Its
		// counts changed (a server's update ended, another failed): the servers waiting for a
		// place in its rollout.
		Watches(&metalv1alpha1.FirmwareBaseline{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				addAll(q, r.allServers(ctx, e.Object))
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				addAll(q, r.allServers(ctx, e.Object))
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
					addAll(q, r.allServers(ctx, e.ObjectNew))
					return
				}
				addAll(q, r.waitingFor(ctx, e.ObjectNew.GetName()))
			},
		}).
		// One worker: a rollout's places are counted and taken by one reconcile at a time
		// (place); --concurrency does not apply to it.
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		Complete(r)
}

// reportedAt is when the server's probe last reported, as text ("" for none).
func reportedAt(s *metalv1alpha1.Server) string {
	if inv := s.Status.Inventory; inv != nil && inv.ReportedAt != nil {
		return inv.ReportedAt.UTC().Format(time.RFC3339Nano)
	}
	return ""
}

// sameCondition says whether two servers have condition t alike (a person or a stale write
// may have changed the summary: it is written again).
func sameCondition(a, b *metalv1alpha1.Server, t string) bool {
	ca, cb := apimeta.FindStatusCondition(a.Status.Conditions, t), apimeta.FindStatusCondition(b.Status.Conditions, t)
	if ca == nil || cb == nil {
		return ca == cb
	}
	return ca.Status == cb.Status && ca.Reason == cb.Reason && ca.Message == cb.Message
}

// maintainedServer is the server an update's ServerMaintenance names.
func maintainedServer(_ context.Context, o client.Object) []reconcile.Request {
	if _, ours := o.GetLabels()[LabelBaseline]; !ours {
		return nil
	}
	if s := o.GetLabels()[metalv1alpha1.LabelServer]; s != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: s}}}
	}
	return nil
}

func addAll(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// waitingFor are the servers whose update waits for a place in baseline's rollout (or holds
// one: a failed one, retried, waits in its maintenance).
func (r *Reconciler) waitingFor(ctx context.Context, baseline string) []reconcile.Request {
	var list metalv1alpha1.ServerFirmwareList
	if err := r.Client.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "listing the servers waiting for baseline "+baseline)
		return nil
	}
	var out []reconcile.Request
	for _, sfw := range list.Items {
		if u := sfw.Status.Update; u != nil && u.Baseline == baseline && u.State == metalv1alpha1.FirmwareUpdateWaiting {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: sfw.Name}})
		}
	}
	return out
}

// allServers are every Server: a baseline's selector may have selected any of them before.
func (r *Reconciler) allServers(ctx context.Context, _ client.Object) []reconcile.Request {
	return r.servers(ctx, "listing the servers a baseline may select")
}

// serversOf are the servers of a BMC, by the label every Server of a BMC carries.
func (r *Reconciler) serversOf(ctx context.Context, o client.Object) []reconcile.Request {
	return r.servers(ctx, "listing the servers of BMC "+o.GetName(), client.MatchingLabels{metalv1alpha1.LabelBMC: o.GetName()})
}

// servers are the Servers opts select, as requests; none when they cannot be listed (logged as
// what was being done).
func (r *Reconciler) servers(ctx context.Context, doing string, opts ...client.ListOption) []reconcile.Request {
	var list metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		log.FromContext(ctx).Error(err, doing)
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for _, s := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: s.Name}})
	}
	return out
}
