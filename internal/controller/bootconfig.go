package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
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
	// Token mints the per-server token.
	Token func(systemUUID string) string
}

// probeBootName is the one name a server's probe boot of a purpose can have, so a restarted
// manager finds the boot configuration it made instead of making a second.
func probeBootName(server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) string {
	switch purpose {
	case metalv1alpha1.BootPurposeCleanup:
		return server.Name + "-cleanup"
	default:
		return server.Name + "-discovery"
	}
}

// ensureProbeBoot gets or creates the server's probe boot configuration and its ignition
// Secret, both owned by the Server.
func ensureProbeBoot(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (*metalv1alpha1.ServerBootConfiguration, error) {
	name := probeBootName(server, purpose)
	key := client.ObjectKey{Namespace: pb.Namespace, Name: name}
	var sbc metalv1alpha1.ServerBootConfiguration
	err := c.Get(ctx, key, &sbc)
	if err == nil {
		return &sbc, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}

	cfg := ignition.Config{
		RegistryURL: pb.RegistryURL, RegistryCA: pb.RegistryCA, Token: pb.Token(server.Spec.SystemUUID),
		SystemUUID: server.Spec.SystemUUID, Mode: ignition.ModeDiscovery,
	}
	if purpose == metalv1alpha1.BootPurposeCleanup {
		cfg.Mode, cfg.WipePolicy = ignition.ModeWipe, server.Spec.WipePolicy
		if cfg.WipePolicy == "" {
			cfg.WipePolicy = metalv1alpha1.WipeMetadata
		}
	}
	data, err := ignition.Render(cfg)
	if err != nil {
		return nil, err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name + "-ignition"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{ignition.SecretKey: data},
	}
	if err := controllerutil.SetOwnerReference(server, secret, c.Scheme()); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ignition Secret %s: %w", secret.Name, err)
	}
	sbc = metalv1alpha1.ServerBootConfiguration{
		ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name,
			Labels: map[string]string{LabelServer: server.Name}},
		Spec: metalv1alpha1.ServerBootConfigurationSpec{
			ServerRef:         metalv1alpha1.LocalObjectReference{Name: server.Name},
			Image:             pb.Image,
			IgnitionSecretRef: &metalv1alpha1.LocalObjectReference{Name: secret.Name},
			Purpose:           purpose,
		},
	}
	if err := controllerutil.SetOwnerReference(server, &sbc, c.Scheme()); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &sbc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, c.Get(ctx, key, &sbc)
		}
		return nil, fmt.Errorf("creating boot configuration %s: %w", name, err)
	}
	return &sbc, nil
}

// deleteProbeBoot removes a probe boot configuration and its ignition Secret. Both are owned by
// the Server, but garbage collection is not relied on: the server may live on for years.
func deleteProbeBoot(ctx context.Context, c client.Client, pb ProbeBoot, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) error {
	name := probeBootName(server, purpose)
	for _, obj := range []client.Object{
		&metalv1alpha1.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: pb.Namespace, Name: name + "-ignition"}},
	} {
		if err := c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	return nil
}
