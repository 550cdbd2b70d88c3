package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/controller/bmcaccess"
	"github.com/ironfleet/ironfleet/internal/probeboot"
)

// probeMedium is how a server's probe boots: its BMC's boot method, and the static network the
// probe's ignition carries (the Server's spec.probeNetwork, else its BMC's when the BMC manages
// this one system; nil: the probe asks DHCP).
type probeMedium struct {
	probeboot.Medium
	bmc string
	// unsupported is the BMC's Ready message when it found no virtual media.
	unsupported string
	// fallback, for a BMC whose bootMethod is UefiHttp but which cannot boot a URI (its
	// HTTPBoot condition is False), is why its servers boot by PXE instead.
	fallback string
	// undecided, for a BMC whose bootMethod is UefiHttp but which has not yet said whether it
	// can boot a URI (no HTTPBoot condition for its spec as it is), is what the boot waits for:
	// a boot method chosen before the BMC has been asked would be a guess.
	undecided string
}

// waitForBMC is the step a boot waits with while its BMC has not decided how the probe boots;
// nil once it has.
func (m probeMedium) waitForBMC() *step {
	if m.undecided == "" {
		return nil
	}
	st := wait(metalv1alpha1.ReasonWaitingForBMC, m.undecided, 2*time.Second)
	return &st
}

func (m probeMedium) virtualMedia() bool { return m.Method == metalv1alpha1.BootMethodVirtualMedia }

func (m probeMedium) uriBoot() bool { return m.Method == metalv1alpha1.BootMethodUefiHttp }

// how says how a boot reaches the probe, for conditions: "PXE once", "its ISO as virtual
// media, CD once" or "its ISO by UEFI HTTP boot from a URI, once".
func (m probeMedium) how() string {
	switch {
	case m.virtualMedia():
		return "its ISO as virtual media, CD once"
	case m.uriBoot():
		return "its ISO by UEFI HTTP boot from a URI the BMC sets (UefiHttp once)"
	case m.fallback != "":
		return "PXE once (not by a URI from BMC " + m.bmc + ": " + m.fallback + ")"
	}
	return "PXE once"
}

// probeMediumOf reads how the server's probe boots from its BMC (cached: no request).
func (r *Reconciler) probeMediumOf(ctx context.Context, server *metalv1alpha1.Server) (probeMedium, error) {
	via := probeMedium{bmc: server.BMCName(), Medium: probeboot.Medium{Method: metalv1alpha1.BootMethodPXE, Network: server.Spec.ProbeNetwork}}
	if via.bmc == "" {
		return via, nil
	}
	var b metalv1alpha1.BMC
	if err := r.Client.Get(ctx, client.ObjectKey{Name: via.bmc}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return via, nil // connectBMC says so, when the boot needs it
		}
		return via, err
	}
	via.Method = cmp.Or(b.Spec.BootMethod, metalv1alpha1.BootMethodPXE)
	if c := meta.FindStatusCondition(b.Status.Conditions, metalv1alpha1.ConditionReady); c != nil && c.Reason == metalv1alpha1.BMCReasonVirtualMediaUnsupported {
		via.unsupported = c.Message
	}
	if via.uriBoot() && server.EffectiveBootMode() == metalv1alpha1.BootModeLegacy {
		// UEFI HTTP boot is UEFI's: a server that boots Legacy is not switched to UEFI for it.
		via.Method, via.fallback = metalv1alpha1.BootMethodPXE, "the server boots Legacy, and UEFI HTTP boot is UEFI's"
	}
	if via.uriBoot() {
		switch c := meta.FindStatusCondition(b.Status.Conditions, metalv1alpha1.ConditionHTTPBoot); {
		case c == nil || c.ObservedGeneration != b.Generation:
			// The BMC reconciler asks the BMC when it connects (checkHTTPBoot); a server found
			// on it may be reconciled before that answer is written.
			via.undecided = fmt.Sprintf("BMC %s boots by UefiHttp, and has not yet said whether it can boot a URI (its %s condition): the probe boots once it has", b.Name, metalv1alpha1.ConditionHTTPBoot)
		case c.Status == metav1.ConditionFalse:
			via.Method, via.fallback = metalv1alpha1.BootMethodPXE, c.Message
		}
	}
	if via.Network == nil && b.Spec.ProbeNetwork != nil {
		// One address cannot serve two systems: the BMC's is for a BMC of one system.
		var servers metalv1alpha1.ServerList
		if err := r.Client.List(ctx, &servers, client.MatchingLabels{metalv1alpha1.LabelBMC: b.Name}); err != nil {
			return via, err
		}
		if len(servers.Items) == 1 && servers.Items[0].Name == server.Name {
			via.Network = b.Spec.ProbeNetwork
		}
	}
	return via, nil
}

// probeBoot is the effect that boots sbc's probe on the server: PXE once and power on; or, for a
// VirtualMedia BMC, the boot's ISO inserted as the virtual CD, CD once and power on. When the
// boot cannot start yet (the boot service has not published the ISO's URL, or the BMC has no
// virtual media), it returns the step to wait with instead.
func (r *Reconciler) probeBoot(ctx context.Context, server *metalv1alpha1.Server, sbc *metalv1alpha1.ServerBootConfiguration, via probeMedium) (effect, *step, error) {
	eff, waiting, err := r.probeBootEffect(ctx, server, sbc, via)
	if err == nil && waiting == nil {
		// A retry (failedBoots) makes it anew from the configuration as it is then.
		srv, key := server.DeepCopy(), client.ObjectKeyFromObject(sbc)
		eff.again = func(ctx context.Context) (effect, bool, error) {
			var now metalv1alpha1.ServerBootConfiguration
			if err := r.Client.Get(ctx, key, &now); err != nil {
				return effect{}, false, err
			}
			if now.Status.State != metalv1alpha1.BootConfigurationStateReady || reachedHost(&now) || now.Spec.BootMethod != via.Method {
				// Not Ready; or the host has its boot after all (the failed call did act); or
				// the boot method changed: the attempt's timeout decides.
				return effect{}, false, nil
			}
			again, waiting, err := r.probeBoot(ctx, srv, &now, via)
			if err != nil || waiting != nil {
				return effect{}, false, err
			}
			// A host that is on booted meanwhile, or was booted by the call that failed: it is
			// not restarted.
			run := again.run
			again.run = func(ctx context.Context, c bmc.Client) error {
				state, err := c.PowerState(ctx, srv.Spec.SystemURI)
				if err != nil {
					return err
				}
				if state == metalv1alpha1.PowerStateOn || state == metalv1alpha1.PowerStatePoweringOn {
					return nil
				}
				return run(ctx, c)
			}
			return again, true, nil
		}
	}
	return eff, waiting, err
}

// reachedHost says whether a probe boot's host has asked for its secrets: its ignition (or
// ISO) was served, or the boot was ended.
func reachedHost(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	rec := sbc.Status.Secrets
	return rec != nil && (rec.Ended || rec.IgnitionServedTo != "")
}

// httpBootRefused records on the server's BMC that it refused a boot by URI although it showed
// UefiHttp and HttpBootUri: its HTTPBoot condition turns False, and its servers boot by PXE
// from their next attempt on, until the BMC reconnects or its spec changes (checkHTTPBoot looks
// again). A failed write is logged: the next refusal records it.
func (r *Reconciler) httpBootRefused(ctx context.Context, server *metalv1alpha1.Server, refusal error) {
	name := server.BMCName()
	var b metalv1alpha1.BMC
	if name == "" || r.Client.Get(ctx, client.ObjectKey{Name: name}, &b) != nil {
		return
	}
	before := b.DeepCopy()
	bmcaccess.SetHTTPBoot(&b, false, fmt.Sprintf("bootMethod is UefiHttp, but the BMC refused a boot by URI for server %s (%v); its servers boot by PXE instead, until it reconnects or its spec changes", server.Name, refusal))
	if err := r.Client.Status().Patch(ctx, &b, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		log.FromContext(ctx).Info("could not record on the BMC that it refused a boot by URI", "bmc", name, "error", err.Error())
	}
}

// probeBootEffect is probeBoot's effect, or the step to wait with.
func (r *Reconciler) probeBootEffect(ctx context.Context, server *metalv1alpha1.Server, sbc *metalv1alpha1.ServerBootConfiguration, via probeMedium) (effect, *step, error) {
	if !via.virtualMedia() && !via.uriBoot() {
		return bootOnce(server, bmc.BootPXE, ""), nil, nil
	}
	if via.unsupported != "" {
		st := wait(metalv1alpha1.ReasonVirtualMediaUnsupported, fmt.Sprintf("BMC %s boots by VirtualMedia but has none (%s): not booted; set the BMC's spec.bootMethod to PXE, or fix its virtual media", via.bmc, via.unsupported), 30*time.Second)
		return effect{}, &st, nil
	}
	url, err := probeboot.MediaURL(ctx, r.APIReader, sbc)
	if err != nil {
		return effect{}, nil, err
	}
	if url == "" {
		st := wait(metalv1alpha1.ReasonWaitingForBootService, fmt.Sprintf("waiting for the boot service to publish the ISO of %s/%s", sbc.Namespace, sbc.Name), 2*time.Second)
		return effect{}, &st, nil
	}
	if via.uriBoot() {
		return bootURI(server, url), nil, nil
	}
	return bootOnce(server, bmc.BootCd, url), nil, nil
}

// bootURI boots the server once by UEFI HTTP boot from url, which its BMC gives the firmware,
// and powers it on (restarting it if it is on); Secure Boot is matched to spec.bootMode first,
// as bootOnce does. A BMC that cannot (not an HTTPBootControl, or it refuses) fails the step
// with ErrUnsupported: its HTTPBoot condition turns False (httpBootRefused), and the next
// attempt boots by PXE.
func bootURI(server *metalv1alpha1.Server, url string) effect {
	uri, want := server.Spec.SystemURI, server.Spec.BootMode
	return effect{powering: metalv1alpha1.PowerStatePoweringOn, probeBoot: true, uriBoot: true, run: func(ctx context.Context, c bmc.Client) error {
		hc, ok := c.(bmc.HTTPBootControl)
		if !ok {
			return fmt.Errorf("the BMC of %s cannot boot a URI: %w", uri, bmc.ErrUnsupported)
		}
		if err := matchSecureBoot(ctx, c, uri, want); err != nil {
			return err
		}
		if err := hc.SetHTTPBootOnce(ctx, uri, url); err != nil {
			return err
		}
		return powerOnOrRestart(ctx, c, uri)
	}}
}

// powerOnOrRestart powers the system on, or restarts it when it is on. The power state is
// read now: the last poll may be minutes old.
func powerOnOrRestart(ctx context.Context, c bmc.Client, uri string) error {
	state, err := c.PowerState(ctx, uri)
	if err != nil {
		return err
	}
	action := bmc.PowerOn
	if state == metalv1alpha1.PowerStateOn || state == metalv1alpha1.PowerStatePoweringOn {
		action = bmc.PowerForceRestart
	}
	return c.SetPower(ctx, uri, action)
}

// bootOnce sets a one-time boot override to target, in the server's boot mode, and powers the
// server on, restarting it if it is on; with a media URL, the URL is inserted as the virtual
// CD first. A server whose spec.bootMode asks for UEFI with or without Secure Boot has its
// BMC's SecureBootEnable set to match first, where the BMC has the setting: the power-on that
// follows applies it. The power state is read now: the last poll may be minutes old.
func bootOnce(server *metalv1alpha1.Server, target bmc.BootTarget, media string) effect {
	uri, mode, want := server.Spec.SystemURI, server.EffectiveBootMode(), server.Spec.BootMode
	return effect{powering: metalv1alpha1.PowerStatePoweringOn, insertsMedia: media != "", probeBoot: true, run: func(ctx context.Context, c bmc.Client) error {
		if err := matchSecureBoot(ctx, c, uri, want); err != nil {
			return err
		}
		if media != "" {
			if err := c.InsertMedia(ctx, uri, media); err != nil {
				return err
			}
		}
		if err := c.SetBootOnce(ctx, uri, target, mode); err != nil {
			return err
		}
		return powerOnOrRestart(ctx, c, uri)
	}}
}

// matchSecureBoot sets the system's SecureBootEnable to what a UEFI spec.bootMode asks for
// (on for UEFISecureBoot, off for UEFI), where its BMC has the setting; nothing for Legacy or
// no spec.bootMode. A BMC without it is no error: the probe's report shows the mode found, and
// the BootMode condition says when it differs.
func matchSecureBoot(ctx context.Context, c bmc.Client, uri string, want metalv1alpha1.BootMode) error {
	sb, ok := c.(bmc.SecureBootControl)
	if !ok || !want.UEFI() {
		return nil
	}
	changed, err := sb.SetSecureBoot(ctx, uri, want == metalv1alpha1.BootModeUEFISecureBoot)
	if errors.Is(err, bmc.ErrUnsupported) {
		return nil
	}
	if err == nil && changed {
		log.FromContext(ctx).Info("Secure Boot set to match spec.bootMode for the boot that follows", "system", uri, "bootMode", want)
	}
	return err
}

// trackProbeMedia keeps status.probeMediaInserted: set in the status write before a probe
// boot inserts its ISO, and, while it is set, every step outside a probe boot ejects the ISO
// before its own BMC action (or as its only one), clearing it once the eject succeeded. A failed
// eject leaves it set, and the next step tries again. Inside a probe boot the steps that only
// wait leave the ISO alone: the boot's loaders may not have read it yet. The steps that end a
// boot (report received, timed out, installed, failed, released, reprovisioned) all act on the
// power, and eject first; a server that came to rest without one (wipe attempts used up, taken
// into maintenance) ejects at its next look.
func trackProbeMedia(server *metalv1alpha1.Server, st *step) {
	if st.effect.insertsMedia {
		server.Status.ProbeMediaInserted = true
		return
	}
	if !server.Status.ProbeMediaInserted || (st.effect.run == nil && !probeMediaMayGo(server)) {
		return
	}
	uri := server.Spec.SystemURI
	run, done := st.effect.run, st.effect.done
	st.effect.run = func(ctx context.Context, c bmc.Client) error {
		if err := c.EjectMedia(ctx, uri); err != nil && !errors.Is(err, bmc.ErrUnsupported) {
			return fmt.Errorf("ejecting the probe's ISO: %w", err)
		}
		if run != nil {
			return run(ctx, c)
		}
		return nil
	}
	st.effect.done = func(s *metalv1alpha1.Server) {
		s.Status.ProbeMediaInserted = false
		if done != nil {
			done(s)
		}
	}
}

// probeMediaMayGo says whether no probe boot is under way on the server, so that a step that
// only waits may eject a probe ISO left inserted: in Initial (between discovery attempts),
// Available, Maintenance and Error, and in Reserved once the claim's image is installed.
func probeMediaMayGo(server *metalv1alpha1.Server) bool {
	switch server.Status.State {
	case metalv1alpha1.ServerStateInitial, metalv1alpha1.ServerStateAvailable, metalv1alpha1.ServerStateMaintenance, metalv1alpha1.ServerStateError:
		return true
	case metalv1alpha1.ServerStateReserved:
		return meta.IsStatusConditionTrue(server.Status.Conditions, metalv1alpha1.ConditionProvisioned)
	}
	return false
}

// ejectBeforeGoing ejects the probe ISO of a server that goes (its finalizer is about to be
// removed) while one may be inserted: nothing would eject it afterwards. A BMC that cannot be
// reached does not hold the deletion up: an event says the ISO may still be in.
func (r *Reconciler) ejectBeforeGoing(ctx context.Context, server *metalv1alpha1.Server) {
	if !server.Status.ProbeMediaInserted {
		return
	}
	c, err := bmcaccess.Connect(ctx, r.Client, r.Clients, server.BMCName())
	if err == nil {
		err = c.EjectMedia(ctx, server.Spec.SystemURI)
	}
	if err != nil && !errors.Is(err, bmc.ErrUnsupported) {
		r.Events.Eventf(server, nil, corev1.EventTypeWarning, reasonOf(err), "Delete",
			"deleted with a probe ISO that may still be inserted in its BMC's virtual CD (the eject failed: %v): eject it on BMC %s before the machine boots again", err, server.BMCName())
	}
}
