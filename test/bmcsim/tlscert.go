package bmcsim

import (
	"crypto/tls"
	"net"
	"time"

	"github.com/ironfleet/ironfleet/internal/certs"
)

// selfSignedCert makes the kind of certificate a BMC ships with: self-signed and unique per
// BMC, so clients must either trust it explicitly (CACertPEM) or skip verification.
func selfSignedCert(ip net.IP) (tls.Certificate, []byte, error) {
	var hosts []string
	if ip != nil {
		hosts = append(hosts, ip.String())
	}
	certPEM, keyPEM, err := certs.SelfSigned("bmcsim", hosts, 365*24*time.Hour)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	return cert, certPEM, err
}
