// Package ignition renders what metalprobe boots with: where the registry is, how to trust it,
// the per-server token, and what to do (discover or wipe). The operator renders it into a Secret
// referenced by a ServerBootConfiguration; the boot service hands it to the probe.
package ignition

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Mode is what the probe does once booted.
type Mode string

const (
	ModeDiscovery Mode = "discovery"
	ModeWipe      Mode = "wipe"
)

// SecretKey is the key of the rendered config in the ignition Secret.
const SecretKey = "ignition.json"

// Config is the probe's boot configuration.
type Config struct {
	RegistryURL string `json:"registryURL"`
	// RegistryCA is the PEM CA the probe trusts for the registry's certificate.
	RegistryCA string `json:"registryCA,omitempty"`
	// Token authenticates the probe's reports as this server's; it is a secret.
	Token      string                   `json:"token"`
	SystemUUID string                   `json:"systemUUID"`
	Mode       Mode                     `json:"mode"`
	WipePolicy metalv1alpha1.WipePolicy `json:"wipePolicy,omitempty"`
}

// Validate says what is wrong with a config, naming the field.
func (c Config) Validate() error {
	u, err := url.Parse(c.RegistryURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("registryURL %q is not an http(s) URL", c.RegistryURL)
	}
	if c.Token == "" {
		return errors.New("token is required")
	}
	if c.SystemUUID == "" {
		return errors.New("systemUUID is required")
	}
	switch c.Mode {
	case ModeDiscovery:
	case ModeWipe:
		switch c.WipePolicy {
		case metalv1alpha1.WipeMetadata, metalv1alpha1.WipeZero, metalv1alpha1.WipeSecure:
		default:
			return fmt.Errorf("wipePolicy %q is not metadata, zero or secure", c.WipePolicy)
		}
	default:
		return fmt.Errorf("mode %q is not discovery or wipe", c.Mode)
	}
	if c.RegistryCA != "" && !strings.Contains(c.RegistryCA, "BEGIN CERTIFICATE") {
		return errors.New("registryCA is not a PEM certificate")
	}
	return nil
}

// Render validates and serialises a config.
func Render(c Config) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("rendering ignition: %w", err)
	}
	return json.MarshalIndent(c, "", "  ")
}

// Parse reads and validates a rendered config. Unknown fields are errors.
func Parse(data []byte) (Config, error) {
	var c Config
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("parsing ignition: %w", err)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("parsing ignition: %w", err)
	}
	return c, nil
}
