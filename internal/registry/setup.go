package registry

import (
	"net"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Setup adds the registry's HTTPS server to the manager, and returns the signer that mints the
// tokens it accepts. probeNamespace holds the probe boots' configurations (the operator's
// system namespace). listening, when set, learns the bound address.
func Setup(mgr ctrl.Manager, addr string, creds *Credentials, probeNamespace string, listening func(net.Addr)) (*Signer, error) {
	signer, err := NewSigner(creds.HMACKey)
	if err != nil {
		return nil, err
	}
	cert, err := creds.TLSCertificate()
	if err != nil {
		return nil, err
	}
	srv := &Server{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Signer: signer, ProbeNamespace: probeNamespace, Log: mgr.GetLogger().WithName("registry")}
	if err := mgr.Add(&Runnable{Addr: addr, Server: srv, TLSCert: cert, Listening: listening}); err != nil {
		return nil, err
	}
	return signer, nil
}
