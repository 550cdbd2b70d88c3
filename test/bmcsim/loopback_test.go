package bmcsim_test

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
)

func TestLoopbackFleetServesEachBMCAtItsOwnAddressOnOnePort(t *testing.T) {
	const n = 300
	fleet, err := bmcsim.StartLoopbackFleet(n, true, func(i int) bmcsim.Options {
		return bmcsim.Options{Username: testUser, Password: testPass, SerialNumber: fmt.Sprintf("FLEET-%03d", i),
			Systems: []bmcsim.SystemSpec{bmcsim.DefaultSystem(i)}}
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, fleet.Close()) })
	require.Len(t, fleet.BMCs, n)

	hosts := map[string]bool{}
	for i, b := range fleet.BMCs {
		host, port, err := net.SplitHostPort(b.Host())
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprint(fleet.Port()), port, "one port for the fleet")
		assert.Equal(t, bmcsim.FleetAddr(i).String(), host)
		assert.False(t, hosts[host], "each BMC has its own address")
		hosts[host] = true
		assert.Equal(t, fleet.CACertPEM(), b.CACertPEM(), "one CA vouches for every BMC")
	}

	// Each BMC answers as itself, over TLS verified against the fleet CA for its own address.
	for _, i := range []int{0, 1, 255, 256, n - 1} {
		b := fleet.BMCs[i]
		c := connect(t, b, false)
		systems, err := c.Service.Systems()
		require.NoError(t, err)
		require.Len(t, systems, 1)
		assert.Equal(t, bmcsim.DefaultSystem(i).UUID, systems[0].UUID, "BMC %d serves its own system", i)
		managers, err := c.Service.Managers()
		require.NoError(t, err)
		require.Len(t, managers, 1)
		assert.Equal(t, fmt.Sprintf("FLEET-%03d", i), managers[0].SerialNumber)
	}

	// An address that is not the fleet's gets no answer.
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probing that nothing answers
	_, err = insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/redfish/v1/", fleet.Port()))
	assert.Error(t, err, "127.0.0.1 is not a fleet BMC")

	// A BMC taken off the network stops answering; its neighbours do not.
	require.NoError(t, fleet.BMCs[3].Close())
	_, err = httpClient(t, fleet.BMCs[3]).Get(fleet.BMCs[3].URL() + "/redfish/v1/")
	assert.Error(t, err, "a closed BMC does not answer")
	getOK(t, fleet.BMCs[4], "/redfish/v1/Systems")
	assert.Positive(t, fleet.BMCs[4].Stats().Requests)
	assert.Zero(t, fleet.BMCs[5].Stats().Requests, "requests are counted by the BMC they reached")
}
