package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// TestTheBMCsBootModeIsTheServersUntilTheProbeReports: a BMC of a machine that enforces Secure
// Boot (BootSourceOverrideMode UEFI, its SecureBoot resource enabled for this boot) and one of
// a legacy machine: each Server is enrolled with status.bootMode as the BMC says, source BMC.
// A mode the probe reported (source Probe) is not overwritten by a later poll that reads the
// BMC again, though the BMC says otherwise.
func TestTheBMCsBootModeIsTheServersUntilTheProbeReports(t *testing.T) {
	ctx := context.Background()
	secure, legacy := testSystem(720), testSystem(721)
	secure.BootMode, legacy.BootMode = bmcsim.BootModeUEFISecureBoot, bmcsim.BootModeLegacy
	const name = "bootmode-bmc"
	sim, err := bmcsim.Start(bmcsim.Options{Username: goodUser, Password: goodPassword, Systems: []bmcsim.SystemSpec{secure, legacy}})
	require.NoError(t, err)
	createSecret(t, name, goodUser, goodPassword)
	createDirectBMC(t, name, "redfish+http://"+sim.Host()+"/redfish/v1", name)
	t.Cleanup(func() {
		assert.NoError(t, client.IgnoreNotFound(k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: name}})))
		assert.Eventually(t, func() bool { return k8s.Get(ctx, client.ObjectKey{Name: name}, &m.BMC{}) != nil },
			20*time.Second, 50*time.Millisecond, "BMC %s goes", name)
		assert.NoError(t, k8s.Delete(ctx, &m.BMCSecret{ObjectMeta: metav1.ObjectMeta{Name: name}}))
		_ = sim.Close()
	})

	server := func(spec bmcsim.SystemSpec) m.Server {
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: spec.UUID}, &s))
		return s
	}
	for spec, want := range map[*bmcsim.SystemSpec]m.BootMode{&secure: m.BootModeUEFISecureBoot, &legacy: m.BootModeLegacy} {
		eventually(t, 20*time.Second, func() bool {
			var s m.Server
			return k8s.Get(ctx, client.ObjectKey{Name: spec.UUID}, &s) == nil && s.Status.BootMode != ""
		}, "server %s gets a boot mode from its BMC", spec.UUID)
		s := server(*spec)
		assert.Equal(t, want, s.Status.BootMode, spec.UUID)
		assert.Equal(t, m.BootModeSourceBMC, s.Status.BootModeSource, spec.UUID)
		assert.Equal(t, want, s.Status.Inventory.BootMode, "read with the out-of-band inventory")
	}

	// The probe found Secure Boot off (the registry writes that, source Probe). The record's
	// inventory is dropped too, so the next poll reads the BMC's inventory, and its boot mode,
	// again: the place a poll would write the BMC's word.
	s := server(secure)
	before := s.DeepCopy()
	s.Status.BootMode, s.Status.BootModeSource, s.Status.Inventory = m.BootModeUEFI, m.BootModeSourceProbe, nil
	require.NoError(t, k8s.Status().Patch(ctx, &s, client.MergeFrom(before)))
	var secret m.BMCSecret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &secret))
	secret.Annotations = map[string]string{"test.ironfleet.dev/poke": "poll"} // wakes the BMC: a poll
	require.NoError(t, k8s.Update(ctx, &secret))
	eventually(t, 20*time.Second, func() bool { return server(secure).Status.Inventory != nil }, "the next poll reads the BMC's inventory")
	s = server(secure)
	assert.Equal(t, m.BootModeUEFISecureBoot, s.Status.Inventory.BootMode, "the BMC still says Secure Boot")
	assert.Equal(t, m.BootModeUEFI, s.Status.BootMode, "the probe's word stands")
	assert.Equal(t, m.BootModeSourceProbe, s.Status.BootModeSource)
}
