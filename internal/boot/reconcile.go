package boot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// verdict is whether a boot configuration can be served, and if not why.
type verdict struct {
	ready   bool
	reason  string
	message string
	// recheck: the missing thing is a file, not watched; look again after this long.
	recheck time.Duration
	// setMedia: status.bootMediaSecretRef becomes mediaSecret ("": none).
	setMedia    bool
	mediaSecret string
}

func notReady(reason, format string, args ...any) verdict {
	return verdict{reason: reason, message: fmt.Sprintf(format, args...)}
}

// Reconcile marks a boot configuration Ready when everything its boot needs is there, and
// Error with a reason a person understands when not. It writes status only when it changes.
// A deleted configuration needs nothing: nothing about it is kept but the cache's copy.
func (s *Service) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if !s.servedNamespace(req.Namespace) {
		return ctrl.Result{}, nil
	}
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := s.client.Get(ctx, req.NamespacedName, &sbc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sbc.DeletionTimestamp.IsZero() || !s.ours(&sbc) {
		return ctrl.Result{}, nil // gone, or another boot operator's
	}
	var server metalv1alpha1.Server
	err := s.client.Get(ctx, client.ObjectKey{Name: sbc.Spec.ServerRef.Name}, &server)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("reading server %s: %w", sbc.Spec.ServerRef.Name, err)
	}
	var v verdict
	switch {
	case err != nil && s.cfg.ServerFilter != nil:
		// Whether a missing server is this service's to boot cannot be told: another boot
		// service may serve it. Leave the configuration to it; the Server watch brings it back.
		return ctrl.Result{}, nil
	case err != nil:
		v = notReady(metalv1alpha1.ReasonServerNotFound, "server %s does not exist", sbc.Spec.ServerRef.Name)
	case !s.served(&server):
		return ctrl.Result{}, nil // another boot service's server
	default:
		v, err = s.check(ctx, &sbc, &server)
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	if !servesISO(&sbc) {
		v.setMedia, v.mediaSecret = true, "" // a boot that was VirtualMedia has no ISO any more
	}
	if !v.ready {
		s.media.embeds.drop(s.tokens.token(&sbc)) // its ISO is not served: nothing of it is kept
	}
	if err := s.writeVerdict(ctx, &sbc, v); err != nil {
		return ctrl.Result{}, err
	}
	if v.ready {
		// Files on disk are not watched: a Ready boot is re-checked too, so an artifact
		// removed under it turns it to Error instead of failing the next host that boots.
		v.recheck = s.cfg.RecheckInterval
	}
	return ctrl.Result{RequeueAfter: v.recheck}, nil
}

// check decides whether the boot can be served, in the order a person would fix things.
func (s *Service) check(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration, server *metalv1alpha1.Server) (verdict, error) {
	if ended(sbc) {
		// Its secrets may be another host's: nothing of it is served again, whatever else is
		// right with it. The operator makes a new boot.
		why := "its secrets were asked for by more than one host"
		if c := meta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionIgnitionServed); c != nil && c.Status == metav1.ConditionFalse {
			why = c.Reason + ": " + c.Message
		}
		return notReady(metalv1alpha1.ReasonBootEnded, "the boot service ended this boot (%s); nothing of it is served again", why), nil
	}
	if virtualMedia(sbc) {
		return s.checkVirtualMedia(ctx, sbc, server)
	}
	macs := serverMACs(server)
	if uriBoot(sbc) && (s.leases == nil || len(macs) > 0) {
		// Its DHCP, when it is ours, must know its NICs to give it an address.
		return s.checkVirtualMedia(ctx, sbc, server)
	}
	if len(macs) == 0 {
		return notReady(metalv1alpha1.ReasonMACsUnknown, "server %s has no NIC MAC address in status.inventory.networkInterfaces (before its first probe report they come from its BMC's Redfish EthernetInterfaces) and no spec.bootMACAddress: DHCP could not tell it from other hosts; set spec.bootMACAddress to the MAC of the NIC it boots from (IPMI BMCs list no NICs), check what the BMC reports, or serve it with another boot operator", server.Name), nil
	}
	required := s.requiredFiles()
	if secureBoot(server) {
		required = append(required, s.signedChainFiles()...)
	}
	for _, f := range required {
		if err := regularFile(f); err != nil {
			v := notReady(metalv1alpha1.ReasonArtifactMissing, "%s: %v", f, err)
			v.recheck = s.cfg.RecheckInterval
			return v, nil
		}
	}
	if _, v, err := s.checkProbeIgnition(ctx, sbc); err != nil || !v.ready {
		return v, err
	}
	return verdict{ready: true, reason: metalv1alpha1.ReasonBootReady,
		message: fmt.Sprintf("serving the metalprobe (%s) to server %s over DHCP, TFTP and HTTP%s; MACs %s", strings.ToLower(string(sbc.Spec.Purpose)), server.Name, chainNote(server), strings.Join(macs, ", "))}, nil
}

// checkVirtualMedia is check for a virtual-media boot: no MACs, DHCP, TFTP or iPXE needed, but
// the template ISO, an ignition that fits in it, and the Secret publishing the ISO's URL, which
// is written before the configuration is marked Ready so that whoever sees Ready finds it.
func (s *Service) checkVirtualMedia(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration, server *metalv1alpha1.Server) (verdict, error) {
	data, v, err := s.checkProbeIgnition(ctx, sbc)
	if err != nil || !v.ready {
		return v, err
	}
	if v := s.checkMedia(sbc, data); !v.ready {
		return v, nil
	}
	v, err = s.publishMedia(ctx, sbc)
	if err != nil || !v.ready {
		return v, err
	}
	v.reason = metalv1alpha1.ReasonBootReady
	how := "as virtual media"
	if uriBoot(sbc) {
		how = "as an ISO its firmware fetches by UEFI HTTP boot at the URI its BMC sets (DHCP: an address only)"
	}
	v.message = fmt.Sprintf("serving the metalprobe (%s) to server %s %s: the ISO's URL is in Secret %s/%s (key %s)",
		strings.ToLower(string(sbc.Spec.Purpose)), server.Name, how, sbc.Namespace, v.mediaSecret, MediaURLKey)
	return v, nil
}

// checkProbeIgnition checks the ignition, and for a Provisioning boot that it is the probe's
// provision-mode one.
func (s *Service) checkProbeIgnition(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration) ([]byte, verdict, error) {
	data, v, err := s.checkIgnition(ctx, sbc)
	if err != nil || !v.ready {
		return nil, v, err
	}
	if sbc.Spec.Purpose == metalv1alpha1.BootPurposeProvisioning {
		// Images are installed by the probe, in provision mode: this boot service never
		// network-boots an OS image itself.
		if cfg, err := ignition.Decode(data); err != nil || cfg.Mode != ignition.ModeProvision || cfg.Install == nil {
			return nil, notReady(metalv1alpha1.ReasonImageNotSupported, "purpose Provisioning: this boot service installs images with the metalprobe, and the ignition in Secret %s/%s is not the probe's provision-mode ignition (the operator makes it for a ServerClaim's image); it does not network-boot an OS image itself",
				sbc.Namespace, sbc.Spec.IgnitionSecretRef.Name), nil
		}
	}
	return data, v, nil
}

// chainNote says, in a Ready message, that a server gets the signed chain.
func chainNote(server *metalv1alpha1.Server) string {
	if secureBoot(server) {
		return " (Secure Boot: the signed chain, shim → GRUB → kernel, over TFTP)"
	}
	return ""
}

// requiredFiles are the files every probe boot needs.
func (s *Service) requiredFiles() []string {
	files := []string{filepath.Join(s.cfg.ProbeDir, ArtifactKernel), filepath.Join(s.cfg.ProbeDir, ArtifactInitramfs)}
	for _, b := range IPXEBinaries {
		files = append(files, filepath.Join(s.cfg.IPXEDir, b))
	}
	return files
}

func regularFile(path string) error {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("no such file")
	case err != nil:
		return err
	case !st.Mode().IsRegular():
		return errors.New("not a regular file")
	case st.Size() == 0:
		return errors.New("empty file")
	}
	return nil
}

// checkIgnition checks that the ignition Secret can be read and has the ignition. It reads the
// Secret from the cache (the Secret watch re-runs this when it changes); only errors other than
// a missing or forbidden Secret are returned, to be retried with backoff.
func (s *Service) checkIgnition(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration) ([]byte, verdict, error) {
	ref := sbc.Spec.IgnitionSecretRef
	if ref == nil || ref.Name == "" {
		return nil, notReady(metalv1alpha1.ReasonIgnitionUnreadable, "spec.ignitionSecretRef is not set: the probe would boot without knowing where to report"), nil
	}
	var secret corev1.Secret
	err := s.client.Get(ctx, client.ObjectKey{Namespace: sbc.Namespace, Name: ref.Name}, &secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, notReady(metalv1alpha1.ReasonIgnitionUnreadable, "ignition Secret %s/%s does not exist", sbc.Namespace, ref.Name), nil
	case apierrors.IsForbidden(err):
		return nil, notReady(metalv1alpha1.ReasonIgnitionUnreadable, "ignition Secret %s/%s cannot be read by the boot service: %s", sbc.Namespace, ref.Name, apierrors.ReasonForError(err)), nil
	case err != nil:
		return nil, verdict{}, fmt.Errorf("reading ignition Secret %s: %w", ref.Name, err)
	}
	data := secret.Data[ignition.SecretKey]
	if len(data) == 0 {
		return nil, notReady(metalv1alpha1.ReasonIgnitionUnreadable, "ignition Secret %s/%s has no %q", sbc.Namespace, ref.Name, ignition.SecretKey), nil
	}
	return data, verdict{ready: true}, nil
}

// writeVerdict records the verdict as state and Ready condition, if either changes. The patch
// carries an optimistic lock: the conditions list is replaced whole by a merge patch, and the
// BootProgress condition the HTTP side writes must not be lost.
func (s *Service) writeVerdict(ctx context.Context, sbc *metalv1alpha1.ServerBootConfiguration, v verdict) error {
	updated := sbc.DeepCopy()
	state, status := metalv1alpha1.BootConfigurationStateError, metav1.ConditionFalse
	if v.ready {
		state, status = metalv1alpha1.BootConfigurationStateReady, metav1.ConditionTrue
	}
	updated.Status.State = state
	if v.setMedia {
		updated.Status.BootMediaSecretRef = nil
		if v.mediaSecret != "" {
			updated.Status.BootMediaSecretRef = &metalv1alpha1.LocalObjectReference{Name: v.mediaSecret}
		}
	}
	mediaChanged := !equality.Semantic.DeepEqual(updated.Status.BootMediaSecretRef, sbc.Status.BootMediaSecretRef)
	changed := meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{
		Type: metalv1alpha1.ConditionReady, Status: status, Reason: v.reason, Message: v.message,
		ObservedGeneration: sbc.Generation,
	})
	if !changed && !mediaChanged && sbc.Status.State == state {
		return nil
	}
	if err := s.client.Status().Patch(ctx, updated, client.MergeFromWithOptions(sbc, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			// The cache had an older copy; the newer one's watch event brings it back here.
			return nil
		}
		return client.IgnoreNotFound(fmt.Errorf("writing the status of boot configuration %s: %w", sbc.Name, err))
	}
	log.FromContext(ctx).Info("boot configuration checked", "state", state, "reason", v.reason)
	return nil
}
