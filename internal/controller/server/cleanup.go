package server

import (
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/hwrecord"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// cleanup boots metalprobe in wipe mode and returns the server to the pool only when every disk
// of its record is reported wiped as its policy asks. A failed wipe, or a report that lists
// other hardware than the record, sends it to Error: a dirty server never becomes Available.
func (r *Reconciler) cleanup(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	// An install boot the release did not see (the cache had not caught up with its making)
	// must not be served in place of the wipe: it goes when it shows up (its watch wakes us).
	if made, err := probeboot.Made(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
		return step{}, err
	} else if made {
		if err := probeboot.DeleteObjects(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, err
		}
	}
	// A boot whose secrets may be another host's ends now: a report under its token proves
	// nothing. The next attempt boots anew.
	if why, err := probeboot.Ended(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeCleanup); err != nil {
		return step{}, err
	} else if why != "" {
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeCleanup); err != nil {
			return step{}, err
		}
		return step{reason: metalv1alpha1.ReasonProbeBootEnded, message: why, effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
			apply: func(s *metalv1alpha1.Server) { s.Status.LastProbeBootTime = nil }}, nil
	}
	if done, reason, failed := r.cleanVerdict(server, enteredAt(server)); done {
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeCleanup); err != nil {
			return step{}, err
		}
		if failed != "" {
			return step{event: fsm.EventFail, reason: reason, message: failed, effect: setPower(server.Spec.SystemURI, bmc.PowerOff), apply: func(s *metalv1alpha1.Server) {
				setCleaned(s, reason, failed)
			}}, nil
		}
		const off = "powered off, wiped, back in the pool"
		return step{event: fsm.EventCleaned, reason: metalv1alpha1.ReasonWipeVerified, message: "every disk of the server's record reported wiped as the policy asks",
			effect: sendPower(server.Spec.SystemURI, metalv1alpha1.PowerOff, off), warning: metadataOnly(server),
			apply: func(s *metalv1alpha1.Server) {
				markClean(s)
				requestPower(s, metalv1alpha1.PowerOff, off)
			}}, nil
	}
	return r.bootWipe(ctx, server)
}

func markClean(s *metalv1alpha1.Server) {
	setCleaned(s, metalv1alpha1.ReasonWipeVerified,
		fmt.Sprintf("%d disk(s) wiped (%s)%s", len(s.Status.LastWipe.Disks), s.Status.LastWipe.Policy, excludedNote(s)))
	s.Status.CleanupAttempts = 0
}

// excludedNote names the recorded disks that spec.wipeExclusions kept out of the wipe, each
// with its reason; "" when there are none.
func excludedNote(s *metalv1alpha1.Server) string {
	if s.Status.Inventory == nil {
		return ""
	}
	var excluded []string
	for _, disk := range s.Status.Inventory.Storage {
		if ex := metalv1alpha1.ExclusionOf(s.Spec.WipeExclusions, disk); ex != nil {
			excluded = append(excluded, fmt.Sprintf("%s: %s", hwrecord.Describe(disk), ex.Reason))
		}
	}
	if len(excluded) == 0 {
		return ""
	}
	return "; not wiped, as spec.wipeExclusions asks: " + strings.Join(excluded, "; ")
}

// dirty is a server released by a claim whose disks have not been verified wiped since.
func dirty(server *metalv1alpha1.Server) bool {
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionCleaned)
	return c != nil && c.Status == metav1.ConditionFalse
}

// hardwareChanged is the HardwareRecord condition when the last report compared with the
// server's record listed other disks or NICs (the registry kept the record); else nil.
func hardwareChanged(server *metalv1alpha1.Server) *metav1.Condition {
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionHardwareRecord)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return c
}

// cleanVerdict judges a wipe once a report came after since: done when it did; then failed
// says why the server is not clean, under reason (HardwareChanged: the report lists other disks
// or NICs than the server's record; WipeFailed: a recorded disk was not wiped as asked), or is
// empty when every recorded disk was.
func (r *Reconciler) cleanVerdict(server *metalv1alpha1.Server, since time.Time) (done bool, reason, failed string) {
	since = since.Truncate(time.Second)
	changed := hardwareChanged(server)
	w := server.Status.LastWipe
	wipeIn := w != nil && w.ReportedAt != nil && !w.ReportedAt.Time.Before(since)
	if !wipeIn && (changed == nil || changed.LastTransitionTime.Time.Before(since)) {
		return false, "", ""
	}
	if changed != nil {
		return true, metalv1alpha1.ReasonHardwareChanged, changed.Message + "; the server stays in Error: find out why (a disk or NIC replaced, or a report that was not its probe's), then set the " +
			metalv1alpha1.AnnotationRetry + " annotation: its next discovery wipes the disks it finds and records them as the server's; or delete the Server with " + metalv1alpha1.AnnotationDeleteWithoutWipe + "=true to give it up unwiped"
	}
	if failed := r.wipeVerdict(server); failed != "" {
		return true, metalv1alpha1.ReasonWipeFailed, failed
	}
	return true, "", ""
}

// wipeVerdict judges the last wipe report against the server's record of its disks (the
// inventory its discovery recorded, which later reports do not replace), not against the
// report's own list: every recorded disk, removable ones too, but those spec.wipeExclusions
// names and those that can hold no data (metalv1alpha1.NoDataOn), must be reported wiped,
// Succeeded, by a method the policy accepts. A disk the report lists that the record does not
// fails it too. It returns why the wipe failed, naming each disk, or "".
func (r *Reconciler) wipeVerdict(server *metalv1alpha1.Server) string {
	w := server.Status.LastWipe
	policy := cmp.Or(server.Spec.WipePolicy, metalv1alpha1.DefaultWipePolicy)
	var record []metalv1alpha1.StorageDevice
	if server.Status.Inventory != nil {
		record = server.Status.Inventory.Storage
	}
	used := make([]bool, len(w.Disks))
	var bad []string
	for _, disk := range record {
		if metalv1alpha1.NoDataOn(disk) != "" || metalv1alpha1.ExclusionOf(server.Spec.WipeExclusions, disk) != nil {
			continue
		}
		i := resultOf(w.Disks, disk)
		if i < 0 {
			bad = append(bad, hwrecord.Describe(disk)+" (not reported)")
			continue
		}
		used[i] = true
		switch res := w.Disks[i]; {
		case !res.Succeeded:
			bad = append(bad, fmt.Sprintf("%s (%s)", disk.Name, cmp.Or(res.Message, "failed")))
		case !methodSatisfies(res.Method, policy):
			bad = append(bad, fmt.Sprintf("%s (wiped by %s, policy %s)", disk.Name, res.Method, policy))
		}
	}
	for i, res := range w.Disks {
		if !used[i] && !recorded(record, res) {
			bad = append(bad, fmt.Sprintf("%s (serial %q: not a disk of the server's record)", res.Name, res.SerialNumber))
		}
	}
	if w.Policy != policy {
		bad = append(bad, fmt.Sprintf("the probe applied policy %q, not %q", w.Policy, policy))
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	return "wipe failed: " + strings.Join(bad, ", ") + "; the server stays in Error: fix or replace these disks (or set spec.wipePolicy to one they support), then set the " +
		metalv1alpha1.AnnotationRetry + " annotation; or delete the Server with " + metalv1alpha1.AnnotationDeleteWithoutWipe + "=true to give it up unwiped"
}

// resultOf is the index of a recorded disk's result in a wipe report, or -1: found by serial
// number where the disk has one (kernel names may change between boots), else by name.
func resultOf(results []metalv1alpha1.DiskWipe, disk metalv1alpha1.StorageDevice) int {
	for i, res := range results {
		if disk.SerialNumber != "" && res.SerialNumber == disk.SerialNumber || disk.SerialNumber == "" && res.Name == disk.Name {
			return i
		}
	}
	return -1
}

// recorded says whether a wipe result is of a recorded disk (one excluded or holding no data,
// wiped all the same, is no surprise).
func recorded(record []metalv1alpha1.StorageDevice, res metalv1alpha1.DiskWipe) bool {
	for _, disk := range record {
		if resultOf([]metalv1alpha1.DiskWipe{res}, disk) == 0 {
			return true
		}
	}
	return false
}

// methodSatisfies: a disk is wiped as the policy asks only by that policy's method. A secure
// erase is the device's own, read back; a zero-fill is never taken for one (old probes reported
// such a fill as zero-fallback).
func methodSatisfies(method string, policy metalv1alpha1.WipePolicy) bool {
	if policy == metalv1alpha1.WipeErase {
		return eraseSatisfied(method)
	}
	return method == string(policy)
}

// eraseSatisfied: the erase policy is done by the device's own erase (secure) or by zeros over
// the whole device (zero), each read back by the probe; never by a metadata wipe, nor by an old
// probe's zero-fallback, which it did not read back.
func eraseSatisfied(method string) bool {
	return method == string(metalv1alpha1.WipeSecure) || method == string(metalv1alpha1.WipeZero)
}

// metadataOnly is the Warning a server pooled after a metadata wipe records: that wipe leaves
// the data readable. Nil for any other policy.
func metadataOnly(server *metalv1alpha1.Server) *warning {
	w := server.Status.LastWipe
	if w == nil || w.Policy != metalv1alpha1.WipeMetadata {
		return nil
	}
	return &warning{reason: metalv1alpha1.ReasonMetadataWipeOnly, message: fmt.Sprintf("pooled after a metadata-only wipe of %d disk(s): "+
		"partition tables and signatures were cleared, the previous tenant's data was not and is still readable from the raw disks; "+
		"spec.wipePolicy: erase leaves nothing readable", len(w.Disks))}
}

// bootWipe network-boots the probe in wipe mode: boot configuration, Ready, PXE once, power on;
// again after a timeout, up to the attempts allowed; then the server fails to Error.
func (r *Reconciler) bootWipe(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	if last := server.Status.LastProbeBootTime; last != nil {
		if remaining := last.Add(r.Discovery.Timeout).Sub(r.now()); remaining > 0 {
			return awaitReport(remaining), nil
		}
	}
	attempts := server.Status.CleanupAttempts
	if attempts >= r.Discovery.Attempts {
		return step{event: fsm.EventFail, reason: metalv1alpha1.ReasonWipeAttemptsUsedUp,
			message: fmt.Sprintf("no wipe report after %d boots of %v each; %s, then set the %s annotation to try again", attempts, r.Discovery.Timeout, probeBootChecks(r.Probe, server, metalv1alpha1.BootPurposeCleanup), metalv1alpha1.AnnotationRetry)}, nil
	}
	// A BMC that cannot be reached (its BMCSecret or Endpoint gone, or the BMC itself, deleted
	// while a claim kept its server) does not cost a wipe attempt, as it costs no discovery
	// attempt: the server waits for it, its Ready condition saying why, instead of using its
	// attempts up and resting in Error until a person comes. The wipe goes on once it answers.
	if _, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName()); err != nil {
		return step{}, err
	}
	via, err := r.probeMediumOf(ctx, server)
	if err != nil {
		return step{}, err
	}
	if st := via.waitForBMC(); st != nil {
		return *st, nil
	}
	sbc, err := r.probeBootFor(ctx, server, metalv1alpha1.BootPurposeCleanup, nil, via)
	if err != nil {
		return step{}, err
	}
	if sbc.Status.State != metalv1alpha1.BootConfigurationStateReady {
		return r.awaitBootService(sbc), nil
	}
	boot, waiting, err := r.probeBoot(ctx, server, sbc, via)
	if err != nil {
		return step{}, err
	}
	if waiting != nil {
		return *waiting, nil
	}
	n := attempts + 1
	return step{reason: metalv1alpha1.ReasonWipeBooting, message: fmt.Sprintf("attempt %d of %d: %s into %s, power on; %s", n, r.Discovery.Attempts, via.how(), sbc.Name, awaitingReport(r.now().Add(r.Discovery.Timeout))),
		requeueAfter: r.Discovery.Timeout, effect: boot,
		apply: func(s *metalv1alpha1.Server) {
			now := metav1.NewTime(r.now())
			s.Status.LastProbeBootTime = &now
			s.Status.CleanupAttempts = n
		}}, nil
}
