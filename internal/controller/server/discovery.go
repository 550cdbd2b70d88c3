package server

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/identity"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// indexServerBySystemUUID finds the Servers of a machine by its (usable) system UUID.
const indexServerBySystemUUID = "spec.systemUUID"

// indexBySystemUUID registers indexServerBySystemUUID.
func indexBySystemUUID(mgr ctrl.Manager) error {
	return mgr.GetFieldIndexer().IndexField(context.Background(), &metalv1alpha1.Server{}, indexServerBySystemUUID, func(o client.Object) []string {
		if u := identity.Normalize(o.(*metalv1alpha1.Server).Spec.SystemUUID); identity.Usable(u) {
			return []string{u}
		}
		return nil
	})
}

// machineHeldElsewhere is another Server of the same machine (the same usable system UUID)
// that is claimed, may hold a tenant's data, or is being deleted (and so wiped first): a BMC
// deleted while a claim kept its Server, the machine enrolled again by a BMC of another name,
// gets a second Server. That one must not boot the machine (a discovery would reboot the
// tenant's machine under it, and pool it with the tenant's data on its disks) while the first
// holds it. Nil when there is none.
func (r *Reconciler) machineHeldElsewhere(ctx context.Context, server *metalv1alpha1.Server) (*metalv1alpha1.Server, error) {
	u := identity.Normalize(server.Spec.SystemUUID)
	if !identity.Usable(u) {
		return nil, nil // a placeholder UUID says nothing of which machine it is
	}
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerBySystemUUID: u}); err != nil {
		return nil, fmt.Errorf("listing the servers of system UUID %s: %w", u, err)
	}
	for i := range servers.Items {
		other := &servers.Items[i]
		// One BMC's systems are distinct machines, whatever UUID they share (a Supermicro BMC
		// reports its first system's for all): docs/identity.md.
		if other.Name == server.Name || other.BMCName() == server.BMCName() {
			continue
		}
		// A claimed or deleted (to be wiped) server holds the machine. So does one that may
		// hold a tenant's data, from a server whose discovery would pool it clean; a dirty
		// server's discovery is a wipe itself, and two of those never wait for each other.
		if other.Spec.ServerClaimRef != nil || !other.DeletionTimestamp.IsZero() || (mayHoldTenantData(other) && !dirty(server)) {
			return other, nil
		}
	}
	return nil, nil
}

// initial boots the probe: discovery boot configuration, PXE once, power on.
func (r *Reconciler) initial(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	attempts := server.Status.DiscoveryAttempts
	if attempts >= r.Discovery.Attempts {
		return step{event: fsm.EventFail, reason: metalv1alpha1.ReasonAttemptsExhausted,
			message: fmt.Sprintf("no probe report after %d discovery boots of %v each; %s, then set the %s annotation to try again", attempts, r.Discovery.Timeout, probeBootChecks(r.Probe, server, discoveryPurpose(server)), metalv1alpha1.AnnotationRetry)}, nil
	}
	if attempts > 0 {
		// After a timed-out attempt, wait before booting again: a host that never reports is
		// not rebooted in a tight loop.
		if remaining := time.Until(enteredAt(server).Add(r.discoveryBackoff(attempts))); remaining > 0 {
			return wait(metalv1alpha1.ReasonDiscoveryBackoff, fmt.Sprintf("attempt %d of %d timed out; retrying in %v", attempts, r.Discovery.Attempts, remaining.Round(time.Second)), remaining), nil
		}
	}
	if other, err := r.machineHeldElsewhere(ctx, server); err != nil {
		return step{}, err
	} else if other != nil {
		return wait(metalv1alpha1.ReasonMachineHeldElsewhere, fmt.Sprintf("the machine (system UUID %s) is also server %s's, of BMC %s (%s), which may hold a tenant's data: not booted while that server exists",
			server.Spec.SystemUUID, other.Name, other.BMCName(), state(other)), 10*time.Second), nil
	}
	// A dirty server (released, its wipe not verified, then taken to maintenance) is
	// re-discovered with the wipe probe: it never reaches the pool unwiped.
	via, err := r.probeMediumOf(ctx, server)
	if err != nil {
		return step{}, err
	}
	if st := via.waitForBMC(); st != nil {
		return *st, nil
	}
	sbc, err := r.probeBootFor(ctx, server, discoveryPurpose(server), nil, via)
	if err != nil {
		return step{}, err
	}
	if sbc.Status.State != metalv1alpha1.BootConfigurationStateReady {
		return r.awaitBootService(sbc), nil
	}
	// A BMC that does not answer should not cost a discovery attempt.
	if _, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName()); err != nil {
		return step{}, err
	}
	boot, waiting, err := r.probeBoot(ctx, server, sbc, via)
	if err != nil {
		return step{}, err
	}
	if waiting != nil {
		return *waiting, nil
	}
	return step{
		event: fsm.EventDiscover, reason: metalv1alpha1.ReasonProbeBooting,
		message: fmt.Sprintf("attempt %d of %d: %s into %s, power on; %s", attempts+1, r.Discovery.Attempts, via.how(), sbc.Name, awaitingReport(r.now().Add(r.Discovery.Timeout))),
		effect:  boot,
		apply: func(s *metalv1alpha1.Server) {
			s.Status.DiscoveryAttempts++
			now := metav1.NewTime(r.now())
			s.Status.LastProbeBootTime = &now
		},
		requeueAfter: r.Discovery.Timeout,
	}, nil
}

// discoveryBackoff is the pause before discovery attempt n+1.
func (r *Reconciler) discoveryBackoff(n int32) time.Duration {
	d := r.Settings.BackoffBase
	for i := int32(1); i < n && d < r.Settings.BackoffMax; i++ {
		d *= 2
	}
	return min(d, r.Settings.BackoffMax)
}

// discovery waits for the probe's report, then powers off and cleans up; or gives up at the
// timeout.
func (r *Reconciler) discovery(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	// A boot whose secrets may be another host's ends now, report or not: the attempt failed.
	if why, err := probeboot.Ended(ctx, r.Client, r.Probe, server, discoveryPurpose(server)); err != nil || why != "" {
		if err != nil {
			return step{}, err
		}
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, discoveryPurpose(server)); err != nil {
			return step{}, err
		}
		return step{event: fsm.EventDiscoveryTimedOut, reason: metalv1alpha1.ReasonProbeBootEnded, effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
			message: fmt.Sprintf("%s (attempt %d of %d)", why, server.Status.DiscoveryAttempts, r.Discovery.Attempts),
			apply: func(s *metalv1alpha1.Server) {
				setDiscovered(s, metalv1alpha1.ReasonProbeBootEnded, why)
			}}, nil
	}
	started := enteredAt(server)
	deadline := started.Add(r.Discovery.Timeout)
	// A dirty server is discovered by its wipe probe's report, which carries the wipe: an
	// inventory without a verdict on the wipe (one reported by an earlier boot in the same
	// second, or a probe that found no disk to wipe) does not end the attempt, nor stop its
	// clock — a server waiting on it waited for ever.
	// Its verdict may come without a new inventory: a report that lists other hardware than the
	// record leaves the record as it is (cleanVerdict).
	reported := reportTime(server)
	haveReport := !reported.IsZero() && server.Status.Inventory.Source == metalv1alpha1.InventorySourceProbe && !reported.Before(started.Truncate(time.Second))
	wiped, reason, failed := false, "", ""
	if dirty(server) {
		haveReport, reason, failed = r.cleanVerdict(server, started)
		wiped = haveReport && failed == ""
	}
	if haveReport {
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, discoveryPurpose(server)); err != nil {
			return step{}, err
		}
		if failed != "" {
			return step{event: fsm.EventFail, reason: reason, message: failed, effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
				apply: func(s *metalv1alpha1.Server) {
					setCleaned(s, reason, failed)
				}}, nil
		}
		inv := server.Status.Inventory
		const off = "powered off after discovery"
		st := step{event: fsm.EventDiscovered, reason: metalv1alpha1.ReasonReportReceived, effect: sendPower(server.Spec.SystemURI, metalv1alpha1.PowerOff, off),
			message: fmt.Sprintf("probe reported %d CPU cores, %v memory, %d disks, %d NICs", inv.CPU.Cores, inv.Memory.Total.String(), len(inv.Storage), len(inv.NetworkInterfaces)),
			apply: func(s *metalv1alpha1.Server) {
				s.Status.DiscoveryAttempts = 0
				setDiscovered(s, metalv1alpha1.ReasonReportReceived, "inventory from the in-band probe")
				recordHardware(s)
				if wiped {
					markClean(s)
				}
				requestPower(s, metalv1alpha1.PowerOff, off)
			}}
		if wiped {
			st.warning = metadataOnly(server)
		}
		return st, nil
	}
	if remaining := deadline.Sub(r.now()); remaining > 0 {
		until := deadline.UTC().Format(time.RFC3339)
		if !reported.IsZero() && !reported.Before(started.Truncate(time.Second)) && dirty(server) {
			return wait(metalv1alpha1.ReasonAwaitingReport, fmt.Sprintf("inventory received; waiting for the wipe report until %s", until), remaining), nil
		}
		if trouble := r.probeTrouble(ctx, server, started); trouble != nil {
			return wait(trouble.Reason, fmt.Sprintf("the probe booted but says: %s; waiting for its report until %s, then booting it again", trouble.Message, until), remaining), nil
		}
		return awaitReport(remaining), nil
	}
	// Power off but keep the boot configuration: the next attempt reuses it.
	why := "the probe did not report in time"
	if sbc, err := probeboot.Get(ctx, r.Client, r.Probe, server, discoveryPurpose(server)); err == nil && sbc != nil {
		if notRun := loaderNotRun(server, sbc, started); notRun != "" {
			why = notRun
		}
	}
	return step{event: fsm.EventDiscoveryTimedOut, reason: metalv1alpha1.ReasonDiscoveryTimedOut, effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
		message: fmt.Sprintf("no report within %v (attempt %d of %d): %s", r.Discovery.Timeout, server.Status.DiscoveryAttempts, r.Discovery.Attempts, why),
		apply: func(s *metalv1alpha1.Server) {
			setDiscovered(s, metalv1alpha1.ReasonDiscoveryTimedOut, why)
		}}, nil
}

// loaderNotRun says why a network boot that timed out never reached the probe, when its boot
// configuration shows it: the boot service's DHCP offered the server's NIC a loader during the
// attempt (LoaderOffered), and nothing of the boot was asked for after that (no iPXE script or
// GRUB configuration, no ignition, no progress), so the firmware did not run the loader. For
// unsigned iPXE on a UEFI server, the likely cause is Secure Boot, and what to set is said.
// "" when that is not what happened.
func loaderNotRun(server *metalv1alpha1.Server, sbc *metalv1alpha1.ServerBootConfiguration, started time.Time) string {
	since := started.Truncate(time.Second)
	offered := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionLoaderOffered)
	if offered == nil || offered.LastTransitionTime.Time.Before(since) {
		return ""
	}
	if c := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionIgnitionServed); c != nil {
		return ""
	}
	if c := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionBootProgress); c != nil && !c.LastTransitionTime.Time.Before(since) {
		return ""
	}
	if rec := sbc.Status.Secrets; rec != nil && rec.HostAddress != "" {
		return "" // its iPXE script or GRUB configuration was asked for
	}
	why := fmt.Sprintf("%s at %s, and nothing of the boot was asked for after it: the firmware did not run the loader (its console says why)",
		offered.Message, offered.LastTransitionTime.UTC().Format(time.RFC3339))
	switch {
	case offered.Reason == metalv1alpha1.ReasonLoaderIPXE && server.EffectiveBootMode() != metalv1alpha1.BootModeLegacy:
		why += fmt.Sprintf("; a firmware with Secure Boot on refuses unsigned iPXE: if this server's is on, set spec.bootMode to %s (its boot mode is %q%s)",
			metalv1alpha1.BootModeUEFISecureBoot, server.EffectiveBootMode(), bootModeFrom(server))
	case offered.Reason == metalv1alpha1.ReasonLoaderSignedChain:
		why += "; a firmware that refuses shim (\"Verification failed\", \"Access Denied\") has no Microsoft UEFI CA in its db, or revoked this shim in its dbx: see docs/boot.md, Secure Boot"
	}
	return why
}

// bootModeFrom says where a server's boot mode came from, for a message.
func bootModeFrom(server *metalv1alpha1.Server) string {
	switch {
	case server.Spec.BootMode != "":
		return ", from spec.bootMode"
	case server.Status.BootModeSource == metalv1alpha1.BootModeSourceBMC:
		return ", as its BMC reports"
	case server.Status.BootModeSource == metalv1alpha1.BootModeSourceProbe:
		return ", as an earlier probe reported"
	}
	return ": neither its BMC nor a probe said"
}

// waitForBootService waits for a probe boot's configuration to be Ready, and says what its boot
// service found wrong with it, when it did (MACsUnknown, ArtifactMissing, ...): that is what a
// person must fix.
func waitForBootService(sbc *metalv1alpha1.ServerBootConfiguration) step {
	if c := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		return wait(metalv1alpha1.ReasonWaitingForBootService, fmt.Sprintf("boot configuration %s/%s is not Ready: %s: %s", sbc.Namespace, sbc.Name, c.Reason, c.Message), 0)
	}
	return wait(metalv1alpha1.ReasonWaitingForBootService, fmt.Sprintf("waiting for the boot service to mark %s/%s Ready", sbc.Namespace, sbc.Name), 0)
}

// bootServiceGrace is how long a probe boot's configuration may take to become Ready before the
// wait is shown: the boot service usually marks it within a moment, and saying so would cost a
// status write (and an install's, its claim's too).
const bootServiceGrace = 10 * time.Second

// awaitBootService waits for a probe boot's configuration to be Ready: briefly (nothing written
// but with other news; looked at again when the grace is over, and woken sooner by the
// configuration's change) while it is younger than bootServiceGrace and its boot service has
// found nothing wrong with it.
func (r *Reconciler) awaitBootService(sbc *metalv1alpha1.ServerBootConfiguration) step {
	st := waitForBootService(sbc)
	problem := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionReady)
	if remaining := sbc.CreationTimestamp.Add(bootServiceGrace).Sub(r.now()); remaining > 0 && (problem == nil || problem.Status != metav1.ConditionFalse) {
		st.brief, st.requeueAfter = true, remaining
	}
	return st
}

// probeBootFor gets or makes the server's probe boot of purpose (probeboot.Ensure). A boot that
// a brief wait named on the server without writing it (Reconcile) is named again, when its
// configuration, as cached, is still that boot's: its Secret was written for it before it, so
// the three agree, and probeboot.Ensure need not read both around the cache to find out.
func (r *Reconciler) probeBootFor(ctx context.Context, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, install probeboot.InstallSource, via probeMedium) (*metalv1alpha1.ServerBootConfiguration, error) {
	if v, ok := r.unwritten.Load(server.Name); ok {
		if u := v.(unwrittenBoot); u.uid == server.UID && u.boot != "" && server.Status.ProbeBoot != u.boot {
			sbc, err := probeboot.Get(ctx, r.Client, r.Probe, server, purpose)
			if err == nil && sbc != nil && sbc.Annotations[metalv1alpha1.AnnotationProbeBoot] == u.boot && sbc.DeletionTimestamp.IsZero() &&
				!sbc.CreationTimestamp.Before(&server.CreationTimestamp) {
				server.Status.ProbeBoot = u.boot
			}
		}
	}
	return probeboot.Ensure(ctx, r.Client, r.APIReader, r.Probe, server, purpose, install, via.Medium)
}

// probeBootChecks is what a person checks when a server's probe never reports.
func probeBootChecks(pb probeboot.Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) string {
	return fmt.Sprintf("check the server's console (its BMC's serial over LAN), DHCP and PXE on its network, and the BootProgress condition of boot configuration %s/%s",
		pb.Namespace, probeboot.Name(server.Name, purpose))
}

// awaitingReport ends the message of a step that boots the probe: until when its report is
// waited for. The wait that follows (awaitReport) leaves that message as it is.
func awaitingReport(deadline time.Time) string {
	return "waiting for the probe's report until " + deadline.UTC().Format(time.RFC3339)
}

// awaitReport waits for a probe's report without a word: the step that booted it said until
// when (awaitingReport), and writing it again would cost a status write saying nothing new.
func awaitReport(remaining time.Duration) step {
	return step{requeueAfter: remaining}
}

// probeTrouble is what went wrong in this attempt's probe boot before it could report, as the
// boot service heard it from the host (the BootProgress condition of the boot configuration,
// False since this attempt began): a probe that cannot reach the registry can still tell the
// boot service it booted from. Nil when nothing went wrong, or nothing is known.
func (r *Reconciler) probeTrouble(ctx context.Context, server *metalv1alpha1.Server, started time.Time) *metav1.Condition {
	sbc, err := probeboot.Get(ctx, r.Client, r.Probe, server, discoveryPurpose(server))
	if err != nil || sbc == nil {
		return nil
	}
	cond := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionBootProgress)
	if cond == nil || cond.Status != metav1.ConditionFalse || cond.LastTransitionTime.Time.Before(started.Truncate(time.Second)) {
		return nil
	}
	return cond
}

// discoveryPurpose is the probe boot discovery uses: a wipe for a dirty server.
func discoveryPurpose(server *metalv1alpha1.Server) metalv1alpha1.BootPurpose {
	if dirty(server) {
		return metalv1alpha1.BootPurposeCleanup
	}
	return metalv1alpha1.BootPurposeDiscovery
}

// recordHardware makes the discovery's report the server's record of its hardware: later
// reports are compared with its disks and NICs, and a wipe is judged against its disks.
func recordHardware(s *metalv1alpha1.Server) {
	inv := s.Status.Inventory
	at := "its discovery"
	if inv.ReportedAt != nil {
		at = inv.ReportedAt.UTC().Format(time.RFC3339)
	}
	registry.SetHardwareRecord(s, metalv1alpha1.ReasonHardwareRecorded,
		fmt.Sprintf("%d disk(s) and %d NIC(s) recorded from the probe's report of %s: later reports are compared with them, and wipes judged against the disks", len(inv.Storage), len(inv.NetworkInterfaces), at))
}
