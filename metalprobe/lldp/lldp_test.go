package lldp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func parseFixture(t *testing.T, name string) Neighbors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	got, err := Parse(data)
	require.NoError(t, err)
	return got
}

func TestParseOneInterfaceObjectShape(t *testing.T) {
	got := parseFixture(t, "one-interface.json")
	assert.Equal(t, Neighbors{"eno1": {{
		ChassisID:         "44:38:39:00:00:0a",
		SystemName:        "leaf01.dc1.example.net",
		SystemDescription: "Cumulus Linux version 5.4.0 running on Mellanox Technologies Ltd. MSN2700",
		PortID:            "swp12",
		PortDescription:   "rack4-node07 eno1",
		VLANID:            100,
		ManagementAddress: "10.10.0.11",
	}}}, got)
}

func TestParseSeveralInterfacesArrayShape(t *testing.T) {
	got := parseFixture(t, "several-interfaces.json")
	require.Len(t, got, 2)
	assert.Equal(t, []metalv1alpha1.LLDPNeighbor{{
		ChassisID:         "44:38:39:00:00:0a",
		SystemName:        "leaf01.dc1.example.net",
		SystemDescription: "Cumulus Linux version 5.4.0",
		PortID:            "swp12",
		PortDescription:   "rack4-node07 eno1",
		VLANID:            100, // the pvid, not the first VLAN listed
		ManagementAddress: "10.10.0.11",
	}}, got["eno1"])
	assert.Equal(t, []metalv1alpha1.LLDPNeighbor{{
		ChassisID:         "FDO21120U8N",
		SystemName:        "spine-b.dc1.example.net",
		SystemDescription: "Cisco Nexus Operating System (NX-OS) Software 9.3(8)",
		PortID:            "Ethernet1/7",
		PortDescription:   "Ethernet1/7",
		VLANID:            2001, // a JSON number, not a string
		ManagementAddress: "10.10.0.2",
	}}, got["ens2f0"])
}

func TestParseMissingFieldsLeavesThemEmpty(t *testing.T) {
	got := parseFixture(t, "missing-fields.json")
	assert.Equal(t, Neighbors{
		// A chassis without a system name is not keyed by one.
		"eth0": {{ChassisID: "00:1b:21:aa:bb:cc", PortID: "00:1b:21:aa:bb:cd"}},
		// No chassis at all, and a VLAN id that is not a number.
		"eth1": {{PortID: "Gi0/3"}},
		// Nothing but the interface.
		"eth2": {{}},
	}, got)
}

func TestParseKeepsEveryNeighbourOfAnInterfaceInOrder(t *testing.T) {
	got := parseFixture(t, "two-neighbours-one-interface.json")
	require.Len(t, got["eno1"], 2)
	assert.Equal(t, "tor-a", got["eno1"][0].SystemName)
	assert.Equal(t, "unmanaged-hub", got["eno1"][1].SystemName)
	assert.Equal(t, "3", got["eno1"][1].PortID)
}

func TestParseJSON0Format(t *testing.T) {
	got := parseFixture(t, "json0.json")
	assert.Equal(t, Neighbors{"eno2": {{
		ChassisID:         "44:38:39:00:00:0b",
		SystemName:        "leaf02.dc1.example.net",
		SystemDescription: "Cumulus Linux version 5.4.0",
		PortID:            "swp13",
		PortDescription:   "rack4-node07 eno2",
		VLANID:            100,
		ManagementAddress: "10.10.0.12",
	}}}, got)
}

func TestParseNoNeighbours(t *testing.T) {
	assert.Empty(t, parseFixture(t, "empty.json"))
	got, err := Parse([]byte(`{"lldp": {"interface": []}}`))
	require.NoError(t, err)
	assert.Empty(t, got)
}

func TestParseRefusesWhatIsNotLLDPCtlJSON(t *testing.T) {
	for name, doc := range map[string]string{
		"not JSON":      `lldpctl: unable to connect`,
		"no lldp key":   `{"interface": {}}`,
		"not an object": `[1, 2]`,
		"empty":         ``,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse([]byte(doc))
			assert.Error(t, err)
		})
	}
}

func TestParseToleratesOddShapes(t *testing.T) {
	// Scalars where objects are expected are ignored rather than fatal.
	got, err := Parse([]byte(`{"lldp": {"interface": {"eth0": {"chassis": "x", "port": 5, "vlan": [true]}}}}`))
	require.NoError(t, err)
	assert.Equal(t, Neighbors{"eth0": {{}}}, got)
}

func TestQueryRunsLLDPCtlWithJSONFormat(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no /bin/sh on this machine: the fake lldpctl used here is a shell script; runs wherever /bin/sh exists (every Linux CI host)")
	}
	dir := t.TempDir()
	fake := filepath.Join(dir, "lldpctl")
	script := "#!" + sh + "\n[ \"$1 $2\" = \"-f json\" ] || { echo \"bad args: $*\" >&2; exit 3; }\ncat " +
		filepath.Join(mustAbs(t, "testdata"), "one-interface.json") + "\n"
	require.NoError(t, os.WriteFile(fake, []byte(script), 0o755))

	out, err := Query(context.Background(), fake)
	require.NoError(t, err)
	got, err := Parse(out)
	require.NoError(t, err)
	assert.Equal(t, "swp12", got["eno1"][0].PortID)

	failing := filepath.Join(dir, "failing")
	require.NoError(t, os.WriteFile(failing, []byte("#!"+sh+"\necho 'cannot connect to lldpd' >&2\nexit 1\n"), 0o755))
	_, err = Query(context.Background(), failing)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "cannot connect to lldpd")
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	require.NoError(t, err)
	return abs
}
