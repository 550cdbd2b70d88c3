package controller

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

// ProbeBoot is what the operator needs to boot metalprobe on a server.
type ProbeBoot struct {
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

// bootConfigLabels are the labels of a boot configuration for server, served by operator.
func bootConfigLabels(server *metalv1alpha1.Server, operator string) map[string]string {
	if operator == "" {
		operator = metalv1alpha1.BootOperatorIronfleet
	}
	return map[string]string{metalv1alpha1.LabelServer: server.Name, metalv1alpha1.LabelBootOperator: operator}
}

// probeBootName is the one name a server's probe boot of a purpose can have, so a restarted
// manager finds the boot configuration it made instead of making a second.
func probeBootName(server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) string {
	switch purpose {
	case metalv1alpha1.BootPurposeCleanup:
		return server.Name + "-cleanup"
	case metalv1alpha1.BootPurposeProvisioning:
		return server.Name + "-provision"
	default:
		return server.Name + "-discovery"
	}
}

// ensureProbeBoot gets or creates the server's probe boot configuration and its ignition
// Secret. Neither has an owner reference: they are the Server's (labelled with its name), but
// not its dependents, so that no garbage collection can take them while the Server needs them —
// a Server deleted with --cascade=foreground would have its wipe's boot deleted under it, while
// its finalizer keeps it for that very wipe. The Server ends its probe boots itself (deleteProbeBoot,
// the last step of every probe boot and of its deletion); dropLeftoverProbeBoots catches those of
// a Server that went some other way.
//
// Each probe boot configuration is a boot of its own, named in an annotation on it and in the
// Server's status.probeBoot, and its ignition carries that boot's token: the registry takes
// reports only for the boot the Server names, so a probe of an earlier boot that reports late
// (it kept retrying while the registry was away) cannot pass its wipe off as this one's.
//
// The boot configuration is the record. ensureProbeBoot names the boot on server in memory: the
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
func ensureProbeBoot(ctx context.Context, c client.Client, api client.Reader, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, install installSource, via probeMedium) (*metalv1alpha1.ServerBootConfiguration, error) {
	name := probeBootName(server, purpose)
	key := client.ObjectKey{Namespace: pb.Namespace, Name: name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := c.Get(ctx, key, &sbc)
	if err == nil {
		if err := disownProbeBoot(ctx, c, &sbc); err != nil {
			return nil, err
		}
		if err := setBootMethod(ctx, c, &sbc, via.method); err != nil {
			return nil, err
		}
	}
	if err == nil && (disagree(server, &sbc) || spentProbeBoot(&sbc)) {
		// The cache may not have seen a rename (or a deletion) yet: only the configuration as
		// it is may say which boot the Secret is for.
		var fresh metalv1alpha1.ServerBootConfiguration
		err = api.Get(ctx, key, &fresh)
		sbc = fresh
	}
	if err == nil && spentProbeBoot(&sbc) {
		// Its ignition went out (an attempt that timed out), or its boot service ended it: the
		// boot service serves it no more. The next attempt is a new boot, with new secrets.
		if err := renameProbeBoot(ctx, c, pb, server, purpose, &sbc, install, via); err != nil {
			return nil, err
		}
		return &sbc, nil
	}
	if err == nil {
		network := networkDigest(via.network)
		networkNow := sbc.Annotations[metalv1alpha1.AnnotationProbeNetwork] == network
		if !disagree(server, &sbc) && networkNow {
			return &sbc, nil
		}
		boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
		in, err := resolveInstall(purpose, install)
		if err != nil {
			return nil, err
		}
		secret, err := probeIgnition(c, pb, server, purpose, name, boot, in, via)
		if err != nil {
			return nil, err
		}
		var have corev1.Secret
		err = api.Get(ctx, client.ObjectKeyFromObject(secret), &have)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("reading ignition Secret %s: %w", secret.Name, err)
		}
		if err != nil || !bytes.Equal(have.Data[ignition.SecretKey], secret.Data[ignition.SecretKey]) {
			if err := writeProbeIgnition(ctx, c, secret); err != nil {
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

	boot, err := newProbeBoot()
	if err != nil {
		return nil, err
	}
	in, err := resolveInstall(purpose, install)
	if err != nil {
		return nil, err
	}
	secret, err := probeIgnition(c, pb, server, purpose, name, boot, in, via)
	if err != nil {
		return nil, err
	}
	image, annotations := pb.Image, map[string]string{metalv1alpha1.AnnotationProbeBoot: boot}
	if network := networkDigest(via.network); network != "" {
		annotations[metalv1alpha1.AnnotationProbeNetwork] = network
	}
	if in != nil {
		image, annotations[metalv1alpha1.AnnotationInstallTarget] = in.Image, metalv1alpha1.InstallTarget(in.Image, in.ImageChecksum)
	}
	if err := writeProbeIgnition(ctx, c, secret); err != nil {
		return nil, err
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name,
			Labels:      bootConfigLabels(server, pb.BootOperator),
			Annotations: annotations},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             image,
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name},
			Purpose:           purpose,
			BootMethod:        via.method,
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

// renameProbeBoot makes sbc a new boot: a new name, its Secret rendered with that boot's token
// first, then the configuration renamed (the boot service then serves it as a boot of its own,
// with a new URL), then the Server named after it in memory (the reconcile's status write).
func renameProbeBoot(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, sbc *metalv1alpha1.ServerBootConfiguration, install installSource, via probeMedium) error {
	boot, err := newProbeBoot()
	if err != nil {
		return err
	}
	in, err := resolveInstall(purpose, install)
	if err != nil {
		return err
	}
	secret, err := probeIgnition(c, pb, server, purpose, sbc.Name, boot, in, via)
	if err != nil {
		return err
	}
	if err := writeProbeIgnition(ctx, c, secret); err != nil {
		return err
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		metalv1alpha1.AnnotationProbeBoot, boot, metalv1alpha1.AnnotationProbeNetwork, networkDigest(via.network)))
	if err := c.Patch(ctx, sbc, patch); err != nil {
		return fmt.Errorf("renaming the boot of %s: %w", sbc.Name, err)
	}
	server.Status.ProbeBoot = boot
	return nil
}

// networkDigest is AnnotationProbeNetwork's value for a probe network ("" for none).
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
// The probe's static network (via.network) goes in too: a virtual-media boot has no DHCP to
// ask.
func probeIgnition(c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose, name, boot string, in *ignition.Install, via probeMedium) (*corev1.Secret, error) {
	cfg := ignition.Config{
		RegistryURL: pb.RegistryURL, RegistryCA: pb.RegistryCA, Token: pb.Token(server.Name, boot),
		Server: server.Name, SystemUUID: identity.ServerUUID(server), Mode: ignition.ModeDiscovery,
		Network: via.network,
	}
	switch purpose {
	case metalv1alpha1.BootPurposeCleanup:
		cfg.Mode, cfg.WipePolicy = ignition.ModeWipe, orDefault(server.Spec.WipePolicy, metalv1alpha1.DefaultWipePolicy)
		cfg.WipeExclusions = server.Spec.WipeExclusions
	case metalv1alpha1.BootPurposeProvisioning:
		cfg.Mode, cfg.WipePolicy, cfg.Install = ignition.ModeProvision, orDefault(server.Spec.WipePolicy, metalv1alpha1.DefaultWipePolicy), in
		if in != nil && pb.ImageCA != "" {
			withCA := *in
			withCA.CABundle = pb.ImageCA
			cfg.Install = &withCA
		}
	}
	data, err := ignition.Render(cfg)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name + "-ignition", Labels: map[string]string{metalv1alpha1.LabelServer: server.Name}},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ignition.SecretKey: data},
	}
	return secret, nil
}

// disownProbeBoot lets go of a probe boot made when probe boots were owned by their Server (and
// of its ignition Secret): an owned one is the Server's dependent, which a foreground deletion of
// the Server has the garbage collector delete mid-wipe.
func disownProbeBoot(ctx context.Context, c client.Client, sbc *metalv1alpha1.ServerBootConfiguration) error {
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

// dropLeftoverProbeBoots deletes the probe boots an earlier Server named name left behind: the
// ones made before server was, or every one when server is nil and the API says there is no
// Server of that name. A Server that goes through its finalizer ends its probe boots first; one
// that went some other way (its finalizer removed by hand) leaves them, owned by no one, and a
// Server made again under its name must not take them for its own (the boot service would serve
// the old one's wipe, or its discovery with a token no longer valid). Looked up by their names,
// in the cache: a Server without leftovers costs no request.
func dropLeftoverProbeBoots(ctx context.Context, c client.Client, api client.Reader, pb ProbeBoot, name string, server *metalv1alpha1.Server) error {
	var left []*metalv1alpha1.ServerBootConfiguration
	stub := &metalv1alpha1.Server{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, purpose := range []metalv1alpha1.BootPurpose{metalv1alpha1.BootPurposeDiscovery, metalv1alpha1.BootPurposeCleanup, metalv1alpha1.BootPurposeProvisioning} {
		var sbc metalv1alpha1.ServerBootConfiguration
		err := c.Get(ctx, client.ObjectKey{Namespace: pb.Namespace, Name: probeBootName(stub, purpose)}, &sbc)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		left = append(left, &sbc)
	}
	if len(left) == 0 {
		return nil
	}
	if server == nil {
		// The cache may not have seen a Server made again under this name yet.
		var s metalv1alpha1.Server
		if err := api.Get(ctx, client.ObjectKey{Name: name}, &s); err == nil {
			server = &s
		} else if !apierrors.IsNotFound(err) {
			return err
		}
	}
	for _, sbc := range left {
		if server != nil && !sbc.CreationTimestamp.Before(&server.CreationTimestamp) {
			continue // this Server's own (or made in the same second: not known to be older)
		}
		uid := sbc.UID
		if err := c.Delete(ctx, sbc, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting leftover boot configuration %s: %w", sbc.Name, err)
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sbc.Namespace, Name: sbc.Name + "-ignition"}}
		if err := c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting leftover ignition Secret %s: %w", secret.Name, err)
		}
	}
	return nil
}

// writeProbeIgnition creates a probe boot's ignition Secret, or replaces the ignition of one
// left with another boot's token by an attempt that died half way.
func writeProbeIgnition(ctx context.Context, c client.Client, secret *corev1.Secret) error {
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

// deleteProbeBoot ends a probe boot of any of purposes: its boot configuration and ignition
// Secret are removed, then the Server stops naming the boot (the registry then refuses its
// reports). Neither is the Server's dependent (ensureProbeBoot): nothing else removes them. The
// name goes last, in server's status as the reconcile then writes it: a manager killed half way
// leaves the Server naming the boot, so whoever looks next knows something may be left and
// deletes again.
func deleteProbeBoot(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purposes ...metalv1alpha1.BootPurpose) error {
	for _, purpose := range purposes {
		if err := dropProbeBootObjects(ctx, c, pb, server, purpose); err != nil {
			return err
		}
	}
	server.Status.ProbeBoot = ""
	return nil
}

// dropProbeBootObjects deletes a probe boot's configuration and ignition Secret, and leaves the
// boot the Server names alone (it may be another purpose's).
func dropProbeBootObjects(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	name := probeBootName(server, purpose)
	sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name}}
	if err := c.Delete(ctx, sbc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return dropProbeIgnition(ctx, c, pb, server, purpose)
}

// dropProbeIgnition deletes a probe boot's ignition Secret. ensureProbeBoot writes it before the
// boot configuration: a manager killed in between leaves the Secret with no configuration, which
// no look at the configurations finds (Secrets are not cached, so none is looked for).
func dropProbeIgnition(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: probeBootName(server, purpose) + "-ignition"}}
	if err := c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", secret.Name, err)
	}
	return nil
}

// probeBootMade says whether the server's probe boot of purpose has a boot configuration, as the
// cache has it. A boot's configuration is made before the status write that names it: a
// manager killed in between, or a status write that lost its lock, leaves one the Server does
// not name.
func probeBootMade(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (bool, error) {
	err := c.Get(ctx, client.ObjectKey{Namespace: pb.Namespace, Name: probeBootName(server, purpose)}, &metalv1alpha1.ServerBootConfiguration{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// adoptProbeBootAnnotation moves the probe boot a Server of an earlier version names in its
// metadata (metal.ironfleet.dev/probe-boot) to status.probeBoot, in one patch of each, so that
// a probe booted before an upgrade still has its report taken.
func adoptProbeBootAnnotation(ctx context.Context, c client.Client, server *metalv1alpha1.Server) error {
	boot, ok := server.Annotations[metalv1alpha1.AnnotationProbeBoot]
	if !ok {
		return nil
	}
	if server.Status.ProbeBoot == "" && boot != "" {
		before := server.DeepCopy()
		server.Status.ProbeBoot = boot
		if err := c.Status().Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
			return fmt.Errorf("moving the probe boot of server %s to its status: %w", server.Name, err)
		}
	}
	before := server.DeepCopy()
	delete(server.Annotations, metalv1alpha1.AnnotationProbeBoot)
	if err := c.Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("dropping the probe boot annotation of server %s: %w", server.Name, err)
	}
	return nil
}

// installSource renders the install of a provisioning boot from the claim (and its ignition
// Secret); it is called only when the boot's ignition is written.
type installSource func() (*ignition.Install, error)

// resolveInstall is the install a boot of purpose carries: only provisioning boots have one.
func resolveInstall(purpose metalv1alpha1.BootPurpose, install installSource) (*ignition.Install, error) {
	if purpose != metalv1alpha1.BootPurposeProvisioning {
		return nil, nil
	}
	if install == nil {
		return nil, errors.New("a provisioning boot needs the claim's install")
	}
	return install()
}

// newProbeBoot names a probe boot.
func newProbeBoot() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("naming a probe boot: %w", err)
	}
	return hex.EncodeToString(b), nil
}
