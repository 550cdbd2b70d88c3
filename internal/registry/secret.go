package registry

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/internal/certs"
)

// Keys of the registry Secret.
const (
	keyHMAC    = "hmac-key"
	keyTLSCert = corev1.TLSCertKey
	keyTLSKey  = corev1.TLSPrivateKeyKey
)

// Credentials are the registry's token key and TLS identity, kept in one Secret so that every
// manager replica and every restart uses the same ones.
type Credentials struct {
	HMACKey []byte
	CertPEM []byte
	KeyPEM  []byte
}

// TLSCertificate is the registry's serving certificate.
func (c *Credentials) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(c.CertPEM, c.KeyPEM)
}

// LoadOrCreate reads the registry Secret, creating it with a fresh key and a self-signed
// certificate for hosts when it does not exist. Concurrent creators converge on one Secret.
// It talks to the API directly (not through a cache): it runs before the manager starts.
func LoadOrCreate(ctx context.Context, c client.Client, key client.ObjectKey, hosts []string) (*Credentials, error) {
	for attempt := 0; attempt < 2; attempt++ {
		var secret corev1.Secret
		err := c.Get(ctx, key, &secret)
		if err == nil {
			creds := &Credentials{HMACKey: secret.Data[keyHMAC], CertPEM: secret.Data[keyTLSCert], KeyPEM: secret.Data[keyTLSKey]}
			if len(creds.HMACKey) < 32 || len(creds.CertPEM) == 0 || len(creds.KeyPEM) == 0 {
				return nil, fmt.Errorf("registry Secret %s is incomplete: it needs %s (≥32 bytes), %s and %s", key, keyHMAC, keyTLSCert, keyTLSKey)
			}
			return creds, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading registry Secret %s: %w", key, err)
		}
		creds, err := generate(hosts)
		if err != nil {
			return nil, err
		}
		secret = corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{keyHMAC: creds.HMACKey, keyTLSCert: creds.CertPEM, keyTLSKey: creds.KeyPEM},
		}
		if err := c.Create(ctx, &secret); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue // another replica won the race: read its Secret
			}
			return nil, fmt.Errorf("creating registry Secret %s: %w", key, err)
		}
		return creds, nil
	}
	return nil, fmt.Errorf("registry Secret %s keeps changing", key)
}

func generate(hosts []string) (*Credentials, error) {
	hmacKey := make([]byte, 32)
	if _, err := rand.Read(hmacKey); err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := certs.SelfSigned("ironfleet-registry", hosts, 10*365*24*time.Hour)
	if err != nil {
		return nil, err
	}
	return &Credentials{HMACKey: hmacKey, CertPEM: certPEM, KeyPEM: keyPEM}, nil
}
