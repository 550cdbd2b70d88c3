package lab

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/identity"
)

// TestEveryKindOfSystemIdentityReachesAvailable runs the lab with one BMC of each kind and two
// systems behind each: good UUIDs, no UUID (OpenBMC), one UUID for every system (Supermicro),
// all zeros, all F and AMI's placeholder (the firmware holds it, so the probe reads it too).
// Each system gets a Server of its own, is discovered by the real probe with its report stored
// on that Server (the serial number the host's firmware holds is the one its BMC reports for
// it), and reaches Available.
func TestEveryKindOfSystemIdentityReachesAvailable(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a lab of 9 BMCs; make test runs it")
	}
	ctx := context.Background()
	kinds := len(labBMCs)
	l, err := Start(ctx, Options{Dir: filepath.Join(t.TempDir(), "lab"), Servers: 2 * kinds, BMCs: kinds})
	require.NoError(t, err)
	t.Cleanup(l.Stop)
	require.NoError(t, l.WaitForServers(ctx, 2*kinds, metalv1alpha1.ServerStateAvailable, 4*time.Minute))

	// What each BMC says of its systems (their serial numbers) is written by the BMC's poll,
	// which may lose a race with a Server's own first writes and come again a second later:
	// a Server can be Available before it.
	var servers metalv1alpha1.ServerList
	require.Eventually(t, func() bool {
		if l.Client.List(ctx, &servers) != nil {
			return false
		}
		for _, s := range servers.Items {
			if s.Status.SerialNumber == "" {
				return false
			}
		}
		return true
	}, 30*time.Second, 100*time.Millisecond, "every Server has what its BMC says of it")
	require.Len(t, servers.Items, 2*kinds, "one Server per system")
	byHost := map[string]*metalv1alpha1.Server{}
	for i := range servers.Items {
		s := &servers.Items[i]
		host, _, ok := l.HostOf(s)
		require.True(t, ok, "server %s is a system of the lab", s.Name)
		require.Nil(t, byHost[host.UUID], "host %s has two Servers: %s and %s", host.UUID, s.Name, byHost[host.UUID])
		byHost[host.UUID] = s
	}

	reads := map[string]int{} // how many hosts read each UUID
	for _, h := range l.Hosts {
		reads[h.ReadsUUID()]++
	}
	for i, h := range l.Hosts {
		kind := labBMCs[i%kinds]
		s := byHost[h.UUID]
		require.NotNil(t, s, "host %d (%s) has a Server", i, kind.about)
		t.Run(kind.about+"/"+h.SystemID, func(t *testing.T) {
			assert.Equal(t, metalv1alpha1.ServerStateAvailable, s.Status.State)
			inv := s.Status.Inventory
			require.NotNil(t, inv)
			assert.Equal(t, "Probe", inv.Source, "discovered in-band")
			require.NotNil(t, inv.DMI)
			assert.Equal(t, h.SerialNumber, inv.DMI.System.SerialNumber, "the report on this Server came from this host")
			assert.Equal(t, s.Status.SerialNumber, inv.DMI.System.SerialNumber, "the machine its BMC says it is")
			assert.Equal(t, h.ReadsUUID(), strings.ToLower(inv.DMI.System.UUID), "the UUID the host read is kept, as information")

			usable := identity.Usable(s.Spec.SystemUUID) && reads[h.ReadsUUID()] == 1 && s.Spec.SystemUUID == h.UUID
			if i%kinds < 4 {
				assert.True(t, usable, "%s reports a good UUID", kind.about)
				assert.Equal(t, h.UUID, s.Name, "named by its UUID")
			} else {
				assert.Equal(t, labBMCName(i%kinds)+"-"+strings.ToLower(h.SystemID), s.Name, "named by BMC and Id")
				assert.Empty(t, identity.ServerUUID(s), "its UUID is not its identity")
			}
		})
	}
	// The kinds the lab is for are all there: what each BMC reported for its systems.
	spec := map[string][]string{}
	for i, h := range l.Hosts {
		spec[labBMCs[i%kinds].about] = append(spec[labBMCs[i%kinds].about], byHost[h.UUID].Spec.SystemUUID)
	}
	assert.Equal(t, []string{"", ""}, spec["OpenBMC: no UUID"])
	assert.Equal(t, []string{"", ""}, spec["whitebox: all-zero UUID"], "the BMC client takes all zeros for none")
	assert.Equal(t, []string{"", ""}, spec["Lenovo, replaced board: all-F UUID"], "and all F")
	assert.Equal(t, []string{"03000200-0400-0500-0006-000700080009", "03000200-0400-0500-0006-000700080009"}, spec["Supermicro: AMI placeholder UUID"])
	smc := spec["Supermicro: one UUID for every system"]
	assert.Equal(t, smc[0], smc[1], "Supermicro's BMC reports one UUID for both")
	assert.True(t, identity.Usable(smc[0]), "a good UUID, but shared")
}
