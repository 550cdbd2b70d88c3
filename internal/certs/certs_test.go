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

func TestCAIssuesLeavesTrustedThroughTheCAOnly(t *testing.T) {
	ca, err := NewCA("fleet", time.Hour)
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.Issue("bmc", []string{"127.1.0.7"}, time.Hour)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	assert.False(t, leaf.IsCA, "an issued certificate cannot sign others")

	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.1.0.7"})
	assert.NoError(t, err, "the leaf verifies through the CA for its own loopback address")
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.1.0.8"})
	assert.Error(t, err, "another BMC's address does not verify")

	other, err := NewCA("other", time.Hour)
	require.NoError(t, err)
	otherRoots := x509.NewCertPool()
	require.True(t, otherRoots.AppendCertsFromPEM(other.CertPEM()))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: otherRoots, DNSName: "127.1.0.7"})
	assert.Error(t, err, "another CA does not vouch for it")
}

// A client certificate names its user and groups (as Kubernetes reads them), verifies as a
// client through the CA, and serves nothing.
func TestCAIssuesClientCertificates(t *testing.T) {
	ca, err := NewCA("node", time.Hour)
	require.NoError(t, err)
	certPEM, keyPEM, err := ca.IssueClient("admin", []string{"system:masters"}, time.Hour)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	assert.Equal(t, "admin", leaf.Subject.CommonName)
	assert.Equal(t, []string{"system:masters"}, leaf.Subject.Organization)
	assert.Empty(t, leaf.DNSNames)
	assert.Empty(t, leaf.IPAddresses)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(ca.CertPEM()))
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	assert.NoError(t, err)
	_, err = leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	assert.Error(t, err, "not a serving certificate")
}
