package server

import (
	"cmp"
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/fsm"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// available waits for a claim, powered off: the claim controller binds by setting
// spec.serverClaimRef.
func (r *Reconciler) available(server *metalv1alpha1.Server) step {
	if server.Spec.ServerClaimRef == nil {
		return resendPower(server) // the power-off that came with becoming Available
	}
	ref := server.Spec.ServerClaimRef
	return step{event: fsm.EventClaim, reason: metalv1alpha1.ReasonClaimed, message: fmt.Sprintf("bound to claim %s/%s", ref.Namespace, ref.Name),
		apply: func(s *metalv1alpha1.Server) {
			setProvisioned(s, "", "")
			forgetPower(s)
			// The last probe boot (a wipe's, a discovery's) is not this claim's install: an
			// earlier tenant's install of the same image reported in the same second must not
			// be taken for it.
			s.Status.LastProbeBootTime = nil
			s.Status.ProvisionAttempts = 0
		}}
}

// reserved serves the claim: boot its image once when the boot service is ready, then follow
// the claim's power, booting from disk. A released server goes to Cleanup.
func (r *Reconciler) reserved(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	if server.Spec.ServerClaimRef == nil {
		// An install under way ends with the claim: its boot must not outlive it. A boot is
		// counted once it is booted, named in status once its configuration is made, and its
		// configuration may be made without the name's write having landed (a kill, a lost
		// lock): any of the three says one may exist.
		made, err := probeboot.Made(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning)
		if err != nil {
			return step{}, err
		}
		if server.Status.ProvisionAttempts == 0 && server.Status.ProbeBoot == "" && !made {
			// None known, but a manager killed between writing an install's ignition Secret
			// and its configuration leaves the Secret alone: it goes too (one request, on a
			// release, whatever was there).
			if err := probeboot.DeleteIgnition(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
				return step{}, err
			}
			return r.release(server), nil
		}
		if err := probeboot.Delete(ctx, r.Client, r.Probe, server, metalv1alpha1.BootPurposeProvisioning); err != nil {
			return step{}, err
		}
		return r.release(server), nil
	}
	// The claim hands over its power and boot configuration in one write after binding; until
	// then there is nothing to do (powering on by default would boot a claim that wants its
	// server off, and one whose image waits, from disk).
	if server.Spec.Power == "" {
		ref := server.Spec.ServerClaimRef
		return wait(metalv1alpha1.ReasonWaitingForClaim, fmt.Sprintf("waiting for claim %s/%s to hand over its power and boot configuration", ref.Namespace, ref.Name), 0), nil
	}
	// A claim with an image has it installed to disk (Ironfleet's boot operator) or
	// network-booted once (another's); after that, or without an image, the server's power
	// follows the claim, booting from disk.
	installedImage := false
	if r.installs() {
		claim, err := r.heldClaim(ctx, server)
		if err != nil {
			return step{}, err
		}
		if claim == nil {
			return wait(metalv1alpha1.ReasonWaitingForClaim, fmt.Sprintf("claim %s/%s is not in the cache yet", server.Spec.ServerClaimRef.Namespace, server.Spec.ServerClaimRef.Name), time.Second), nil
		}
		if claim.Spec.Image != "" {
			if st, done, err := r.install(ctx, server, claim); err != nil || !done {
				return st, err
			}
			installedImage = installed(server, claim)
		}
	} else if !meta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionProvisioned) && server.Spec.BootConfigurationRef != nil {
		return r.provision(ctx, server)
	}
	var st step
	if d := server.Status.PowerDelivery; d != nil && d.Generation == server.Generation {
		st = resendPower(server)
	} else if want := cmp.Or(server.Spec.Power, metalv1alpha1.PowerOn); want == metalv1alpha1.PowerOff {
		// The claim's power changed since it was last requested: request it again. Off is
		// the tenant's OS shutting down, forced after the grace period.
		st = shutdownStep(server, "power Off for the claim: shut down")
	} else {
		st = powerStep(server, want, fmt.Sprintf("power %s for the claim, booting from disk", want))
	}
	// The disk Ironfleet installed is the next boot of every power-on it sends (a BMC that
	// allows only one-time overrides may boot anything after the last one).
	if installedImage && st.effect.powering == metalv1alpha1.PowerStatePoweringOn {
		st.effect = fromDisk(st.effect, server.Spec.SystemURI, server.EffectiveBootMode())
	}
	return st, nil
}

// provision network-boots the claim's image once, when its boot configuration is Ready: for
// another boot operator, which serves the image itself.
func (r *Reconciler) provision(ctx context.Context, server *metalv1alpha1.Server) (step, error) {
	ref := server.Spec.BootConfigurationRef
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sbc); err != nil {
		if apierrors.IsNotFound(err) {
			return step{}, nil
		}
		return step{}, err
	}
	if sbc.Status.State != metalv1alpha1.BootConfigurationStateReady {
		return step{}, nil // the boot configuration's watch brings us back
	}
	// Power On boots the image now; power Off powers the server off (whatever powered it on
	// meanwhile) and leaves the one-time PXE boot for the first power-on the claim asks for.
	eff := bootOnce(server, bmc.BootPXE, "")
	eff.probeBoot = false // the claim's image: Provisioned says when the BMC took it (below)
	if server.Spec.Power == metalv1alpha1.PowerOff {
		eff = setPower(server.Spec.SystemURI, bmc.PowerOff)
		eff.armsBoot = true
		powerOff := eff.run
		eff.run = func(ctx context.Context, c bmc.Client) error {
			if err := powerOff(ctx, c); err != nil {
				return err
			}
			return c.SetBootOnce(ctx, server.Spec.SystemURI, bmc.BootPXE, server.EffectiveBootMode())
		}
	}
	// Provisioned turns True only once the BMC took the boot: a manager that dies between this
	// status write and the BMC call boots the image again rather than never.
	power := cmp.Or(server.Spec.Power, metalv1alpha1.PowerOn)
	powerMessage := fmt.Sprintf("power %s for the claim", power)
	eff.done = func(s *metalv1alpha1.Server) {
		setProvisioned(s, metalv1alpha1.ReasonImageBooted,
			fmt.Sprintf("PXE once into %s (%s); later boots are from disk", sbc.Name, sbc.Spec.Image))
		powerSent(s, power, powerMessage)
	}
	return step{effect: eff, apply: func(s *metalv1alpha1.Server) {
		setProvisioned(s, metalv1alpha1.ReasonImageBooting,
			fmt.Sprintf("PXE once into %s (%s) requested", sbc.Name, sbc.Spec.Image))
		requestPower(s, power, powerMessage)
	}}, nil
}

// release powers a released server off and sends it to Cleanup, marked dirty until its wipe is
// verified.
func (r *Reconciler) release(server *metalv1alpha1.Server) step {
	return step{event: fsm.EventRelease, reason: metalv1alpha1.ReasonReleased, message: "its claim is gone; powered off for the wipe",
		effect: setPower(server.Spec.SystemURI, bmc.PowerOff),
		apply: func(s *metalv1alpha1.Server) {
			s.Status.CleanupAttempts = 0
			s.Status.ProvisionAttempts = 0
			s.Status.LastProbeBootTime = nil
			// The last wipe was before this tenant: only one reported from now on counts.
			s.Status.LastWipe = nil
			setCleaned(s, metalv1alpha1.ReasonReleased, "released by its claim; not wiped yet")
			setProvisioned(s, "", "")
			forgetPower(s)
		}}
}

// dropDanglingClaim unbinds a server whose claim no longer exists (deleted without its
// finalizer running, or re-created under the same name): it is released like any other.
func (r *Reconciler) dropDanglingClaim(ctx context.Context, server *metalv1alpha1.Server) error {
	ref := server.Spec.ServerClaimRef
	if ref == nil {
		return nil
	}
	var claim metalv1alpha1.ServerClaim
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &claim)
	if err == nil && ref.Names(&claim) {
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	// Read the claim from the API, not the cache: a claim created a moment ago may not be
	// cached yet, and unbinding it would be wrong.
	if apierrors.IsNotFound(err) {
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &claim); err == nil && ref.Names(&claim) {
			return nil
		} else if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	before := server.DeepCopy()
	server.Spec.ServerClaimRef, server.Spec.BootConfigurationRef, server.Spec.Power = nil, nil, ""
	r.Events.Eventf(server, nil, "Warning", metalv1alpha1.ReasonClaimGone, "Release", "claim %s/%s no longer exists; releasing", ref.Namespace, ref.Name)
	return r.Client.Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}
