// Package certs makes the certificates Ironfleet's own endpoints use where nobody provides one:
// the probe registry, and every simulated BMC.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// SelfSigned returns a PEM certificate and EC key for hosts (DNS names or IP addresses; the
// loopback names are always included). The certificate is its own CA, so a client can trust
// exactly it by putting it in RootCAs. ECDSA P-256 keeps generation cheap enough for thousands
// of simulated BMCs in one process.
func SelfSigned(commonName string, hosts []string, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	cert, key, err := create(commonName, hosts, valid, nil)
	if err != nil {
		return nil, nil, err
	}
	return encode(cert, key)
}

// CA issues serving certificates, so that a client trusting the one CA certificate trusts every
// endpoint it issued for (a site's PKI, or a simulated fleet of thousands of BMCs).
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// NewCA makes a CA valid for valid.
func NewCA(commonName string, valid time.Duration) (*CA, error) {
	// No extended key usage: a CA limited to server authentication could not vouch for the
	// client certificates it issues (IssueClient).
	cert, key, err := createWith(commonName, nil, valid, nil, func(tmpl *x509.Certificate) { tmpl.ExtKeyUsage = nil })
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}, nil
}

// CertPEM is the CA certificate to trust.
func (ca *CA) CertPEM() []byte { return ca.pem }

// Issue returns a PEM serving certificate and EC key for hosts, signed by the CA.
func (ca *CA) Issue(commonName string, hosts []string, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	cert, key, err := create(commonName, hosts, valid, ca)
	if err != nil {
		return nil, nil, err
	}
	return encode(cert, key)
}

// IssueClient returns a PEM client certificate and EC key, signed by the CA, for the user
// commonName in groups (Kubernetes reads the user from the common name and the groups from the
// organizations).
func (ca *CA) IssueClient(commonName string, groups []string, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	cert, key, err := createWith(commonName, nil, valid, ca, func(tmpl *x509.Certificate) {
		tmpl.Subject.Organization = groups
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		tmpl.DNSNames, tmpl.IPAddresses = nil, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return encode(cert, key)
}

// create makes a certificate for hosts: a CA signing itself when issuer is nil, else a leaf
// signed by issuer.
func create(commonName string, hosts []string, valid time.Duration, issuer *CA) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return createWith(commonName, hosts, valid, issuer, nil)
}

// createWith is create with the certificate's template changed by adjust before it is signed.
func createWith(commonName string, hosts []string, valid time.Duration, issuer *CA, adjust func(*x509.Certificate)) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Ironfleet"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(valid),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !ip.Equal(net.IPv4(127, 0, 0, 1)) && !ip.Equal(net.IPv6loopback) && !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else if h != "" && h != "localhost" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	parent, parentKey := tmpl, key
	if issuer != nil {
		tmpl.IsCA, tmpl.KeyUsage = false, x509.KeyUsageDigitalSignature
		parent, parentKey = issuer.cert, issuer.key
	}
	if adjust != nil {
		adjust(tmpl)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	return cert, key, err
}

func encode(cert *x509.Certificate, key *ecdsa.PrivateKey) (certPEM, keyPEM []byte, err error) {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
