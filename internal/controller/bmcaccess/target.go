// Package bmcaccess resolves a BMC object to what its client needs (address and credentials)
// and hands out the cached client of a named BMC. The BMC reconciler and the Server reconciler
// both use it; credentials are read here and never logged.
package bmcaccess

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/internal/macdb"
)

// Target resolves the BMC's address and credentials.
func Target(ctx context.Context, c client.Client, b *metalv1alpha1.BMC) (bmc.Target, error) {
	address, err := bmcAddress(ctx, c, b)
	if err != nil {
		return bmc.Target{}, err
	}
	parsed, err := bmc.ParseAddress(address)
	if err != nil {
		return bmc.Target{}, err
	}
	var secret metalv1alpha1.BMCSecret
	if err := c.Get(ctx, client.ObjectKey{Name: b.Spec.BMCSecretRef.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return bmc.Target{}, bmc.Errorf(metalv1alpha1.BMCReasonAuthenticationFailed, "BMCSecret %s not found", b.Spec.BMCSecretRef.Name)
		}
		return bmc.Target{}, err
	}
	return bmc.Target{
		Address:            parsed,
		Credentials:        bmc.Credentials{Username: secret.Spec.Username, Password: secret.Spec.Password},
		InsecureSkipVerify: b.Spec.InsecureSkipVerify,
	}, nil
}

func bmcAddress(ctx context.Context, c client.Client, b *metalv1alpha1.BMC) (string, error) {
	if b.Spec.Access != nil {
		return b.Spec.Access.Address, nil
	}
	var ep metalv1alpha1.Endpoint
	if err := c.Get(ctx, client.ObjectKey{Name: b.Spec.EndpointRef.Name}, &ep); err != nil {
		if apierrors.IsNotFound(err) {
			return "", bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "Endpoint %s not found", b.Spec.EndpointRef.Name)
		}
		return "", err
	}
	if ep.Spec.IP == "" || ep.Status.Protocol == "" {
		return "", bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "Endpoint %s has no IP or matched protocol yet", ep.Name)
	}
	return macdb.Address(macdb.Protocol(ep.Status.Protocol), ep.Status.Scheme, ep.Spec.IP, ep.Status.Port), nil
}

// Connect returns the cached client of the named BMC, for reconcilers of other kinds.
func Connect(ctx context.Context, c client.Client, cache *bmc.Cache, name string) (bmc.Client, error) {
	var b metalv1alpha1.BMC
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &b); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, bmc.Errorf(metalv1alpha1.BMCReasonUnreachable, "BMC %s not found", name)
		}
		return nil, err
	}
	target, err := Target(ctx, c, &b)
	if err != nil {
		return nil, err
	}
	return cache.Get(ctx, name, target)
}
