package firmware

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/ptr"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// rebooting ends the maintenance and waits for the server to leave it: a pool server is
// re-discovered (its probe boots: the reset that applies what was staged, and the host's own
// report), a claimed one goes back to its claim, powered as the claim asks.
func (r *Reconciler) rebooting(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	if res, done, err := r.timedOut(ctx, sfw, "the server leaving its maintenance"); done {
		return res, err
	}
	if err := r.deleteMaintenance(ctx, server.Name); err != nil {
		return ctrl.Result{}, err
	}
	if server.Status.State == metalv1alpha1.ServerStateMaintenance || server.Spec.MaintenanceRef != nil {
		return ctrl.Result{}, nil // the server's change wakes this
	}
	how := "re-discovered: its probe reports what the host runs"
	if server.Spec.ServerClaimRef != nil {
		how = "back with its claim " + server.Spec.ServerClaimRef.Namespace + "/" + server.Spec.ServerClaimRef.Name
	}
	return r.move(ctx, sfw, fsm.UpdateEventRebooted, metalv1alpha1.ReasonWaitingForHost, "the server left its maintenance, "+how,
		func(u *metalv1alpha1.FirmwareUpdate) { u.Maintenance = nil })
}

// verifying waits for the BMC, read after the reset (and after a pool server's probe report),
// to report what each step sent (read() writes down what it found of each, Read), and for a
// pool server's probe to report, from the host's own SMBIOS, the BIOS version its BMC reports.
func (r *Reconciler) verifying(ctx context.Context, sfw *metalv1alpha1.ServerFirmware, server *metalv1alpha1.Server) (ctrl.Result, error) {
	u := sfw.Status.Update
	since := u.StateTime.Time
	if u.ResetTime != nil {
		since = u.ResetTime.Time
	}
	inv := server.Status.Inventory
	pool := u.HostReset && server.Spec.ServerClaimRef == nil
	reported := inv != nil && inv.Source == metalv1alpha1.InventorySourceProbe && inv.ReportedAt != nil && !inv.ReportedAt.Time.Before(since)
	if res, done, err := r.timedOut(ctx, sfw, "the BMC and the host to agree with what was sent"); done {
		return res, err
	}
	if pool && !reported {
		return ctrl.Result{}, nil // its report wakes this; the step's time bounds the wait
	}
	if pool {
		since = inv.ReportedAt.Time
	}
	read := sfw.Status.LastReadTime
	if read == nil || !read.Time.After(since) {
		// Times are kept to the second: a read in since's second may have been before it.
		// The first read from the next second on is after it.
		if wait := since.Truncate(time.Second).Add(time.Second).Sub(r.now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
		return ctrl.Result{}, errReadAgain
	}
	if !apimeta.IsStatusConditionTrue(sfw.Status.Conditions, metalv1alpha1.ConditionFirmwareRead) {
		return ctrl.Result{}, nil // read again after the failed read's retry (readDue)
	}
	var disagree []string
	for _, s := range u.Steps {
		if !stepDone(s) {
			disagree = append(disagree, fmt.Sprintf("%s is %q, not %q", s.Name, ptr.Deref(s.Read, ""), s.To))
		}
	}
	if len(disagree) > 0 {
		if pool {
			return r.fail(ctx, sfw, server, metalv1alpha1.ReasonBMCDisagrees,
				"after the update and the host's reset the BMC reports "+strings.Join(disagree, "; "))
		}
		// A BMC may show its new firmware only once it has reset itself, and a claimed host
		// applies what was staged when its claim powers it on: the BMC is read again now and
		// then (a version its polls show wakes this at once); the step's time bounds the wait.
		if left := read.Add(r.reverify()).Sub(r.now()); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		return ctrl.Result{}, errReadAgain
	}
	verified := "the BMC, read after the reset, reports what baseline " + u.Baseline + " wanted"
	if pool {
		for _, s := range u.Steps {
			if s.Kind != metalv1alpha1.FirmwareDifferenceComponent || s.Name != string(metalv1alpha1.FirmwareComponentBIOS) {
				continue
			}
			host := ""
			if inv.DMI != nil {
				host = inv.DMI.BIOS.Version
			}
			if !sameVersion(host, sfw.Status.BIOSVersion) {
				return r.fail(ctx, sfw, server, metalv1alpha1.ReasonHostDisagrees,
					fmt.Sprintf("the host's own SMBIOS (its probe's report of %s) says BIOS version %q, its BMC %q",
						inv.ReportedAt.UTC().Format(time.RFC3339), host, sfw.Status.BIOSVersion))
			}
			verified += fmt.Sprintf(", and the host's own SMBIOS agrees (BIOS %s)", host)
		}
	} else if u.HostReset {
		verified += "; the host's own word comes at its next probe boot (it is claimed: no probe runs under its tenant)"
	}
	if err := r.untaint(ctx, server); err != nil {
		return ctrl.Result{}, err
	}
	return r.move(ctx, sfw, fsm.UpdateEventVerified, metalv1alpha1.ReasonUpdateSucceeded, verified)
}

// reverify is how often a claimed server's BMC is read while it does not show the update yet.
func (r *Reconciler) reverify() time.Duration { return 6 * r.Update.taskPoll() }

// stepDone says whether what the BMC read after the reset (Read) is what the step sent.
func stepDone(s metalv1alpha1.FirmwareUpdateStep) bool {
	if s.Read == nil {
		return false
	}
	if s.Kind == metalv1alpha1.FirmwareDifferenceBIOSSetting || s.Kind == metalv1alpha1.FirmwareDifferenceBMCSetting {
		return sameValue(s.To, *s.Read)
	}
	for _, v := range strings.Split(*s.Read, ", ") {
		if v != s.To {
			return false
		}
	}
	return true
}

// readSteps writes down, on an update being verified, what a fresh read found of each step
// (st has the read's findings whole: the cached copy does not).
func readSteps(st *metalv1alpha1.ServerFirmwareStatus) {
	u := st.Update
	if u == nil || u.State != metalv1alpha1.FirmwareUpdateVerifying {
		return
	}
	for i := range u.Steps {
		s := &u.Steps[i]
		var v string
		switch s.Kind {
		case metalv1alpha1.FirmwareDifferenceBIOSSetting:
			if st.BIOS != nil {
				v = st.BIOS.Attributes[s.Name]
			}
		case metalv1alpha1.FirmwareDifferenceBMCSetting:
			if st.BMC != nil {
				v = st.BMC.Attributes[s.Name]
			}
		default:
			v = strings.Join(componentVersions(s.Name, st), ", ")
		}
		s.Read = &v
	}
}

// errReadAgain asks Reconcile to read the BMC now, whatever readDue says.
var errReadAgain = errors.New("the update needs a read of the BMC")

// sameVersion says whether the host's SMBIOS BIOS version is the BMC's: equal, or one the
// other followed by a space and more (a date, a build).
func sameVersion(host, bmcVersion string) bool {
	host, bmcVersion = strings.TrimSpace(host), strings.TrimSpace(bmcVersion)
	return host != "" && (host == bmcVersion || strings.HasPrefix(host, bmcVersion+" ") || strings.HasPrefix(bmcVersion, host+" "))
}
