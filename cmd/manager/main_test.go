package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/manager"
)

// A malformed MAC-prefix database stops the manager at start-up, naming the entry and field,
// before it touches any cluster.
func TestBadMACPrefixFileStopsTheManager(t *testing.T) {
	path := filepath.Join(t.TempDir(), "macdb.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
macPrefixes:
- macPrefix: "3c:ec:ef"
  manufacturer: Supermicro
  protocol: Redfish
  scheme: https
  defaultCredentials: [{username: ADMIN, password: ADMIN}]
- macPrefix: "b0:7b:25"
  manufacturer: Dell
  protocol: Redfish
  scheme: htps
  defaultCredentials: [{username: root, password: calvin}]
`), 0o600))
	err := run([]string{"--mac-prefixes-file", path, "--metrics-bind-address", "0", "--health-probe-bind-address", "0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), `entry 1 (macPrefix "b0:7b:25"): field scheme: "htps" is not http or https`)
	assert.NotContains(t, err.Error(), "calvin")
}

func TestBadFlagsAreRejected(t *testing.T) {
	err := run([]string{"--concurrency", "bmc=zero"})
	assert.ErrorContains(t, err, `--concurrency: "bmc=zero" is not controller=count`)
	err = run([]string{"--bmc-ca-file", filepath.Join(t.TempDir(), "missing.pem")})
	assert.ErrorContains(t, err, "--bmc-ca-file")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate"), 0o600))
	err = run([]string{"--image-ca-file", notPEM})
	assert.ErrorContains(t, err, "--image-ca-file "+notPEM)
}

func TestParseConcurrency(t *testing.T) {
	got, err := manager.ParseConcurrency("bmc=8, endpoint=2")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"bmc": 8, "endpoint": 2}, got)
}
