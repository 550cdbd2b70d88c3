package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/internal/probeboot"
	"github.com/ironfleet/ironfleet/internal/registry"
)

// Installing a claim's image (Ironfleet's boot operator):
//
//  1. the probe is network-booted once in provision mode (a boot configuration <server>-provision
//     in the system namespace whose ignition carries the image, its checksum, the root device
//     hints and the digest of the claim's ignition; the probe fetches the ignition itself from
//     the registry, over TLS with its token, for the config drive);
//  2. it writes the image to the chosen disk, verifies it, writes the config drive, reports
//     (status.lastInstall) and powers off;
//  3. the server's boot override is set to the disk persistently and its power follows the
//     claim: every later power-on boots the installed OS, never the network. A BMC that allows
//     only one-time overrides gets one before each power-on Ironfleet sends (fromDisk), and
//     the Provisioned condition says so.
//
// A failed or silent install is booted again, up to InstallAttempts; then the claim shows why
// and nothing more happens until its image changes. A changed image (or checksum) re-provisions:
// the probe wipes the chosen disk's ends before it writes the new image.

// installs says whether claims' images are installed by Ironfleet's probe (Ironfleet's boot
// operator), rather than network-booted by another boot service.
func (r *Reconciler) installs() bool {
	return r.Probe.BootOperator == "" || r.Probe.BootOperator == metalv1alpha1.BootOperatorIronfleet
}

func (r *Reconciler) installAttempts() int32 {
	if r.Discovery.InstallAttempts > 0 {
		return r.Discovery.InstallAttempts
	}
	return r.Discovery.Attempts
}

// installRetryHint ends the message of an install given up on: what starts it again.
const installRetryHint = "nothing more is tried until the claim's spec.image or spec.imageChecksum changes: fix the cause, then change one of them, or delete and re-create the claim"

func (r *Reconciler) installTimeout() time.Duration {
	if r.Discovery.InstallTimeout > 0 {
		return r.Discovery.InstallTimeout
	}
	return r.Discovery.Timeout
}

// heldClaim is the claim the server is bound to, as cached; nil when it is not there (the
// dangling reference is dropped elsewhere).
func (r *Reconciler) heldClaim(ctx context.Context, server *metalv1alpha1.Server) (*metalv1alpha1.ServerClaim, error) {
	ref := server.Spec.ServerClaimRef
	var claim metalv1alpha1.ServerClaim
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &claim); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !ref.Names(&claim) {
		return nil, nil
	}
	return &claim, nil
}

// installed says whether the server's last install is the claim's image, and succeeded.
func installed(server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim) bool {
	last := server.Status.LastInstall
	return last != nil && last.Succeeded && metalv1alpha1.InstallTarget(last.Image, last.ImageChecksum) == claimTarget(claim)
}

func claimTarget(claim *metalv1alpha1.ServerClaim) string {
	return metalv1alpha1.InstallTarget(claim.Spec.Image, claim.Spec.ImageChecksum)
}

// install drives the claim's image onto the server's disk. done: the image is installed and the
// server's power may follow the claim.
func (r *Reconciler) install(ctx context.Context, server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim) (st step, done bool, err error) {
	cond := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionProvisioned)
	target := claimTarget(claim)
	if cond != nil && cond.Status == metav1.ConditionTrue {
		// Provisioned before installs recorded what they wrote (an older operator, which
		// network-booted the image): the tenant's disk is left alone, never installed over.
		if installed(server, claim) || server.Status.LastInstall == nil {
			return step{}, true, nil
		}
		// The claim's image changed (or Provisioned came from a boot without an install):
		// install again, from a new boot.
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, false, err
		}
		return r.reprovision(server, fmt.Sprintf("the claim's image is now %s; installing it", claim.Spec.Image)), false, nil
	}
	// An install under way (or failed) for another image or checksum starts over.
	sbc, err := probeboot.Get(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning)
	if err != nil {
		return step{}, false, err
	}
	haveBoot := sbc != nil
	if haveBoot && sbc.Annotations[metalv1alpha1.AnnotationInstallTarget] != target {
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, false, err
		}
		return r.reprovision(server, fmt.Sprintf("the claim's image is now %s; installing it instead", claim.Spec.Image)), false, nil
	}
	last := server.Status.LastInstall
	if !haveBoot && server.Status.ProvisionAttempts > 0 && (last == nil || metalv1alpha1.InstallTarget(last.Image, last.ImageChecksum) != target) {
		return r.reprovision(server, fmt.Sprintf("the claim's image is now %s; installing it", claim.Spec.Image)), false, nil
	}

	max := r.installAttempts()
	// A boot whose secrets may be another host's ends now; the next attempt boots anew.
	if why, err := probeboot.Ended(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
		return step{}, false, err
	} else if why != "" {
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, false, err
		}
		if server.Status.ProvisionAttempts >= max {
			return r.installFailed(server, metalv1alpha1.ReasonProbeBootEnded, fmt.Sprintf("attempt %d of %d: %s; %s", server.Status.ProvisionAttempts, max, why, installRetryHint)), false, nil
		}
		return r.bootInstall(ctx, server, claim, fmt.Sprintf("attempt %d: %s", server.Status.ProvisionAttempts, why))
	}
	if cond != nil && (cond.Reason == metalv1alpha1.ReasonInstallFailed || cond.Reason == metalv1alpha1.ReasonInstallTimedOut) && server.Status.ProvisionAttempts >= max {
		return wait(cond.Reason, cond.Message, 0), false, nil // until the claim's image changes
	}
	since := server.Status.LastProbeBootTime
	if since != nil && last != nil && last.ReportedAt != nil && !last.ReportedAt.Time.Before(since.Time.Truncate(time.Second)) &&
		metalv1alpha1.InstallTarget(last.Image, last.ImageChecksum) == target {
		// This attempt reported. The boot ends with the install, or with the last attempt; a
		// retry boots the same configuration again.
		if last.Succeeded || server.Status.ProvisionAttempts >= max {
			if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
				return step{}, false, err
			}
		}
		if last.Succeeded {
			return r.bootFromDisk(server, claim, last), false, nil
		}
		failure := fmt.Sprintf("%s: %s", last.Reason, last.Message)
		if last.WipedAfterFailure && !strings.Contains(last.Message, "wiped again") {
			failure += " (the disk was wiped again)"
		}
		if server.Status.ProvisionAttempts >= max {
			return r.installFailed(server, metalv1alpha1.ReasonInstallFailed, fmt.Sprintf("install failed after %d attempt(s): %s; %s", server.Status.ProvisionAttempts, failure, installRetryHint)), false, nil
		}
		return r.bootInstall(ctx, server, claim, fmt.Sprintf("attempt %d failed: %s", server.Status.ProvisionAttempts, failure))
	}
	if since != nil && server.Status.ProvisionAttempts > 0 {
		deadline := since.Add(r.installTimeout())
		if remaining := deadline.Sub(r.now()); remaining > 0 {
			return wait(metalv1alpha1.ReasonInstalling, fmt.Sprintf("attempt %d of %d: installing %s; waiting for the probe's report until %s", server.Status.ProvisionAttempts, max, claim.Spec.Image, deadline.UTC().Format(time.RFC3339)), remaining), false, nil
		}
		if server.Status.ProvisionAttempts >= max {
			if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
				return step{}, false, err
			}
			return r.installFailed(server, metalv1alpha1.ReasonInstallTimedOut, fmt.Sprintf("no install report after %d boot(s) of %v each: the image may download too slowly for --install-timeout, or the probe did not boot or reach the registry (an admin can look at the server's console and the events of boot configuration %s/%s); %s",
				server.Status.ProvisionAttempts, r.installTimeout(), r.Probe.Namespace, probeboot.Name(server.Name, metalv1alpha1.BootPurposeProvisioning), installRetryHint)), false, nil
		}
		return r.bootInstall(ctx, server, claim, fmt.Sprintf("attempt %d did not report within %v", server.Status.ProvisionAttempts, r.installTimeout()))
	}
	return r.bootInstall(ctx, server, claim, "")
}

// reprovision starts the claim's install over: attempts reset, the server off.
func (r *Reconciler) reprovision(server *metalv1alpha1.Server, message string) step {
	const off = "powered off to install the claim's new image"
	return step{reason: metalv1alpha1.ReasonReprovisioning, message: message, effect: sendPower(server.Spec.SystemURI, metalv1alpha1.PowerOff, off),
		apply: func(s *metalv1alpha1.Server) {
			s.Status.ProvisionAttempts = 0
			s.Status.LastProbeBootTime = nil
			setProvisioned(s, metalv1alpha1.ReasonReprovisioning, message)
			requestPower(s, metalv1alpha1.PowerOff, off)
		}}
}

// installFailed gives up on the claim's image: the server stays the claim's, powered off.
func (r *Reconciler) installFailed(server *metalv1alpha1.Server, reason, message string) step {
	const off = "powered off: the claim's image could not be installed"
	r.Events.Eventf(server, nil, corev1.EventTypeWarning, reason, "Install", "%s", message)
	return step{reason: reason, message: message, effect: sendPower(server.Spec.SystemURI, metalv1alpha1.PowerOff, off),
		apply: func(s *metalv1alpha1.Server) {
			setProvisioned(s, reason, message)
			requestPower(s, metalv1alpha1.PowerOff, off)
		}}
}

// bootFromDisk finishes an install: the disk becomes the boot device for good, and the power
// follows the claim.
func (r *Reconciler) bootFromDisk(server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim, last *metalv1alpha1.InstallReport) step {
	power := cmp.Or(server.Spec.Power, metalv1alpha1.PowerOn)
	powerMessage := fmt.Sprintf("power %s for the claim, booting from disk", power)
	message := fmt.Sprintf("installed %s on %s (%d bytes, %s); config drive %s; boots from disk", last.Image, last.Disk, last.Bytes, last.WrittenDigest, cmp.Or(last.ConfigDrive, "none"))
	uri := server.Spec.SystemURI
	eff := sendPower(uri, power, powerMessage)
	// The probe powers the server off once it has reported, and may still be doing so: a
	// power-on now would find it on, and leave it off a moment later. A restart boots the disk
	// whether it finds the server on (the probe is cut short: its install is synced and
	// reported) or off.
	action := bmc.PowerForceRestart
	if power == metalv1alpha1.PowerOff {
		action = bmc.PowerOff
	}
	eff.run = setPower(uri, action).run
	// Off too: the next power-on, whoever asks for it, boots the disk.
	eff = fromDisk(eff, uri, server.EffectiveBootMode())
	r.Events.Eventf(server, nil, corev1.EventTypeNormal, metalv1alpha1.ReasonInstalled, "Install", "%s", message)
	return step{reason: metalv1alpha1.ReasonInstalled, message: message, effect: eff, apply: func(s *metalv1alpha1.Server) {
		s.Status.ProvisionAttempts = 0
		s.Status.LastProbeBootTime = nil
		setProvisioned(s, metalv1alpha1.ReasonInstalled, message)
		requestPower(s, power, powerMessage)
	}}
}

// bootInstall network-boots the probe in provision mode: its boot configuration, Ready, PXE
// once, power on.
func (r *Reconciler) bootInstall(ctx context.Context, server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim, why string) (step, bool, error) {
	via, err := r.probeMediumOf(ctx, server)
	if err != nil {
		return step{}, false, err
	}
	if st := via.waitForBMC(); st != nil {
		return *st, false, nil
	}
	sbc, err := r.probeBootFor(ctx, server, metalv1alpha1.BootPurposeProvisioning, func() (*ignition.Install, error) {
		return r.installOf(ctx, server, claim)
	}, via)
	var unreadable *userDataError
	if errors.As(err, &unreadable) {
		return step{reason: metalv1alpha1.ReasonIgnitionUnreadable, message: unreadable.Error(), requeueAfter: 30 * time.Second, apply: func(s *metalv1alpha1.Server) {
			setProvisioned(s, metalv1alpha1.ReasonIgnitionUnreadable, unreadable.Error())
		}}, false, nil
	}
	if err != nil {
		return step{}, false, err
	}
	if sbc.Status.State != metalv1alpha1.BootConfigurationStateReady {
		return r.installWaitsForBootService(sbc), false, nil
	}
	boot, waiting, err := r.probeBoot(ctx, server, sbc, via)
	if err != nil {
		return step{}, false, err
	}
	if waiting != nil {
		return *waiting, false, nil
	}
	n := server.Status.ProvisionAttempts + 1
	message := fmt.Sprintf("attempt %d of %d: installing %s (%s into %s)", n, r.installAttempts(), claim.Spec.Image, via.how(), sbc.Name)
	if why != "" {
		message = why + "; " + message
	}
	return step{reason: metalv1alpha1.ReasonInstalling, message: message, requeueAfter: r.installTimeout(), effect: boot,
		apply: func(s *metalv1alpha1.Server) {
			now := metav1.NewTime(r.now())
			s.Status.LastProbeBootTime = &now
			s.Status.ProvisionAttempts = n
			setProvisioned(s, metalv1alpha1.ReasonInstalling, message)
			registry.SetProbeCondition(s, "", "") // this boot's probe has not reported yet
		}}, false, nil
}

// installWaitsForBootService waits for the install's boot configuration to be Ready. In Reserved
// Ready is not written, so the wait shows in Provisioned (which the claim mirrors) once the boot
// service has found something wrong with the configuration, or it has taken longer than
// bootServiceGrace (awaitBootService).
func (r *Reconciler) installWaitsForBootService(sbc *metalv1alpha1.ServerBootConfiguration) step {
	st := r.awaitBootService(sbc)
	if st.brief {
		return st
	}
	st.apply = func(s *metalv1alpha1.Server) {
		setProvisioned(s, metalv1alpha1.ReasonWaitingForBootService, st.message)
	}
	return st
}

// userDataError: the claim's ignition cannot be read; the claim says so until it can.
type userDataError struct{ msg string }

func (e *userDataError) Error() string { return e.msg }

// installOf is what the probe installs on server for the claim: image, checksum, hints, and the
// digest of the claim's ignition (read from the API: Secrets are not cached) for the config
// drive, whose meta_data.json also names the server (meta.server). The ignition itself is not
// in the probe's: the probe fetches it from the registry over TLS with its boot's token
// (registry's /v1/userdata), and checks it against this digest.
func (r *Reconciler) installOf(ctx context.Context, server *metalv1alpha1.Server, claim *metalv1alpha1.ServerClaim) (*ignition.Install, error) {
	in := &ignition.Install{Image: claim.Spec.Image, ImageChecksum: claim.Spec.ImageChecksum, RootDeviceHints: claim.Spec.RootDeviceHints,
		Hostname: claim.Name, InstanceID: string(claim.UID), Server: server.Name}
	ref := claim.Spec.IgnitionSecretRef
	if ref == nil {
		return in, nil
	}
	var secret corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: ref.Name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, &userDataError{fmt.Sprintf("ignition Secret %s/%s does not exist", claim.Namespace, ref.Name)}
	case err != nil:
		return nil, err
	}
	data, ok := secret.Data[metalv1alpha1.IgnitionSecretKey]
	if !ok {
		return nil, &userDataError{fmt.Sprintf("ignition Secret %s/%s has no %q key", claim.Namespace, ref.Name, metalv1alpha1.IgnitionSecretKey)}
	}
	if len(data) > metalv1alpha1.MaxUserDataBytes {
		return nil, &userDataError{fmt.Sprintf("ignition Secret %s/%s: %q is %d bytes, more than %d", claim.Namespace, ref.Name, metalv1alpha1.IgnitionSecretKey, len(data), metalv1alpha1.MaxUserDataBytes)}
	}
	in.UserDataSHA256 = ignition.UserDataDigest(data)
	return in, nil
}
