package ignition

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func valid() Config {
	return Config{RegistryURL: "https://10.0.0.1:8443", Token: "tok", Server: "38947555-7742-3448-3784-823347823834",
		SystemUUID: "38947555-7742-3448-3784-823347823834", Mode: ModeDiscovery}
}

// withoutUUID is the config of a machine whose UUID is not its identity (none, a placeholder,
// shared): it boots without one.
func withoutUUID() Config {
	return Config{RegistryURL: "https://10.0.0.1:8443", Token: "tok", Server: "smc-1.system.2", Mode: ModeDiscovery}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range []Config{valid(), withoutUUID(), func() Config {
		c := valid()
		c.Mode, c.WipePolicy = ModeWipe, metalv1alpha1.WipeZero
		return c
	}(), func() Config {
		c := withoutUUID()
		c.Mode, c.WipePolicy = ModeWipe, metalv1alpha1.WipeSecure
		return c
	}(), func() Config {
		c := valid()
		c.Mode, c.WipePolicy = ModeWipe, metalv1alpha1.WipeErase
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
		"mode":        func(c *Config) { c.Mode = "dance" },
		"wipePolicy":  func(c *Config) { c.Mode = ModeWipe; c.WipePolicy = "shred" },
		"registryCA":  func(c *Config) { c.RegistryCA = "not pem" },
		"wipeExclusions[0]": func(c *Config) {
			c.WipeExclusions = []metalv1alpha1.WipeExclusion{{Path: "/dev/sdb", Reason: "moves"}}
		},
		"install.userDataSHA256": func(c *Config) {
			c.Mode, c.Install = ModeProvision, &Install{Image: "oci://r/os:1", UserDataSHA256: "sha256:abc"}
		},
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

// TestRenderingNeedsNoUUID: the token and the registry are what a probe needs; a machine
// without a usable UUID renders without the key, and the keys the probe reads keep their names.
func TestRenderingNeedsNoUUID(t *testing.T) {
	data, err := Render(withoutUUID())
	require.NoError(t, err)
	var keys map[string]any
	require.NoError(t, json.Unmarshal(data, &keys))
	assert.Equal(t, map[string]any{"registryURL": "https://10.0.0.1:8443", "token": "tok", "server": "smc-1.system.2", "mode": "discovery"}, keys)
	data, err = Render(valid())
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &keys))
	assert.Equal(t, "38947555-7742-3448-3784-823347823834", keys["systemUUID"], "the key is still systemUUID")

	c, err := Parse([]byte(`{"registryURL":"https://x","token":"t","mode":"wipe","wipePolicy":"zero"}`))
	require.NoError(t, err, "an older operator's config, or one without server and UUID, parses")
	assert.Empty(t, c.SystemUUID)
	_, err = Parse([]byte(`{"registryURL":"https://x","systemUUID":"38947555-7742-3448-3784-823347823834","mode":"discovery"}`))
	assert.ErrorContains(t, err, "token is required", "the token is what a probe cannot do without")
}

func FuzzParse(f *testing.F) {
	data, _ := Render(valid())
	f.Add(data)
	data, _ = Render(withoutUUID())
	f.Add(data)
	data, _ = Render(withNetwork())
	f.Add(data)
	f.Add([]byte(`{"registryURL":"https://x","token":"t","mode":"discovery","network":{"interfaceMAC":"AA:bb:cc:dd:ee:ff","address":" 10.0.0.21/24","dns":[]}}`))
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
		// The server's name is fuzzed with the UUID's value: the corpus keeps its shape.
		c := Config{RegistryURL: url, Token: token, Server: uuid, SystemUUID: uuid, Mode: Mode(mode), WipePolicy: metalv1alpha1.WipePolicy(policy), RegistryCA: ca}
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
