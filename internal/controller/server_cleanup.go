package controller

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/fsm"
)

// Reasons of cleanup steps.
const (
	ReasonWipeBooting        = "WipeBooting"
	ReasonWipeVerified       = "WipeVerified"
	ReasonWipeFailed         = "WipeFailed"
	ReasonWipeAttemptsUsedUp = "WipeAttemptsExhausted"
)

// cleanup boots metalprobe in wipe mode and returns the server to the pool only when every disk
// is reported wiped as its policy asks. A failed wipe sends it to Error: a dirty server never
// becomes Available.
func (r *ServerReconciler) cleanup(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	// An install boot the release did not see (the cache had not caught up with its making)
	// must not be served in place of the wipe: it goes when it shows up (its watch wakes us).
	if made, err := probeBootMade(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
		return step{}, err
	} else if made {
		if err := dropProbeBootObjects(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, err
		}
	}
	// A boot whose secrets may be another host's ends now: a report under its token proves
	// nothing. The next attempt boots anew.
	if why, err := r.endedProbeBoot(ctx, server, metalv1alpha1.BootPurposeCleanup); err != nil {
		return step{}, err
	} else if why != "" {
		if err := deleteProbeBoot(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeCleanup); err != nil {
			return step{}, err
		}
		return step{reason: ReasonProbeBootEnded, message: why, effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
			apply: func(s *metalv1alpha1.Server) { s.Status.LastProbeBootTime = nil }}, nil
	}
	if wiped, failed := r.wipeVerdict(server, enteredAt(server)); wiped || failed != "" {
		if err := deleteProbeBoot(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeCleanup); err != nil {
			return step{}, err
		}
		if failed != "" {
			return step{event: fsm.EventFail, reason: ReasonWipeFailed, message: failed, effect: setPower(server.Spec.SystemURI, bmc.PowerOff), apply: func(s *metalv1alpha1.Server) {
				setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionCleaned, metav1.ConditionFalse, ReasonWipeFailed, failed)
			}}, nil
		}
		const off = "powered off, wiped, back in the pool"
		return step{event: fsm.EventCleaned, reason: ReasonWipeVerified, message: "every disk reported wiped as the policy asks",
			effect: sendPower(server.Spec.SystemURI, metalv1alpha1.PowerOff, off),
			apply: func(s *metalv1alpha1.Server) {
				markClean(s)
				requestPower(s, metalv1alpha1.PowerOff, off)
			}}, nil
	}
	return r.bootWipe(ctx, server)
}

func markClean(s *metalv1alpha1.Server) {
	setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionCleaned, metav1.ConditionTrue, ReasonWipeVerified,
		fmt.Sprintf("%d disk(s) wiped (%s)", len(s.Status.LastWipe.Disks), s.Status.LastWipe.Policy))
	s.Status.CleanupAttempts = 0
}

// dirty is a server released by a claim whose disks have not been verified wiped since.
func dirty(server *metalv1alpha1.Server) bool {
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionCleaned)
	return c != nil && c.Status == metav1.ConditionFalse
}

// wipeVerdict judges the last wipe report, if it came after since: wiped when every disk of the
// inventory was wiped as the policy asks; failed names the disks that were not.
func (r *ServerReconciler) wipeVerdict(server *metalv1alpha1.Server, since time.Time) (wiped bool, failed string) {
	w := server.Status.LastWipe
	if w == nil || w.ReportedAt == nil || w.ReportedAt.Time.Before(since.Truncate(time.Second)) {
		return false, ""
	}
	policy := orDefault(server.Spec.WipePolicy, metalv1alpha1.WipeMetadata)
	results := map[string]metalv1alpha1.DiskWipe{}
	for _, d := range w.Disks {
		results[d.Name] = d
	}
	var bad []string
	for _, disk := range server.Status.Inventory.Storage {
		if disk.Removable {
			continue
		}
		res, ok := results[disk.Name]
		switch {
		case !ok:
			bad = append(bad, disk.Name+" (not reported)")
		case !res.Succeeded:
			bad = append(bad, fmt.Sprintf("%s (%s)", disk.Name, orDefault(res.Message, "failed")))
		case !methodSatisfies(res.Method, policy):
			bad = append(bad, fmt.Sprintf("%s (wiped by %s, policy %s)", disk.Name, res.Method, policy))
		}
	}
	if w.Policy != policy {
		bad = append(bad, fmt.Sprintf("the probe applied policy %q, not %q", w.Policy, policy))
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return false, "wipe failed: " + strings.Join(bad, ", ") + "; the server stays in Error: fix or replace these disks (or set spec.wipePolicy to one they support), then set the " +
			AnnotationRetry + " annotation; or delete the Server with " + metalv1alpha1.AnnotationDeleteWithoutWipe + "=true to give it up unwiped"
	}
	return true, ""
}

// methodSatisfies: a disk is wiped as the policy asks only by that policy's method. A secure
// erase is the device's own, read back; a zero-fill is never taken for one (old probes reported
// such a fill as zero-fallback).
func methodSatisfies(method string, policy metalv1alpha1.WipePolicy) bool {
	return method == string(policy)
}

// bootWipe network-boots the probe in wipe mode: boot configuration, Ready, PXE once, power on;
// again after a timeout, up to the attempts allowed; then the server fails to Error.
func (r *ServerReconciler) bootWipe(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	if last := server.Status.LastProbeBootTime; last != nil {
		if remaining := last.Add(r.Discovery.Timeout).Sub(r.now()); remaining > 0 {
			return awaitReport(remaining), nil
		}
	}
	attempts := server.Status.CleanupAttempts
	if attempts >= r.Discovery.Attempts {
		return step{event: fsm.EventFail, reason: ReasonWipeAttemptsUsedUp,
			message: fmt.Sprintf("no wipe report after %d boots of %v each; %s, then set the %s annotation to try again", attempts, r.Discovery.Timeout, probeBootChecks(r.Probe, server, metalv1alpha1.BootPurposeCleanup), AnnotationRetry)}, nil
	}
	// A BMC that cannot be reached (its BMCSecret or Endpoint gone, or the BMC itself, deleted
	// while a claim kept its server) does not cost a wipe attempt, as it costs no discovery
	// attempt: the server waits for it, its Ready condition saying why, instead of using its
	// attempts up and resting in Error until a person comes. The wipe goes on once it answers.
	if _, err := connectBMC(ctx, r.Client, r.Clients, bmcName(server)); err != nil {
		return step{}, err
	}
	via, err := r.probeMediumOf(ctx, server)
	if err != nil {
		return step{}, err
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
	return step{reason: ReasonWipeBooting, message: fmt.Sprintf("attempt %d of %d: %s into %s, power on; %s", n, r.Discovery.Attempts, via.how(), sbc.Name, awaitingReport(r.now().Add(r.Discovery.Timeout))),
		requeueAfter: r.Discovery.Timeout, effect: boot,
		apply: func(s *metalv1alpha1.Server) {
			now := metav1.NewTime(r.now())
			s.Status.LastProbeBootTime = &now
			s.Status.CleanupAttempts = n
		}}, nil
}
