// Package registry is the HTTPS endpoint in the manager that receives metalprobe's reports.
// A report is accepted only with the bearer token of the server it is about, for that server's
// current probe boot: the token names the server and the boot, and carries an HMAC of both
// under a key kept in a Secret, so tokens survive restarts and nothing about them is held in
// memory but the key. The token, not anything the body says (a UUID may be missing, a
// placeholder, or shared by many machines), decides which Server a report is stored on.
// Accepted reports go straight into the Server's status.
package registry

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
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

// maxNameField is the longest the token's first field can be: a DNS-1123 subdomain of 253
// characters in unpadded base64.
var maxNameField = base64.RawURLEncoding.EncodedLen(validation.DNS1123SubdomainMaxLength)

// Token is the bearer token of the probe boot called boot of the server called server:
// "<server>.<boot>.<MAC>", the server's name in unpadded base64url (a Server's name may hold
// dots; base64url has none), the boot as it is, and the HMAC of both.
func (s *Signer) Token(server, boot string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(server)) + "." + boot + "." + s.mac(server, boot)
}

func (s *Signer) mac(server, boot string) string {
	mac := hmac.New(sha256.New, s.key)
	// v3: tokens name the server; a v2 token (signed over a system UUID) never verifies.
	mac.Write([]byte("ironfleet-probe-v3:"))
	mac.Write([]byte(server))
	mac.Write([]byte{0})
	mac.Write([]byte(boot))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// Verify reports whether token is one this signer minted (the MAC compared in constant time),
// and for which server and boot.
func (s *Signer) Verify(token string) (server, boot string, ok bool) {
	fields := strings.Split(token, ".")
	if len(fields) != 3 || len(fields[0]) > maxNameField || !bootPattern.MatchString(fields[1]) {
		return "", "", false
	}
	name, err := base64.RawURLEncoding.DecodeString(fields[0])
	// The decoder skips CR and LF, and takes non-zero trailing bits: only the encoding Token
	// writes is the token, so no other spelling of it is accepted.
	if err != nil || base64.RawURLEncoding.EncodeToString(name) != fields[0] || len(validation.IsDNS1123Subdomain(string(name))) != 0 {
		return "", "", false
	}
	if !hmac.Equal([]byte(s.mac(string(name), fields[1])), []byte(fields[2])) {
		return "", "", false
	}
	return string(name), fields[1], true
}
