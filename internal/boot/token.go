package boot

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// URLKeySecretKey is the key of the URL key in the Secret LoadOrCreateURLKey keeps.
const URLKeySecretKey = "url-key"

// tokenSigner mints the token of a boot's URL, <public-url>/boot/<token>.
//
// The token is an HMAC over what makes the boot this one boot: the configuration's namespace,
// name and UID (a re-created configuration is another boot), and the probe boot it names (or,
// for a configuration not made by Ironfleet's operator, its generation). Nothing is stored: a
// restarted service with the same key mints the same tokens, and the token dies with the
// configuration it was minted for. It is a bearer secret for the ignition, which holds the
// probe's registry token: it is never logged.
type tokenSigner struct{ key []byte }

func (s tokenSigner) token(sbc *metalv1alpha1.ServerBootConfiguration) string {
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	if boot == "" {
		boot = "generation:" + strconv.FormatInt(sbc.Generation, 10)
	}
	mac := hmac.New(sha256.New, s.key)
	for _, part := range []string{"ironfleet-boot-url/v1", sbc.Namespace, sbc.Name, string(sbc.UID), boot} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// LoadURLKeyFile reads a URL key from a file (at least MinURLKeyBytes bytes, used as they are).
func LoadURLKeyFile(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the URL key: %w", err)
	}
	if len(key) < MinURLKeyBytes {
		return nil, fmt.Errorf("URL key %s: %d bytes, want at least %d", path, len(key), MinURLKeyBytes)
	}
	return key, nil
}

// LoadOrCreateURLKey reads the URL key from the Secret at key, creating the Secret with a new
// random key on first start. Two services starting at once agree: the loser of the create
// reads the winner's key.
func LoadOrCreateURLKey(ctx context.Context, c client.Client, key client.ObjectKey) ([]byte, error) {
	var secret corev1.Secret
	err := c.Get(ctx, key, &secret)
	if apierrors.IsNotFound(err) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return nil, fmt.Errorf("making a URL key: %w", err)
		}
		secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{URLKeySecretKey: b}}
		err = c.Create(ctx, &secret)
		if apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, key, &secret)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("loading the URL key from Secret %s: %w", key, err)
	}
	b := secret.Data[URLKeySecretKey]
	if len(b) < MinURLKeyBytes {
		return nil, fmt.Errorf("URL key Secret %s: %q has %d bytes, want at least %d", key, URLKeySecretKey, len(b), MinURLKeyBytes)
	}
	return b, nil
}
