// Package probeboot is the one builder of boots: it makes, renames, reads the state of and
// ends the ServerBootConfigurations (and their ignition Secrets) that boot metalprobe on a
// server for discovery, install and wipe, and the boot configuration a claim hands another boot
// operator (claim.go). The reconcilers call it; nothing else writes boot configurations.
package probeboot

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/identity"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// Config is what the operator needs to boot metalprobe on a server.
type Config struct {
	// Namespace holds the boot configurations and ignition Secrets of probe boots.
	Namespace string
	// Image is the metalprobe image the boot service serves.
	Image string
	// RegistryURL is where the probe reports, and RegistryCA how it trusts it.
	RegistryURL string
	RegistryCA  string
	// ImageCA is a PEM bundle the probe also trusts for claims' images (--image-ca-file).
	ImageCA string
	// Token mints the token of one probe boot of the named server.
	Token func(server, boot string) string
	// BootOperator names the boot service that serves the boot configurations the operator
	// makes (metalv1alpha1.LabelBootOperator; empty: Ironfleet's).
	BootOperator string
}

// Medium is how a probe boots: its boot method (the configuration's spec.bootMethod), and the
// static network its ignition carries (nil: the probe asks DHCP).
type Medium struct {
	Method  metalv1alpha1.BootMethod
	Network *metalv1alpha1.ProbeNetwork
}

// InstallSource renders the install of a provisioning boot from the claim (and its ignition
// Secret); it is called only when the boot's ignition is written.
type InstallSource func() (*ignition.Install, error)

// labels are the labels of a boot configuration for server, served by operator.
func labels(server string, operator string) map[string]string {
	if operator == "" {
		operator = metalv1alpha1.BootOperatorIronfleet
	}
	return map[string]string{metalv1alpha1.LabelServer: server, metalv1alpha1.LabelBootOperator: operator}
}

// Name is the one name a server's probe boot of a purpose can have, so a restarted manager
// finds the boot configuration it made instead of making a second.
func Name(server string, purpose metalv1alpha1.BootPurpose) string {
	switch purpose {
	case metalv1alpha1.BootPurposeCleanup:
		return server + "-cleanup"
	case metalv1alpha1.BootPurposeProvisioning:
		return server + "-provision"
	default:
		return server + "-discovery"
	}
}

// ignitionName is the name of the ignition Secret of the probe boot configuration named name.
func ignitionName(name string) string { return name + "-ignition" }

// Ensure gets or creates the server's probe boot configuration and its ignition Secret.
// Neither has an owner reference: they are the Server's (labelled with its name), but not its
// dependents, so that no garbage collection can take them while the Server needs them — a
// Server deleted with --cascade=foreground would have its wipe's boot deleted under it, while
// its finalizer keeps it for that very wipe. The Server ends its probe boots itself (Delete, the
// last step of every probe boot and of its deletion); DropLeftovers catches those of a Server
// that went some other way.
//
// Each probe boot configuration is a boot of its own, named in an annotation on it and in the
// Server's status.probeBoot, and its ignition carries that boot's token: the registry takes
// reports only for the boot the Server names, so a probe of an earlier boot that reports late
// (it kept retrying while the registry was away) cannot pass its wipe off as this one's.
//
// The boot configuration is the record. Ensure names the boot on server in memory: the
// reconcile's one status write records it (under its optimistic lock), after the Secret and
// the configuration are written. A manager killed (or a status write that lost its lock) in
// between leaves the Server naming another boot than the configuration, or none, and a manager
// killed while renaming a configuration can leave its Secret with another boot's token; when
// the Server's name differs from the configuration's, the configuration and the Secret are read
// through api (around the cache, which may lag: Secrets are not cached at all) and the Secret is
// rewritten for the configuration's boot before the Server is named after it. A configuration
// is only named after a boot once that boot's Secret is written, and so is the Server, so a
// Server and configuration that agree have a Secret that agrees too: only a disagreement costs
// the read.
//
// A provisioning boot installs the claim's image: install renders that part of its ignition (it
// reads the claim's ignition Secret, so it is called only when the ignition is written), and the
// configuration's spec.image is the claim's image.
//
// via is how the probe boots: the configuration's spec.bootMethod follows it (a configuration
// made for another method is changed, and its boot service serves it anew), and its network
// goes into the ignition.
func Ensure(ctx context.Context, c client.Client, api client.Reader, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, install InstallSource, via Medium) (*metalv1alpha1.ServerBootConfiguration, error) {
	name := Name(server.Name, purpose)
	key := client.ObjectKey{Namespace: cfg.Namespace, Name: name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := c.Get(ctx, key, &sbc)
	if err == nil {
		if err := disown(ctx, c, &sbc); err != nil {
			return nil, err
		}
		if err := setBootMethod(ctx, c, &sbc, via.Method); err != nil {
			return nil, err
		}
	}
	if err == nil && (disagree(server, &sbc) || spent(&sbc)) {
		// The cache may not have seen a rename (or a deletion) yet: only the configuration as
		// it is may say which boot the Secret is for.
		var fresh metalv1alpha1.ServerBootConfiguration
		err = api.Get(ctx, key, &fresh)
		sbc = fresh
	}
	if err == nil && spent(&sbc) {
		// Its ignition went out (an attempt that timed out), or its boot service ended it: the
		// boot service serves it no more. The next attempt is a new boot, with new secrets.
		if err := rename(ctx, c, cfg, server, purpose, &sbc, install, via); err != nil {
			return nil, err
		}
		return &sbc, nil
	}
	if err == nil {
		network := networkDigest(via.Network)
		networkNow := sbc.Annotations[metalv1alpha1.AnnotationProbeNetwork] == network
		if !disagree(server, &sbc) && networkNow {
			return &sbc, nil
		}
		boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
		in, err := resolveInstall(purpose, install)
		if err != nil {
			return nil, err
		}
		secret, err := probeIgnition(cfg, server, purpose, name, boot, in, via)
		if err != nil {
			return nil, err
		}
		var have corev1.Secret
		err = api.Get(ctx, client.ObjectKeyFromObject(secret), &have)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading ignition Secret %s: %w", secret.Name, err)
		}
		if err != nil || !bytes.Equal(have.Data[ignition.SecretKey], secret.Data[ignition.SecretKey]) {
			if err := writeIgnition(ctx, c, secret); err != nil {
				return nil, err
			}
		}
		if !networkNow {
			// The probe network changed (an admin fixed it after a boot that never came up):
			// the same boot's next attempt takes the new one, and the boot service renders its
			// ISO anew.
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, metalv1alpha1.AnnotationProbeNetwork, network))
			if err := c.Patch(ctx, &sbc, patch); err != nil {
				return nil, fmt.Errorf("recording the probe network of %s: %w", name, err)
			}
		}
		server.Status.ProbeBoot = boot
		return &sbc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}

	boot, err := newBoot()
	if err != nil {
		return nil, err
	}
	in, err := resolveInstall(purpose, install)
	if err != nil {
		return nil, err
	}
	secret, err := probeIgnition(cfg, server, purpose, name, boot, in, via)
	if err != nil {
		return nil, err
	}
	image, annotations := cfg.Image, map[string]string{metalv1alpha1.AnnotationProbeBoot: boot}
	if network := networkDigest(via.Network); network != "" {
		annotations[metalv1alpha1.AnnotationProbeNetwork] = network
	}
	if in != nil {
		image, annotations[metalv1alpha1.AnnotationInstallTarget] = in.Image, metalv1alpha1.InstallTarget(in.Image, in.ImageChecksum)
	}
	if err := writeIgnition(ctx, c, secret); err != nil {
		return nil, err
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name,
			Labels:      labels(server.Name, cfg.BootOperator),
			Annotations: annotations},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             image,
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name},
			Purpose:           purpose,
			BootMethod:        via.Method,
		},
	}
	if err := c.Create(ctx, &sbc); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating boot configuration %s: %w", name, err)
		}
		// The cache had not seen it yet. Its Secret now carries this boot's token, so it is
		// this boot now; and the caller gets it (or an error), never nil and nil. Killed
		// before this rename, the next look finds the configuration naming its old boot and
		// puts the Secret back to that one.
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, metalv1alpha1.AnnotationProbeBoot, boot))
		if err := c.Patch(ctx, &sbc, patch); err != nil {
			return nil, fmt.Errorf("renaming the boot of %s: %w", name, err)
		}
	}
	server.Status.ProbeBoot = boot
	return &sbc, nil
}

// rename makes sbc a new boot: a new name, its Secret rendered with that boot's token first,
// then the configuration renamed (the boot service then serves it as a boot of its own, with a
// new URL), then the Server named after it in memory (the reconcile's status write).
func rename(ctx context.Context, c client.Client, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, sbc *metalv1alpha1.ServerBootConfiguration, install InstallSource, via Medium) error {
	boot, err := newBoot()
	if err != nil {
		return err
	}
	in, err := resolveInstall(purpose, install)
	if err != nil {
		return err
	}
	secret, err := probeIgnition(cfg, server, purpose, sbc.Name, boot, in, via)
	if err != nil {
		return err
	}
	if err := writeIgnition(ctx, c, secret); err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		metalv1alpha1.AnnotationProbeBoot, boot, metalv1alpha1.AnnotationProbeNetwork, networkDigest(via.Network)))
	if err := c.Patch(ctx, sbc, patch); err != nil {
		return fmt.Errorf("renaming the boot of %s: %w", sbc.Name, err)
	}
	server.Status.ProbeBoot = boot
	return nil
}

// networkDigest is metalv1alpha1.AnnotationProbeNetwork's value for a probe network ("" for
// none).
func networkDigest(n *metalv1alpha1.ProbeNetwork) string {
	if n == nil {
		return ""
	}
	b, _ := json.Marshal(n)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// setBootMethod makes an existing probe boot configuration boot by method (it was made when its
// BMC booted another way).
func setBootMethod(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration, method metalv1alpha1.BootMethod) error {
	if orDefault(sbc.Spec.BootMethod, metalv1alpha1.BootMethodPXE) == orDefault(method, metalv1alpha1.BootMethodPXE) {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"bootMethod":%q}}`, method))
	if err := c.Patch(ctx, sbc, patch); err != nil {
		return fmt.Errorf("setting the boot method of %s to %s: %w", sbc.Name, method, err)
	}
	return nil
}

// orDefault is v, or def when v is empty.
func orDefault[T ~string](v, def T) T {
	if v == "" {
		return def
	}
	return v
}

// disagree says whether the Server names another boot than its probe boot configuration (one
// from before boots were named has none, and nothing to disagree with).
func disagree(server *metalv1alpha1.Server, sbc *metalv1alpha1.ServerBootConfiguration) bool {
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	return boot != "" && server.Status.ProbeBoot != boot
}

// probeIgnition is the ignition Secret of one probe boot of a server: its token names the
// server and the boot, so the same boot always renders the same Secret. The system UUID goes in
// only when it is the server's identity (identity.ServerUUID): the probe then wipes and installs
// only on a host that reads that UUID. A placeholder or shared UUID would stop the right host.
//
// The probe's static network (via.Network) goes in too: a virtual-media boot has no DHCP to
// ask.
func probeIgnition(cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, name, boot string, in *ignition.Install, via Medium) (*corev1.Secret, error) {
	ign := ignition.Config{
		RegistryURL: cfg.RegistryURL, RegistryCA: cfg.RegistryCA, Token: cfg.Token(server.Name, boot),
		Server: server.Name, SystemUUID: identity.ServerUUID(server), Mode: ignition.ModeDiscovery,
		Network: via.Network,
	}
	switch purpose {
	case metalv1alpha1.BootPurposeCleanup:
		ign.Mode, ign.WipePolicy = ignition.ModeWipe, orDefault(server.Spec.WipePolicy, metalv1alpha1.DefaultWipePolicy)
		ign.WipeExclusions = server.Spec.WipeExclusions
	case metalv1alpha1.BootPurposeProvisioning:
		ign.Mode, ign.WipePolicy, ign.Install = ignition.ModeProvision, orDefault(server.Spec.WipePolicy, metalv1alpha1.DefaultWipePolicy), in
		if in != nil && cfg.ImageCA != "" {
			withCA := *in
			withCA.CABundle = cfg.ImageCA
			ign.Install = &withCA
		}
	}
	data, err := ignition.Render(ign)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: ignitionName(name), Labels: map[string]string{metalv1alpha1.LabelServer: server.Name}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ignition.SecretKey: data},
	}
	return secret, nil
}

// disown lets go of a probe boot made when probe boots were owned by their Server (and of its
// ignition Secret): an owned one is the Server's dependent, which a foreground deletion of the
// Server has the garbage collector delete mid-wipe.
func disown(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration) error {
	if len(sbc.OwnerReferences) == 0 {
		return nil
	}
	disown := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"ownerReferences":null}}`))
	if ref := sbc.Spec.IgnitionSecretRef; ref != nil {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sbc.Namespace, Name: ref.Name}}
		if err := c.Patch(ctx, secret, disown); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("letting go of ignition Secret %s: %w", ref.Name, err)
		}
	}
	if err := c.Patch(ctx, sbc, disown); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("letting go of boot configuration %s: %w", sbc.Name, err)
	}
	return nil
}

// writeIgnition creates a probe boot's ignition Secret, or replaces the ignition of one left
// with another boot's token by an attempt that died half way.
func writeIgnition(ctx context.Context, c client.Client, secret *corev1.Secret) error {
	err := c.Create(ctx, secret)
	if apierrors.IsAlreadyExists(err) {
		if err := c.Patch(ctx, secret, client.Merge); err != nil {
			return fmt.Errorf("updating ignition Secret %s: %w", secret.Name, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating ignition Secret %s: %w", secret.Name, err)
	}
	return nil
}

// resolveInstall is the install a boot of purpose carries: only provisioning boots have one.
func resolveInstall(purpose metalv1alpha1.BootPurpose, install InstallSource) (*ignition.Install, error) {
	if purpose != metalv1alpha1.BootPurposeProvisioning {
		return nil, nil
	}
	if install == nil {
		return nil, errors.New("a provisioning boot needs the claim's install")
	}
	return install()
}

// newBoot names a probe boot.
func newBoot() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("naming a probe boot: %w", err)
	}
	return hex.EncodeToString(b), nil
}
