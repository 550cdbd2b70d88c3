// Package registry is the HTTPS endpoint in the manager that receives metalprobe's reports.
// A report is accepted only with the bearer token of the server it is about, for that server's
// current probe boot: an HMAC of the server's UUID and the boot's name under a key kept in a
// Secret, so tokens survive restarts and nothing about them is held in memory but the key.
// Accepted reports go straight into the Server's status.
package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
)

// Signer mints and checks per-server tokens.
type Signer struct {
	key []byte
}

// NewSigner returns a signer for key (at least 32 bytes).
func NewSigner(key []byte) (*Signer, error) {
	if len(key) < 32 {
		return nil, errors.New("registry key must be at least 32 bytes")
	}
	return &Signer{key: append([]byte(nil), key...)}, nil
}

// bootPattern is what a probe boot's name may be: it travels in the token, before the MAC.
var bootPattern = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// Token is the bearer token of the probe boot called boot of the server with this system UUID:
// "<boot>.<MAC>".
func (s *Signer) Token(systemUUID, boot string) string {
	return boot + "." + s.mac(systemUUID, boot)
}

func (s *Signer) mac(systemUUID, boot string) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte("ironfleet-probe-v2:"))
	mac.Write([]byte(strings.ToLower(systemUUID)))
	mac.Write([]byte{0})
	mac.Write([]byte(boot))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports, in constant time, whether token belongs to systemUUID, and for which boot.
func (s *Signer) Verify(systemUUID, token string) (boot string, ok bool) {
	boot, mac, found := strings.Cut(token, ".")
	if !found || !bootPattern.MatchString(boot) {
		return "", false
	}
	if !hmac.Equal([]byte(s.mac(systemUUID, boot)), []byte(mac)) {
		return "", false
	}
	return boot, true
}
