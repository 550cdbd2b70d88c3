package probeboot

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Delete ends a probe boot of any of purposes: its boot configuration and ignition Secret are
// removed, then the Server stops naming the boot (the registry then refuses its reports).
// Neither is the Server's dependent (Ensure): nothing else removes them. The name goes last, in
// server's status as the reconcile then writes it: a manager killed half way leaves the Server
// naming the boot, so whoever looks next knows something may be left and deletes again.
func Delete(ctx context.Context, c client.Client, cfg Config, server *metalv1alpha1.Server, purposes ...metalv1alpha1.BootPurpose) error {
	for _, purpose := range purposes {
		if err := DeleteObjects(ctx, c, cfg, server, purpose); err != nil {
			return err
		}
	}
	server.Status.ProbeBoot = ""
	return nil
}

// DeleteObjects deletes a probe boot's configuration and ignition Secret, and leaves the boot
// the Server names alone (it may be another purpose's).
func DeleteObjects(ctx context.Context, c client.Client, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	name := Name(server.Name, purpose)
	sbc := &metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: name}}
	if err := c.Delete(ctx, sbc); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return DeleteIgnition(ctx, c, cfg, server, purpose)
}

// DeleteIgnition deletes a probe boot's ignition Secret. Ensure writes it before the boot
// configuration: a manager killed in between leaves the Secret with no configuration, which no
// look at the configurations finds (Secrets are not cached, so none is looked for).
func DeleteIgnition(ctx context.Context, c client.Client, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: ignitionName(Name(server.Name, purpose))}}
	if err := c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s: %w", secret.Name, err)
	}
	return nil
}

// Get is the server's probe boot configuration of purpose as c has it, nil when there is none.
func Get(ctx context.Context, c client.Reader, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (*metalv1alpha1.ServerBootConfiguration, error) {
	var sbc metalv1alpha1.ServerBootConfiguration
	if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: Name(server.Name, purpose)}, &sbc); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return &sbc, nil
}

// Made says whether the server's probe boot of purpose has a boot configuration, as the cache
// (c) has it. A boot's configuration is made before the status write that names it: a manager
// killed in between, or a status write that lost its lock, leaves one the Server does not name.
func Made(ctx context.Context, c client.Reader, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (bool, error) {
	sbc, err := Get(ctx, c, cfg, server, purpose)
	return sbc != nil, err
}

// Ended says why the boot service ended the server's current probe boot of purpose, "" when
// it did not. A configuration whose boot is not the one the Server names is an earlier boot's,
// already dropped.
func Ended(ctx context.Context, c client.Reader, cfg Config, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (string, error) {
	sbc, err := Get(ctx, c, cfg, server, purpose)
	if err != nil || sbc == nil {
		return "", err
	}
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	rec := sbc.Status.Secrets
	if rec == nil || !rec.Ended || boot == "" || rec.Boot != boot || server.Status.ProbeBoot != boot {
		return "", nil
	}
	why := "its secrets were asked for twice, or by another host"
	if c := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionIgnitionServed); c != nil {
		why = c.Message
	}
	return fmt.Sprintf("the boot service ended probe boot %s/%s (%s); it is dropped, its registry token refused, and a new boot with new secrets follows", sbc.Namespace, sbc.Name, why), nil
}

// spent says whether the boot a configuration serves has given out its secrets (its ignition
// was served) or was ended: booting it again would have the host refused, so the next attempt
// needs a new boot.
func spent(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	rec := sbc.Status.Secrets
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	return rec != nil && boot != "" && rec.Boot == boot && (rec.Ended || rec.IgnitionServedTo != "")
}

// MediaURL reads the URL of sbc's ISO from the Secret its status names ("" until the boot
// service has published it). Secrets are not cached: this reads api, once per boot.
func MediaURL(ctx context.Context, api client.Reader, sbc *metalv1alpha1.ServerBootConfiguration) (string, error) {
	ref := sbc.Status.BootMediaSecretRef
	if ref == nil || (sbc.Spec.BootMethod != metalv1alpha1.BootMethodVirtualMedia && sbc.Spec.BootMethod != metalv1alpha1.BootMethodUefiHttp) {
		return "", nil
	}
	var secret corev1.Secret
	if err := api.Get(ctx, client.ObjectKey{Namespace: sbc.Namespace, Name: ref.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("reading the boot media Secret of %s: %w", sbc.Name, err)
	}
	return string(secret.Data[metalv1alpha1.BootMediaURLKey]), nil
}

// DropLeftovers deletes the probe boots an earlier Server named name left behind: the ones made
// before server was, or every one when server is nil and the API says there is no Server of
// that name. A Server that goes through its finalizer ends its probe boots first; one that went
// some other way (its finalizer removed by hand) leaves them, owned by no one, and a Server made
// again under its name must not take them for its own (the boot service would serve the old
// one's wipe, or its discovery with a token no longer valid). Looked up by their names, in the
// cache: a Server without leftovers costs no request.
func DropLeftovers(ctx context.Context, c client.Client, api client.Reader, cfg Config, name string, server *metalv1alpha1.Server) error {
	var left []*metalv1alpha1.ServerBootConfiguration
	for _, purpose := range []metalv1alpha1.BootPurpose{metalv1alpha1.BootPurposeDiscovery, metalv1alpha1.BootPurposeCleanup, metalv1alpha1.BootPurposeProvisioning} {
		var sbc metalv1alpha1.ServerBootConfiguration
		err := c.Get(ctx, client.ObjectKey{Namespace: cfg.Namespace, Name: Name(name, purpose)}, &sbc)
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
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sbc.Namespace, Name: ignitionName(sbc.Name)}}
		if err := c.Delete(ctx, secret); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting leftover ignition Secret %s: %w", secret.Name, err)
		}
	}
	return nil
}

// AdoptAnnotation moves the probe boot a Server of an earlier version names in its metadata
// (metal.ironfleet.dev/probe-boot) to status.probeBoot, in one patch of each, so that a probe
// booted before an upgrade still has its report taken.
func AdoptAnnotation(ctx context.Context, c client.Client, server *metalv1alpha1.Server) error {
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
