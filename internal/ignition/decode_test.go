package ignition

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDecodeRenderedIgnition(t *testing.T) {
	c, err := Decode([]byte(`{
  "registryURL": " https://10.0.0.1:8443 ",
  "token": "tok",
  "systemUUID": "4C4C4544-0058-4B10-8034-B8C04F513533",
  "mode": "discovery",
  "addedByANewerOperator": {"x": 1}
}`))
	require.NoError(t, err)
	assert.Equal(t, Config{RegistryURL: "https://10.0.0.1:8443", Token: "tok",
		SystemUUID: "4c4c4544-0058-4b10-8034-b8c04f513533", Mode: ModeDiscovery}, c)

	c, err = Decode([]byte(`{"mode": "wipe", "wipePolicy": "zero"}`))
	require.NoError(t, err)
	assert.Equal(t, Config{Mode: ModeWipe, WipePolicy: "zero"}, c)
}

func TestDecodeMalformedSaysWhere(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"empty":          {"  \n", "empty file"},
		"syntax":         {"{\n  \"registryURL\": \"https://x\",\n  \"token\": tok\n}", "line 3, column 13"},
		"truncated":      {`{"registryURL": "https://x", "tok`, "ends in the middle"},
		"wrong type":     {`{"registryURL": 8443}`, `field "registryURL" is a number, want a string`},
		"not an object":  {`["https://x"]`, "want a JSON object"},
		"two values":     {`{} {}`, "more than one value"},
		"bad URL":        {`{"registryURL": "registry:8443"}`, "registryURL"},
		"ftp URL":        {`{"registryURL": "ftp://registry"}`, "not an http(s) URL"},
		"unknown mode":   {`{"mode": "reinstall"}`, `mode "reinstall"`},
		"not PEM":        {`{"registryCA": "hello"}`, "registryCA: no PEM certificate"},
		"token is typed": {`{"token": 12345}`, `field "token" is a number`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestDecodeNeverQuotesTheToken(t *testing.T) {
	_, err := Decode([]byte(`{"token": "s3cr3t", "registryURL": 1}`))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t")
	_, err = Decode([]byte(`{"token": "s3cr3t" "registryURL": "x"}`))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cr3t")
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "ignition.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"registryURL": "http://registry:8080", "token": "t", "mode": "discovery"}`), 0o600))
	c, err := Load(good)
	require.NoError(t, err)
	assert.Equal(t, "http://registry:8080", c.RegistryURL)

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{`), 0o600))
	_, err = Load(bad)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad)

	_, err = Load(filepath.Join(dir, "missing.json"))
	assert.Error(t, err)
}

func TestCertPool(t *testing.T) {
	_, err := CertPool([]byte("nope"))
	assert.Error(t, err)
}
