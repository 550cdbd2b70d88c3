// Package ignition renders what metalprobe boots with: where the registry is, how to trust it,
// the per-server token, and what to do (discover or wipe). The operator renders it into a Secret
// referenced by a ServerBootConfiguration; the boot service hands it to the probe.
package ignition

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"unicode/utf8"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Mode is what the probe does once booted.
type Mode string

const (
	ModeDiscovery Mode = "discovery"
	ModeWipe      Mode = "wipe"
	// ModeProvision installs Install's image to a disk, writes its config drive, and reports.
	ModeProvision Mode = "provision"
)

// Install is what provision mode writes: the claim's image, verified against its checksum, to
// the disk its hints choose, with a config drive carrying the claim's user data. The user data
// itself is not here: this config is served over plain HTTP and embedded in the boot's ISO,
// and the user data may hold a secret (a Cluster API machine's kubeadm join token). The probe
// fetches it from the registry over TLS with the boot's token (UserDataPath) and checks it
// against UserDataSHA256.
type Install struct {
	// Image is an http(s):// URL of a raw disk image (plain, .gz, .zst or .xz) or an oci://
	// reference of an artifact whose single layer is one.
	Image string `json:"image"`
	// ImageChecksum is sha256:<hex> or sha512:<hex> of the image as served; required for
	// http(s) images.
	ImageChecksum string `json:"imageChecksum,omitempty"`
	// RootDeviceHints choose the disk; nil: the smallest non-removable disk that holds the image.
	RootDeviceHints *metalv1alpha1.RootDeviceHints `json:"rootDeviceHints,omitempty"`
	// UserDataSHA256 is "sha256:<hex>" of the claim's ignition as the operator read it when it
	// rendered this boot: the probe fetches the bytes from the registry (UserDataPath) and
	// writes them, if they have this digest, as the config drive's openstack/latest/user_data.
	// Empty: the claim has none, and the config drive has no user_data.
	UserDataSHA256 string `json:"userDataSHA256,omitempty"`
	// Hostname and InstanceID go into the config drive's meta_data.json (uuid, hostname, name).
	Hostname   string `json:"hostname,omitempty"`
	InstanceID string `json:"instanceID,omitempty"`
	// Server is the name of the Server the image is installed on; the config drive's
	// meta_data.json carries it as meta.server (a Cluster API node's providerID is
	// ironfleet://<server>).
	Server string `json:"server,omitempty"`
	// CABundle is PEM CAs the probe trusts for the image's server or registry, besides the
	// system roots and RegistryCA (the manager's --image-ca-file).
	CABundle string `json:"caBundle,omitempty"`
}

// Validate says what is wrong with an install, naming the field.
func (in *Install) Validate() error {
	switch {
	case strings.HasPrefix(in.Image, "http://"), strings.HasPrefix(in.Image, "https://"):
		if _, err := url.Parse(in.Image); err != nil {
			return fmt.Errorf("install.image: %w", err)
		}
		if in.ImageChecksum == "" {
			return errors.New("install.imageChecksum is required for an http(s) image")
		}
	case strings.HasPrefix(in.Image, "oci://"):
	default:
		return fmt.Errorf("install.image %q is not an http://, https:// or oci:// reference", in.Image)
	}
	if in.ImageChecksum != "" && !checksumPattern.MatchString(in.ImageChecksum) {
		return errors.New("install.imageChecksum is not sha256:<64 hex> or sha512:<128 hex>")
	}
	if in.UserDataSHA256 != "" && !userDataDigestPattern.MatchString(in.UserDataSHA256) {
		return errors.New("install.userDataSHA256 is not sha256:<64 hex>")
	}
	if in.CABundle != "" {
		if _, err := CertPool([]byte(in.CABundle)); err != nil {
			return fmt.Errorf("install.caBundle: %w", err)
		}
	}
	return nil
}

var (
	checksumPattern       = regexp.MustCompile(`^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$`)
	userDataDigestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// UserDataPath is where the registry hands a provision boot's probe the claim's user data,
// relative to its base URL: a POST with the boot's bearer token and {"systemUUID": …}.
const UserDataPath = "/v1/userdata"

// UserDataDigest is Install.UserDataSHA256 of data.
func UserDataDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SecretKey is the key of the rendered config in the ignition Secret.
const SecretKey = "ignition.json"

// Config is the probe's boot configuration.
type Config struct {
	RegistryURL string `json:"registryURL"`
	// RegistryCA is the PEM CA the probe trusts for the registry's certificate.
	RegistryCA string `json:"registryCA,omitempty"`
	// Token authenticates the probe's reports as this server's (it names the server); it is a
	// secret.
	Token string `json:"token"`
	// Server is the name of the Server the probe boots for, to say on the console whose boot
	// this is. Optional.
	Server string `json:"server,omitempty"`
	// SystemUUID is set only when the Server's identity is its SMBIOS UUID (docs/identity.md):
	// a probe on a host that reads another then wipes and installs nothing. Machines without a
	// usable, unique UUID boot without one. Optional.
	SystemUUID string                   `json:"systemUUID,omitempty"`
	Mode       Mode                     `json:"mode"`
	WipePolicy metalv1alpha1.WipePolicy `json:"wipePolicy,omitempty"`
	// WipeExclusions are the devices wipe mode leaves alone (the Server's spec.wipeExclusions).
	WipeExclusions []metalv1alpha1.WipeExclusion `json:"wipeExclusions,omitempty"`
	// Install is provision mode's work (nil in the other modes). WipePolicy, in provision mode,
	// is how the chosen disk is wiped again when the install fails.
	Install *Install `json:"install,omitempty"`
	// Network is a static network for the probe, applied by /init when it boots from virtual
	// media (the ISO carries this config): the NIC with interfaceMAC (or the first NIC with a
	// link), an optional VLAN, address, default route via gateway, resolv.conf from dns. Nil:
	// the probe asks DHCP. A network-booted (PXE) probe already has its DHCP lease and
	// ignores it.
	Network *metalv1alpha1.ProbeNetwork `json:"network,omitempty"`
	// BootURL is where the probe reports its progress (ProgressPath under it): the boot
	// service adds it when it serves the ignition (WithBootURL), never the operator. It holds
	// the boot's token, a secret.
	BootURL string `json:"bootURL,omitempty"`
}

// Validate says what is wrong with a complete config, naming the field.
func (c Config) Validate() error {
	// JSON cannot carry other bytes: they would be rendered as U+FFFD, another config.
	for _, f := range []struct{ name, value string }{
		{"registryURL", c.RegistryURL}, {"registryCA", c.RegistryCA}, {"token", c.Token}, {"server", c.Server},
		{"systemUUID", c.SystemUUID}, {"mode", string(c.Mode)}, {"wipePolicy", string(c.WipePolicy)},
	} {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	if err := CheckURL(c.RegistryURL); err != nil {
		return fmt.Errorf("registryURL: %w", err)
	}
	if c.Token == "" {
		return errors.New("token is required")
	}
	switch c.Mode {
	case ModeDiscovery:
		if c.WipePolicy != "" && !knownPolicy(c.WipePolicy) {
			return fmt.Errorf("wipePolicy %q is not erase, metadata, zero or secure", c.WipePolicy)
		}
	case ModeWipe:
		if !knownPolicy(c.WipePolicy) {
			return fmt.Errorf("wipePolicy %q is not erase, metadata, zero or secure", c.WipePolicy)
		}
	case ModeProvision:
		if c.WipePolicy != "" && !knownPolicy(c.WipePolicy) {
			return fmt.Errorf("wipePolicy %q is not erase, metadata, zero or secure", c.WipePolicy)
		}
		if c.Install == nil {
			return errors.New("install is required in provision mode")
		}
		if err := c.Install.Validate(); err != nil {
			return err
		}
	default:
		return fmt.Errorf("mode %q is not discovery, wipe or provision", c.Mode)
	}
	for i, ex := range c.WipeExclusions {
		if (ex.SerialNumber == "") == (ex.Path == "") || ex.Path != "" && !strings.HasPrefix(ex.Path, metalv1alpha1.ByPathPrefix) {
			return fmt.Errorf("wipeExclusions[%d] must name its device by serialNumber or by a %s path, one of them", i, metalv1alpha1.ByPathPrefix)
		}
	}
	if c.Mode != ModeProvision && c.Install != nil {
		return fmt.Errorf("install is only for provision mode, not %s", c.Mode)
	}
	if c.RegistryCA != "" {
		if _, err := CertPool([]byte(c.RegistryCA)); err != nil {
			return fmt.Errorf("registryCA: %w", err)
		}
	}
	if c.Network != nil {
		if err := validateNetwork(c.Network); err != nil {
			return err
		}
	}
	return nil
}

func knownPolicy(p metalv1alpha1.WipePolicy) bool {
	switch p {
	case metalv1alpha1.WipeErase, metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure:
		return true
	}
	return false
}

// normalize is the one spelling of a config: no surrounding space, a lower-case UUID and MAC
// (a copied Network: the caller's is never changed). Decode
// and Render both apply it, so that what is rendered parses back to the very same config.
func (c Config) normalize() Config {
	c.RegistryURL = strings.TrimSpace(c.RegistryURL)
	c.Token = strings.TrimSpace(c.Token)
	c.Server = strings.TrimSpace(c.Server)
	c.SystemUUID = strings.ToLower(strings.TrimSpace(c.SystemUUID))
	c.Network = normalizeNetwork(c.Network)
	return c
}

// Render validates and serialises a config, normalised.
func Render(c Config) ([]byte, error) {
	c = c.normalize()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("rendering ignition: %w", err)
	}
	return json.MarshalIndent(c, "", "  ")
}

// Parse reads a rendered config and checks that it is complete.
func Parse(data []byte) (Config, error) {
	c, err := Decode(data)
	if err != nil {
		return Config{}, fmt.Errorf("parsing ignition: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("parsing ignition: %w", err)
	}
	return c, nil
}

// MaxIgnitionBytes bounds a rendered ignition, uncompressed: the probe's /init refuses a larger
// one, downloaded from /ignition or read from the boot media, and Load a larger file; the boot
// service does not mark a virtual-media boot with a larger one Ready (IgnitionTooLarge). A real
// one is a few kilobytes of PEM.
const MaxIgnitionBytes = 1 << 20

// Load reads and parses an ignition file.
func Load(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading ignition: %w", err)
	}
	if len(data) > MaxIgnitionBytes {
		return Config{}, fmt.Errorf("ignition %s: larger than %d bytes", path, MaxIgnitionBytes)
	}
	c, err := Decode(data)
	if err != nil {
		return Config{}, fmt.Errorf("ignition %s: %w", path, err)
	}
	return c, nil
}

// Decode reads an ignition document leniently and checks the fields it carries: a field of
// the wrong type, a malformed URL or an unknown mode is an error naming the field, while fields
// added by a newer operator are ignored, so that an older probe image still boots. It does not
// require any field: the probe completes the config from its flags, then calls Validate. Errors say where the
// problem is (line and column for syntax, the field otherwise) and never quote the token.
func Decode(data []byte) (Config, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return Config{}, errors.New("empty file: want a JSON object such as {\"registryURL\": \"https://…\", \"token\": \"…\", \"mode\": \"discovery\"}")
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&c); err != nil {
		return Config{}, describe(data, err)
	}
	if dec.More() {
		return Config{}, errors.New("malformed JSON: more than one value in the file")
	}
	c = c.normalize()
	if c.RegistryURL != "" {
		if err := CheckURL(c.RegistryURL); err != nil {
			return Config{}, fmt.Errorf("registryURL: %w", err)
		}
	}
	switch c.Mode {
	case "", ModeDiscovery, ModeWipe, ModeProvision:
	default:
		return Config{}, fmt.Errorf("mode %q is not %q, %q or %q", c.Mode, ModeDiscovery, ModeWipe, ModeProvision)
	}
	if c.WipePolicy != "" && !knownPolicy(c.WipePolicy) {
		return Config{}, fmt.Errorf("wipePolicy %q is not erase, metadata, zero or secure", c.WipePolicy)
	}
	if c.RegistryCA != "" {
		if _, err := CertPool([]byte(c.RegistryCA)); err != nil {
			return Config{}, fmt.Errorf("registryCA: %w", err)
		}
	}
	if c.Network != nil {
		if err := validateNetwork(c.Network); err != nil {
			return Config{}, err
		}
	}
	if c.BootURL != "" {
		if err := CheckURL(c.BootURL); err != nil {
			return Config{}, errors.New("bootURL is not an http(s) URL with a host") // never quoted: it holds a token
		}
	}
	return c, nil
}

// WithBootURL is a rendered ignition with BootURL set to url, the other fields as they are.
func WithBootURL(data []byte, url string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("adding the boot URL: %w", describe(data, err))
	}
	if fields == nil {
		return nil, errors.New("adding the boot URL: the ignition is not a JSON object")
	}
	v, err := json.Marshal(url)
	if err != nil {
		return nil, err
	}
	fields["bootURL"] = v
	return json.MarshalIndent(fields, "", "  ")
}

// CheckURL accepts an absolute http(s) URL with a host.
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme != "https" && u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL with a host", raw)
	}
	return nil
}

// CertPool builds a pool from PEM certificates; it fails when there are none.
func CertPool(pem []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("no PEM certificate found")
	}
	return pool, nil
}

// describe turns a decoding error into one that says where: the line and column of a syntax
// error, or the field that has the wrong type. It never quotes the document.
func describe(data []byte, err error) error {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		line, col := position(data, syntax.Offset)
		return fmt.Errorf("malformed JSON at line %d, column %d: %v", line, col, syntax)
	}
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return fmt.Errorf("malformed ignition: want a JSON object, got %s", typ.Value)
		}
		return fmt.Errorf("malformed ignition: field %q is a %s, want a %s", typ.Field, typ.Value, typ.Type)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("malformed JSON: the file ends in the middle of a value")
	}
	return fmt.Errorf("malformed JSON: %v", err)
}

// position converts a byte offset (just past the error) to a 1-based line and column.
func position(data []byte, offset int64) (line, col int) {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	before := data[:max(offset-1, 0)]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}
