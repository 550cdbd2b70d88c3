package macdb

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const good = `
macPrefixes:
- macPrefix: "3C:EC:EF"
  manufacturer: Supermicro
  protocol: Redfish
  scheme: https
  defaultCredentials:
  - {username: ADMIN, password: ADMIN}
- macPrefix: "3c:ec:ef:aa"
  manufacturer: Supermicro X13
  protocol: Redfish
  scheme: http
  port: 8000
  defaultCredentials:
  - {username: ADMIN, password: first}
  - {username: root, password: second}
- macPrefix: "b0:7b:25"
  manufacturer: Dell
  protocol: IPMI
  defaultCredentials:
  - {username: root, password: calvin}
`

func TestLongestPrefixWins(t *testing.T) {
	db, err := Parse([]byte(good))
	require.NoError(t, err)
	assert.Equal(t, 3, db.Len())

	e, ok := db.Lookup("3c:ec:ef:aa:00:01")
	require.True(t, ok)
	assert.Equal(t, "Supermicro X13", e.Manufacturer)
	assert.Equal(t, int32(8000), e.Port)
	assert.Len(t, e.DefaultCredentials, 2)

	e, ok = db.Lookup("3C:EC:EF:AB:00:01")
	require.True(t, ok, "lookup is case-insensitive")
	assert.Equal(t, "Supermicro", e.Manufacturer)
	assert.Equal(t, int32(443), e.Port, "https defaults to 443")
	assert.Equal(t, "3c:ec:ef", e.MACPrefix, "prefixes are normalised to lower case")

	e, ok = db.Lookup("b0:7b:25:00:00:01")
	require.True(t, ok)
	assert.Equal(t, ProtocolIPMI, e.Protocol)
	assert.Equal(t, int32(623), e.Port)

	_, ok = db.Lookup("00:11:22:33:44:55")
	assert.False(t, ok)
	_, ok = (*DB)(nil).Lookup("3c:ec:ef:00:00:01")
	assert.False(t, ok, "a nil database matches nothing")
}

func TestAddress(t *testing.T) {
	db, err := Parse([]byte(good))
	require.NoError(t, err)
	e, _ := db.Lookup("3c:ec:ef:aa:00:01")
	assert.Equal(t, "redfish+http://10.0.0.5:8000/redfish/v1", e.Address("10.0.0.5"))
	e, _ = db.Lookup("3c:ec:ef:00:00:01")
	assert.Equal(t, "redfish+https://[fd00::5]:443/redfish/v1", e.Address("fd00::5"))
	e, _ = db.Lookup("b0:7b:25:00:00:01")
	assert.Equal(t, "ipmi://10.0.0.6:623", e.Address("10.0.0.6"))
}

func TestMalformedFilesNameTheEntryAndField(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"bad prefix": {`macPrefixes: [{macPrefix: "3c:ec:e", manufacturer: X, protocol: Redfish, scheme: https, defaultCredentials: [{username: a, password: b}]}]`,
			`entry 0 (macPrefix "3c:ec:e"): field macPrefix`},
		"missing manufacturer": {`macPrefixes: [{macPrefix: "3c:ec:ef", protocol: Redfish, scheme: https, defaultCredentials: [{username: a, password: b}]}]`,
			`entry 0 (macPrefix "3c:ec:ef"): field manufacturer: required`},
		"bad protocol": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: SNMP, scheme: https, defaultCredentials: [{username: a, password: b}]}]`,
			`field protocol: "SNMP" is not Redfish or IPMI`},
		"bad scheme": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: ftp, defaultCredentials: [{username: a, password: b}]}]`,
			`field scheme: "ftp" is not http or https`},
		"bad port": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: https, port: 70000, defaultCredentials: [{username: a, password: b}]}]`,
			`field port: 70000 is not between 1 and 65535`},
		"no credentials": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: https}]`,
			`field defaultCredentials: at least one`},
		"empty password": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: https, defaultCredentials: [{username: a, password: ""}]}]`,
			`field defaultCredentials[0].password: required`},
		"second entry": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: https, defaultCredentials: [{username: a, password: b}]}, {macPrefix: "3c:ec:ef", manufacturer: Other, protocol: Redfish, scheme: https, defaultCredentials: [{username: a, password: b}]}]`,
			`entry 1 (macPrefix "3c:ec:ef"): field macPrefix: duplicates the entry for X`},
		"unknown field": {`macPrefixes: [{macPrefix: "3c:ec:ef", manufacturer: X, protocol: Redfish, scheme: https, prot: 1, defaultCredentials: [{username: a, password: b}]}]`,
			`entry 0: json: unknown field "prot"`},
		"not yaml": {"macPrefixes: [", "not a valid database"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "password: b", "errors never echo credentials")
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "macdb.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`macPrefixes: [{macPrefix: "zz"}]`), 0o600))
	_, err := Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "field macPrefix")

	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.ErrorContains(t, err, "reading MAC-prefix database")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(`macPrefixes: []`))
	f.Add([]byte(`macPrefixes: [{macPrefix: "3c"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		db, err := Parse(data)
		if err != nil {
			return
		}
		// Whatever parsed must answer lookups of its own prefixes with itself or a longer one.
		for _, e := range db.entries {
			got, ok := db.Lookup(e.MACPrefix)
			if !ok || len(got.MACPrefix) < len(e.MACPrefix) {
				t.Fatalf("entry %q does not match itself", e.MACPrefix)
			}
		}
	})
}
