package certs

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelfSignedVerifiesForItsHosts(t *testing.T) {
	certPEM, keyPEM, err := SelfSigned("test", []string{"registry.example", "10.1.2.3", ""}, time.Hour)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	for _, host := range []string{"registry.example", "10.1.2.3", "127.0.0.1", "localhost"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		assert.NoError(t, err, host)
	}
	_, err = leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "other.example"})
	assert.Error(t, err)
}
