package ignition

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func valid() Config {
	return Config{RegistryURL: "https://10.0.0.1:8443", Token: "tok", SystemUUID: "38947555-7742-3448-3784-823347823834", Mode: ModeDiscovery}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Config{valid(), func() Config {
		c := valid()
		c.Mode, c.WipePolicy = ModeWipe, metalv1alpha1.WipeZero
		return c
	}()} {
		data, err := Render(c)
		require.NoError(t, err)
		got, err := Parse(data)
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
}

func TestInvalidConfigsNameTheField(t *testing.T) {
	cases := map[string]func(*Config){
		"registryURL": func(c *Config) { c.RegistryURL = "ftp://x" },
		"token":       func(c *Config) { c.Token = "" },
		"systemUUID":  func(c *Config) { c.SystemUUID = "" },
		"mode":        func(c *Config) { c.Mode = "dance" },
		"wipePolicy":  func(c *Config) { c.Mode = ModeWipe; c.WipePolicy = "shred" },
		"registryCA":  func(c *Config) { c.RegistryCA = "not pem" },
	}
	for field, mutate := range cases {
		c := valid()
		mutate(&c)
		_, err := Render(c)
		assert.ErrorContains(t, err, field)
	}
	c := valid()
	c.Token += "\xc6"
	_, err := Render(c)
	assert.ErrorContains(t, err, "token is not valid UTF-8", "JSON cannot carry it (found by FuzzRender)")
	_, err = Parse([]byte(`{"registryURL":"https://x","systemUUID":"u","mode":"discovery"}`))
	assert.ErrorContains(t, err, "token is required", "a rendered config must be complete")
}

func FuzzParse(f *testing.F) {
	data, _ := Render(valid())
	f.Add(data)
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parses renders, and re-parses to the same config.
		out, err := Render(c)
		require.NoError(t, err)
		again, err := Parse(out)
		require.NoError(t, err)
		require.Equal(t, c, again)
	})
}

// FuzzRender feeds arbitrary field values to Render: it either refuses the config with an
// error, or renders one that parses back to the config it rendered (normalised: trimmed, a
// lower-case UUID) and renders again to the same bytes. What the operator renders, the probe
// accepts.
func FuzzRender(f *testing.F) {
	v := valid()
	f.Add(v.RegistryURL, v.Token, v.SystemUUID, string(v.Mode), "", "")
	f.Add(" https://[::1]:8443/x?y=\"z\" ", "t\u2028k\"\\", "UUID\x00", "wipe", "secure", "-----BEGIN CERTIFICATE-----\n")
	f.Fuzz(func(t *testing.T, url, token, uuid, mode, policy, ca string) {
		c := Config{RegistryURL: url, Token: token, SystemUUID: uuid, Mode: Mode(mode), WipePolicy: metalv1alpha1.WipePolicy(policy), RegistryCA: ca}
		data, err := Render(c)
		if err != nil {
			return
		}
		got, err := Parse(data)
		require.NoError(t, err, "a rendered config parses")
		again, err := Render(got)
		require.NoError(t, err)
		require.Equal(t, string(data), string(again), "rendering is stable")
		if utf8.ValidString(url+token+uuid+mode+policy+ca) && strings.ToLower(uuid) == uuid &&
			strings.TrimSpace(url) == url && strings.TrimSpace(token) == token && strings.TrimSpace(uuid) == uuid {
			require.Equal(t, c, got, "a config already in normal form survives unchanged")
		}
	})
}
