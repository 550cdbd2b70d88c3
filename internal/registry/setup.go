package registry

import (
	"context"
	"net"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Setup adds the registry's Server index and its HTTPS server to the manager, and returns the
// signer that mints the tokens it accepts. listening, when set, learns the bound address.
func Setup(mgr ctrl.Manager, addr string, creds *Credentials, listening func(net.Addr)) (*Signer, error) {
	signer, err := NewSigner(creds.HMACKey)
	if err != nil {
		return nil, err
	}
	cert, err := creds.TLSCertificate()
	if err != nil {
		return nil, err
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &metalv1alpha1.Server{}, IndexServerByUUID, func(o client.Object) []string {
		if uuid := o.(*metalv1alpha1.Server).Spec.SystemUUID; uuid != "" {
			return []string{uuid}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	srv := &Server{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Signer: signer, Log: mgr.GetLogger().WithName("registry")}
	if err := mgr.Add(&Runnable{Addr: addr, Server: srv, TLSCert: cert, Listening: listening}); err != nil {
		return nil, err
	}
	return signer, nil
}
