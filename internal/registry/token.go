// Package registry is the HTTPS endpoint in the manager that receives metalprobe's reports.
// A report is accepted only with the bearer token of the server it is about: an HMAC of the
// server's UUID under a key kept in a Secret, so tokens survive restarts and nothing about
// them is held in memory but the key. Accepted reports go straight into the Server's status.
package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
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

// Token is the bearer token of the server with this system UUID.
func (s *Signer) Token(systemUUID string) string {
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte("ironfleet-probe-v1:"))
	mac.Write([]byte(strings.ToLower(systemUUID)))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports, in constant time, whether token belongs to systemUUID.
func (s *Signer) Verify(systemUUID, token string) bool {
	want := s.Token(systemUUID)
	return hmac.Equal([]byte(want), []byte(token))
}
