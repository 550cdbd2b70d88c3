package firmware

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// updater connects to the server's BMC as a FirmwareUpdater.
func (r *Reconciler) updater(ctx context.Context, server *metalv1alpha1.Server) (bmc.FirmwareUpdater, bmc.FirmwareReader, error) {
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err != nil {
		return nil, nil, err
	}
	up, ok1 := c.(bmc.FirmwareUpdater)
	rd, ok2 := c.(bmc.FirmwareReader)
	if !ok1 || !ok2 {
		return nil, nil, fmt.Errorf("BMC %s's client updates no firmware: %w", server.BMCName(), bmc.ErrUnsupported)
	}
	return up, rd, nil
}

// settingsWriters write the settings steps of a kind, which have no task: BIOS settings are
// Staged for the next reset, the BMC's own Applied at once (their steps' TaskState).
var settingsWriters = map[metalv1alpha1.FirmwareDifferenceKind]struct {
	what, state string
	write       func(up bmc.FirmwareUpdater, ctx context.Context, systemURI string, settings map[string]string) error
}{
	metalv1alpha1.FirmwareDifferenceBIOSSetting: {what: "the BIOS settings", state: "Staged", write: bmc.FirmwareUpdater.StageBIOSSettings},
	metalv1alpha1.FirmwareDifferenceBMCSetting:  {what: "the BMC's settings", state: "Applied", write: bmc.FirmwareUpdater.SetManagerSettings},
}

// staging sends the BIOS settings (one write to the Bios settings object), the BMC's own (one
// write to its attributes) and each image (SimpleUpdate, or a multipart push), one per
// reconcile, writing down each task as it is given (a conflict or a restart sends nothing
// twice). A BMC that refuses fails the update with
// its message; one that cannot be reached is tried again, within the step's time.
func (r *Reconciler) staging(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	if res, done, err := r.timedOut(ctx, sfw, "sending the settings and images"); done {
		return res, err
	}
	if u.HostReset && !r.held(server) {
		return r.lost(ctx, sfw, server)
	}
	var b metalv1alpha1.FirmwareBaseline
	if err := r.Client.Get(ctx, client.ObjectKey{Name: u.Baseline}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonUpdateRefused, "baseline "+u.Baseline+" was deleted before everything was sent")
		}
		return ctrl.Result{}, err
	}
	steps := slices.Clone(u.Steps)
	next := slices.IndexFunc(steps, func(s metalv1alpha1.FirmwareUpdateStep) bool { return s.TaskState == "" })
	if next < 0 {
		return r.move(ctx, sfw, fsm.UpdateEventStaged, metalv1alpha1.ReasonUpdateInstalling, "the BMC is installing: "+progress(steps))
	}
	up, rd, err := r.updater(ctx, server)
	if err != nil {
		return r.retryLater(ctx, sfw, "connecting to the BMC", err)
	}
	if set := settingsWriters[steps[next].Kind]; set.what != "" {
		// Every setting of the kind in one write: to the Bios settings object, or the BMC's own.
		kind, settings := steps[next].Kind, map[string]string{}
		for _, s := range steps {
			if s.Kind == kind {
				settings[s.Name] = s.To
			}
		}
		if err := set.write(up, ctx, server.Spec.SystemURI, settings); err != nil {
			return r.refused(ctx, sfw, server, set.what, err)
		}
		for i := range steps {
			if steps[i].Kind == kind {
				steps[i].TaskState = set.state
			}
		}
		return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps = steps })
	}
	s := &steps[next]
	spec := componentSpec(&b, s.Name)
	if spec == nil || spec.Version != s.To {
		// Changed since it was admitted: what was sent so far is verified by no one. A
		// baseline that wants something else of it retries it (failed).
		return r.fail(ctx, sfw, server, metalv1alpha1.ReasonUpdateRefused, fmt.Sprintf("baseline %s changed what it wants of %s mid-update", b.Name, s.Name))
	}
	inventory, err := rd.FirmwareInventory(ctx, server.Spec.SystemURI) // Dell's ids carry the version: read just before
	if err != nil {
		return r.retryLater(ctx, sfw, "reading the firmware inventory", err)
	}
	req := bmc.UpdateRequest{SystemURI: server.Spec.SystemURI, ImageURL: spec.Image.URL, Targets: targets(inventory, s.Name)}
	if ref := spec.Image.CredentialsSecretRef; ref != nil {
		var secret corev1.Secret
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.Update.Namespace, Name: ref.Name}, &secret); err != nil {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonImageUnavailable,
				fmt.Sprintf("the credentials Secret %s/%s of %s's image cannot be read: %v", r.Update.Namespace, ref.Name, s.Name, err))
		}
		req.Username, req.Password = string(secret.Data["username"]), string(secret.Data["password"])
	}
	pushed := spec.Image
	if spec.Image.ServedBy == metalv1alpha1.ImageServedByBootService {
		served, err := r.servedImage(ctx, sfw, server, next, spec.Image, req.Username, req.Password)
		if err != nil {
			return ctrl.Result{}, err
		}
		if served == "" {
			// Looked for again shortly: the manager does not watch Secrets (it caches none).
			const why = "waiting for the boot service to serve the image"
			again := min(r.Update.taskPoll(), 2*time.Second)
			if u.Message == why {
				return ctrl.Result{RequeueAfter: again}, nil
			}
			res, err := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Message = why })
			if err == nil && !res.Requeue {
				res.RequeueAfter = again
			}
			return res, err
		}
		// The BMC fetches from the boot service, which has the origin's credentials.
		req.ImageURL, req.Username, req.Password = served, "", ""
		pushed.URL = served
	}
	image := &pushedImage{image: pushed, user: req.Username, pass: req.Password, timeout: r.Update.stepTimeout()}
	req.Image = image.open
	task, err := up.StartUpdate(ctx, req)
	image.close()
	switch {
	case image.err != nil:
		return r.fail(ctx, sfw, server, metalv1alpha1.ReasonImageUnavailable, image.err.Error())
	case err != nil:
		return r.refused(ctx, sfw, server, s.Name, err)
	}
	s.Task, s.TaskState = task, string(bmc.TaskNew)
	if task == "" {
		s.TaskState = string(bmc.TaskCompleted)
	}
	return r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps = steps })
}

// componentSpec is the baseline's component called name.
func componentSpec(b *metalv1alpha1.FirmwareBaseline, name string) *metalv1alpha1.BaselineComponent {
	for i := range b.Spec.Components {
		if b.Spec.Components[i].Component == name {
			return &b.Spec.Components[i]
		}
	}
	return nil
}

// targets are the inventory members a baseline's component names: the installed BIOS or BMC
// member by class, others by id or pattern.
func targets(inventory []bmc.FirmwareComponent, name string) []string {
	var out []string
	for _, c := range inventory {
		if !c.Installed || !c.Updateable && c.URI == "" {
			continue
		}
		var match bool
		switch name {
		case string(metalv1alpha1.FirmwareComponentBIOS):
			match = c.Class == bmc.ComponentBIOS
		case string(metalv1alpha1.FirmwareComponentBMC):
			match = c.Class == bmc.ComponentBMC
		default:
			match = matchID(name, c.ID)
		}
		if match && c.URI != "" {
			out = append(out, c.URI)
		}
	}
	return out
}

// progress says where each step stands, for a message.
func progress(steps []metalv1alpha1.FirmwareUpdateStep) string {
	var out []string
	settings, bmcSettings := 0, 0
	for _, s := range steps {
		switch s.Kind {
		case metalv1alpha1.FirmwareDifferenceBIOSSetting:
			settings++
			continue
		case metalv1alpha1.FirmwareDifferenceBMCSetting:
			bmcSettings++
			continue
		}
		p := fmt.Sprintf("%s → %s %s", s.Name, s.To, s.TaskState)
		if s.Percent > 0 && s.TaskState != string(bmc.TaskCompleted) {
			p += fmt.Sprintf(" %d%%", s.Percent)
		}
		out = append(out, p)
	}
	if settings > 0 {
		out = append(out, fmt.Sprintf("%d BIOS settings staged for the next reset", settings))
	}
	if bmcSettings > 0 {
		out = append(out, fmt.Sprintf("%d BMC settings applied", bmcSettings))
	}
	return strings.Join(out, "; ")
}

// installing follows the BMC's tasks to their end.
func (r *Reconciler) installing(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	if res, done, err := r.timedOut(ctx, sfw, "the BMC's tasks"); done {
		return res, err
	}
	if u.HostReset && !r.held(server) {
		return r.lost(ctx, sfw, server)
	}
	up, _, err := r.updater(ctx, server)
	if err != nil {
		return r.retryLater(ctx, sfw, "connecting to the BMC", err)
	}
	steps := slices.Clone(u.Steps)
	running := 0
	for i := range steps {
		s := &steps[i]
		if s.Task == "" || s.TaskState == string(bmc.TaskCompleted) {
			continue
		}
		t, err := up.TaskStatus(ctx, s.Task)
		if err != nil {
			return r.retryLater(ctx, sfw, "reading the task of "+s.Name, err)
		}
		s.TaskState = string(t.State)
		if t.Percent >= 0 {
			s.Percent = int32(min(t.Percent, 100))
		}
		switch {
		case t.Done() && !t.Succeeded():
			msg := fmt.Sprintf("the BMC's task for %s → %s ended %s", s.Name, s.To, t.State)
			if t.Message != "" {
				msg += ": " + t.Message
			}
			return r.move(ctx, sfw, fsm.UpdateEventFail, metalv1alpha1.ReasonUpdateTaskFailed, r.inMaintenance(msg, server, u),
				func(u *metalv1alpha1.FirmwareUpdate) { u.Steps = steps })
		case !t.Done():
			running++
		}
	}
	if running > 0 {
		msg := "the BMC is installing: " + progress(steps)
		if equality.Semantic.DeepEqual(steps, u.Steps) && u.Message == msg {
			return ctrl.Result{RequeueAfter: r.Update.taskPoll()}, nil
		}
		res, err := r.write(ctx, sfw, func(st *metalv1alpha1.ServerFirmwareStatus) { st.Update.Steps, st.Update.Message = steps, msg })
		if err == nil && !res.Requeue {
			res.RequeueAfter = r.Update.taskPoll()
		}
		return res, err
	}
	if !u.HostReset {
		return r.move(ctx, sfw, fsm.UpdateEventInstalled, metalv1alpha1.ReasonWaitingForHost,
			"installed: "+progress(steps)+"; reading the BMC again", func(u *metalv1alpha1.FirmwareUpdate) { u.Steps = steps })
	}
	now := metav1.NewTime(r.now())
	return r.move(ctx, sfw, fsm.UpdateEventInstalled, metalv1alpha1.ReasonUpdateRebooting,
		"installed: "+progress(steps)+"; ending the maintenance so the host boots with it",
		func(u *metalv1alpha1.FirmwareUpdate) { u.Steps, u.ResetTime = steps, &now })
}

// servedImageName is the Secret asking the boot service to serve the image of an update's step.
func servedImageName(server string, step int) string {
	return fmt.Sprintf("firmware-image-%s-%d", server, step)
}

// servedImage asks the boot service to serve image for the update's step (a Secret in its
// namespace, owned by the ServerFirmware, holding the origin's URL, checksum and credentials)
// and returns the URL it serves it at; "" until it says.
func (r *Reconciler) servedImage(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server, step int, image metalv1alpha1.FirmwareImage, user, pass string) (string, error) {
	want := map[string][]byte{metalv1alpha1.FirmwareImageURLKey: []byte(image.URL)}
	if image.Checksum != "" {
		want[metalv1alpha1.FirmwareImageChecksumKey] = []byte(image.Checksum)
	}
	if user != "" || pass != "" {
		want[metalv1alpha1.FirmwareImageUsernameKey], want[metalv1alpha1.FirmwareImagePasswordKey] = []byte(user), []byte(pass)
	}
	var secret corev1.Secret
	key := client.ObjectKey{Namespace: r.Update.BootNamespace, Name: servedImageName(server.Name, step)}
	err := r.APIReader.Get(ctx, key, &secret) // Secrets are not cached
	if err == nil {
		same := true
		for k, v := range want {
			same = same && string(secret.Data[k]) == string(v)
		}
		if same {
			return string(secret.Data[metalv1alpha1.FirmwareImageServedURLKey]), nil
		}
		// Another image than asked (a retry after the baseline changed): asked anew, under
		// another UID, so at another URL.
		if err := r.Client.Delete(ctx, &secret); client.IgnoreNotFound(err) != nil {
			return "", err
		}
		return "", nil
	}
	if !apierrors.IsNotFound(err) {
		return "", err
	}
	secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
		Labels: map[string]string{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: server.Name}}, Data: want}
	if err := controllerutil.SetControllerReference(sfw, &secret, r.Client.Scheme()); err != nil {
		return "", err
	}
	if err := r.Client.Create(ctx, &secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("asking the boot service to serve the image: %w", err)
	}
	return "", nil
}

// forgetServedImages deletes the Secrets by which the boot service serves images for server's
// update, in one request: the URLs die with them.
func (r *Reconciler) forgetServedImages(ctx context.Context, server string) error {
	if r.Update.BootNamespace == "" {
		return nil
	}
	return r.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(r.Update.BootNamespace),
		client.MatchingLabels{metalv1alpha1.LabelFirmwareImage: "true", metalv1alpha1.LabelServer: server})
}
