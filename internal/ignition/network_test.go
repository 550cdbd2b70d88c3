package ignition

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// withNetwork is a virtual-media boot's config: a static network on a tagged VLAN.
func withNetwork() Config {
	c := valid()
	c.Network = &metalv1alpha1.ProbeNetwork{InterfaceMAC: "3c:ec:ef:01:02:03", VLANID: 42,
		Address: "10.0.0.21/24", Gateway: "10.0.0.1", DNS: []string{"10.0.0.2", "2001:db8::53"}}
	return c
}

func TestNetworkRoundTrip(t *testing.T) {
	v6 := valid()
	v6.Network = &metalv1alpha1.ProbeNetwork{Address: "2001:db8:0:1::21/64", Gateway: "2001:db8:0:1::1"}
	minimal := withoutUUID()
	minimal.Network = &metalv1alpha1.ProbeNetwork{Address: "192.168.7.9/31"}
	for _, c := range []Config{withNetwork(), v6, minimal} {
		data, err := Render(c)
		require.NoError(t, err)
		got, err := Parse(data)
		require.NoError(t, err)
		assert.Equal(t, c, got)
	}
}

// TestNetworkKeys: the keys are the API's ProbeNetwork's, so the operator copies a Server's
// probeNetwork into the ignition as it is.
func TestNetworkKeys(t *testing.T) {
	data, err := Render(withNetwork())
	require.NoError(t, err)
	var keys struct {
		Network map[string]any `json:"network"`
	}
	require.NoError(t, json.Unmarshal(data, &keys))
	assert.Equal(t, map[string]any{"interfaceMAC": "3c:ec:ef:01:02:03", "vlanID": float64(42), "address": "10.0.0.21/24",
		"gateway": "10.0.0.1", "dns": []any{"10.0.0.2", "2001:db8::53"}}, keys.Network)

	data, err = Render(valid())
	require.NoError(t, err)
	assert.NotContains(t, string(data), "network", "no network, no key: DHCP")
}

func TestNetworkNormalised(t *testing.T) {
	c := withNetwork()
	c.Network.InterfaceMAC = " 3C:EC:EF:01:02:0A "
	c.Network.Address = " 10.0.0.21/24"
	c.Network.DNS = []string{"10.0.0.2 "}
	data, err := Render(c)
	require.NoError(t, err)
	got, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, "3c:ec:ef:01:02:0a", got.Network.InterfaceMAC)
	assert.Equal(t, "10.0.0.21/24", got.Network.Address)
	assert.Equal(t, []string{"10.0.0.2"}, got.Network.DNS)
	assert.Equal(t, " 3C:EC:EF:01:02:0A ", c.Network.InterfaceMAC, "rendering never changes the caller's network")

	c = withNetwork()
	c.Network.DNS = []string{}
	data, err = Render(c)
	require.NoError(t, err)
	got, err = Parse(data)
	require.NoError(t, err)
	assert.Nil(t, got.Network.DNS)

	got, err = Parse([]byte(`{"registryURL":"https://x","token":"t","mode":"discovery","network":{"interfaceMAC":"AA:BB:CC:DD:EE:FF","address":"10.1.0.5/16"}}`))
	require.NoError(t, err)
	assert.Equal(t, &metalv1alpha1.ProbeNetwork{InterfaceMAC: "aa:bb:cc:dd:ee:ff", Address: "10.1.0.5/16"}, got.Network)
}

func TestInvalidNetworksNameTheField(t *testing.T) {
	cases := map[string]struct {
		mutate func(*metalv1alpha1.ProbeNetwork)
		want   string
	}{
		"no address":           {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "" }, "network.address is required"},
		"address without /":    {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "10.0.0.21" }, `network.address: "10.0.0.21" is not an address with a prefix length`},
		"address garbage":      {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "eth0" }, "network.address"},
		"prefix too long":      {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "10.0.0.21/33" }, "network.address"},
		"network address":      {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "10.0.0.0/24" }, "network.address: 10.0.0.0 is the network or broadcast address of 10.0.0.0/24"},
		"broadcast address":    {func(n *metalv1alpha1.ProbeNetwork) { n.Address = "10.0.0.255/24" }, "network.address: 10.0.0.255 is the network or broadcast address"},
		"v6 subnet address":    {func(n *metalv1alpha1.ProbeNetwork) { n.Address, n.Gateway = "2001:db8::/64", "" }, "network.address: 2001:db8:: is the network"},
		"loopback":             {func(n *metalv1alpha1.ProbeNetwork) { n.Address, n.Gateway = "127.0.0.5/8", "" }, "network.address: 127.0.0.5 is not a unicast host address"},
		"multicast":            {func(n *metalv1alpha1.ProbeNetwork) { n.Address, n.Gateway = "224.0.0.5/24", "" }, "network.address: 224.0.0.5 is not a unicast host address"},
		"mapped":               {func(n *metalv1alpha1.ProbeNetwork) { n.Address, n.Gateway = "::ffff:10.0.0.21/120", "" }, "network.address"},
		"gateway not an IP":    {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "router" }, `network.gateway "router" is not an IP address`},
		"gateway elsewhere":    {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "10.0.1.1" }, "network.gateway 10.0.1.1 is not in network.address's subnet 10.0.0.0/24"},
		"gateway other family": {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "2001:db8::1" }, "network.gateway 2001:db8::1 is not in network.address's subnet"},
		"gateway is address":   {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "10.0.0.21" }, "network.gateway 10.0.0.21 is network.address itself"},
		"gateway broadcast":    {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "10.0.0.255" }, "network.gateway 10.0.0.255 is the network or broadcast address"},
		"gateway with zone":    {func(n *metalv1alpha1.ProbeNetwork) { n.Gateway = "10.0.0.1%eth0" }, "network.gateway"},
		"four DNS servers":     {func(n *metalv1alpha1.ProbeNetwork) { n.DNS = []string{"10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"} }, "network.dns has 4 entries, at most 3"},
		"DNS by name":          {func(n *metalv1alpha1.ProbeNetwork) { n.DNS = []string{"10.0.0.2", "dns.example"} }, `network.dns[1] "dns.example" is not an IP address`},
		"DNS with a prefix":    {func(n *metalv1alpha1.ProbeNetwork) { n.DNS = []string{"10.0.0.2/32"} }, `network.dns[0] "10.0.0.2/32"`},
		"VLAN 4095":            {func(n *metalv1alpha1.ProbeNetwork) { n.VLANID = 4095 }, "network.vlanID 4095 is not between 0 (untagged) and 4094"},
		"VLAN negative":        {func(n *metalv1alpha1.ProbeNetwork) { n.VLANID = -1 }, "network.vlanID -1"},
		"MAC too short":        {func(n *metalv1alpha1.ProbeNetwork) { n.InterfaceMAC = "3c:ec:ef:01:02" }, `network.interfaceMAC "3c:ec:ef:01:02" is not six colon-separated hex octets`},
		"MAC of InfiniBand": {func(n *metalv1alpha1.ProbeNetwork) {
			n.InterfaceMAC = "00:00:00:00:fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01"
		}, "network.interfaceMAC"},
		"MAC with hyphens": {func(n *metalv1alpha1.ProbeNetwork) { n.InterfaceMAC = "3c-ec-ef-01-02-03" }, "network.interfaceMAC"},
		"MAC not hex":      {func(n *metalv1alpha1.ProbeNetwork) { n.InterfaceMAC = "3c:ec:ef:01:02:0g" }, "network.interfaceMAC"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := withNetwork()
			tc.mutate(c.Network)
			_, err := Render(c)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			data, _ := json.Marshal(c)
			_, err = Parse(data)
			require.Error(t, err, "the probe refuses what the operator would not render")
			assert.Contains(t, err.Error(), tc.want)
			_, err = Decode(data)
			assert.ErrorContains(t, err, "network.", "Decode checks the network it carries")
		})
	}
}

func TestValidNetworkEdges(t *testing.T) {
	for _, n := range []metalv1alpha1.ProbeNetwork{
		{Address: "10.0.0.1/32"},                      // a host route: no network or broadcast address
		{Address: "10.0.0.0/31", Gateway: "10.0.0.1"}, // point-to-point: both addresses are hosts
		{Address: "10.0.0.254/24", Gateway: "10.0.0.1", VLANID: 4094, DNS: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}},
		{Address: "fd00::5/64", Gateway: "fd00::1", DNS: []string{"fd00::53"}},
		{Address: "2001:db8::ffff:ffff:ffff:ffff/64"}, // IPv6 has no broadcast address
		{Address: "10.0.0.21/24", InterfaceMAC: "3C:EC:EF:01:02:03"},
	} {
		c := valid()
		c.Network = &n
		assert.NoError(t, c.Validate(), "%+v", n)
	}
}
