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

// tokenSigner mints the token of a boot's URL, <public-url>/boot/<token>, and of a firmware
// image's (firmwareToken).
//
// The token is an HMAC over what makes the boot this one boot: the configuration's namespace,
// name and UID (a re-created configuration is another boot), and the probe boot it names (or,
// for a configuration not made by Ironfleet's operator, its generation). Nothing is stored: a
// restarted service with the same key mints the same tokens, and the token dies with the
// configuration it was minted for. It is a bearer secret for the boot's progress and its ISO
// (which holds the ignition): it is never logged, and reaches the host only inside the ignition
// or the ISO, never in a script or a DHCP answer.
type tokenSigner struct{ key []byte }

func (s tokenSigner) token(sbc *metalv1alpha1.ServerBootConfiguration) string {
	return base64.RawURLEncoding.EncodeToString(s.sum("ironfleet-boot-url/v1", sbc))
}

// bootIDLen is the length of a boot id: 128 bits, base64url.
const bootIDLen = 22

// id is the boot's public id, the last element of its ignition's URL, which the iPXE script
// carries: minted as the token is, under another label, so that it says nothing of the token.
// It is no secret (the script goes to anyone who knows a MAC): it only names the boot, and the
// ignition goes once, to the host the boot is bound to.
func (s tokenSigner) id(sbc *metalv1alpha1.ServerBootConfiguration) string {
	return base64.RawURLEncoding.EncodeToString(s.sum("ironfleet-boot-id/v1", sbc)[:16])
}

// firmwareToken is the token of a firmware image's URL, <media-url>/firmware/<token>
// (firmware.go): an HMAC under a label of its own over the Secret that asks for the image, its
// namespace, name and UID. A re-created Secret of the same name has another token, and the
// token dies with the Secret. It is a bearer secret for the image (and what the origin's
// credentials fetch): never logged, only in the Secret.
func (s tokenSigner) firmwareToken(secret *corev1.Secret) string {
	return base64.RawURLEncoding.EncodeToString(s.mac("ironfleet-firmware-url/v1", secret.Namespace, secret.Name, string(secret.UID)))
}

func (s tokenSigner) sum(label string, sbc *metalv1alpha1.ServerBootConfiguration) []byte {
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	if boot == "" {
		boot = "generation:" + strconv.FormatInt(sbc.Generation, 10)
	}
	return s.mac(label, sbc.Namespace, sbc.Name, string(sbc.UID), boot)
}

// mac is the HMAC-SHA256 under the key of label and parts, each ended by a NUL (no part holds
// one: names, UIDs and labels are printable), so that no two lists of parts run together.
func (s tokenSigner) mac(label string, parts ...string) []byte {
	mac := hmac.New(sha256.New, s.key)
	for _, part := range append([]string{label}, parts...) {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return mac.Sum(nil)
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
