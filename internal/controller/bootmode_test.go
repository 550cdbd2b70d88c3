package controller_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/lab"
)

// uefi gives a host's tree what a UEFI firmware leaves in sysfs: /sys/firmware/efi, and in
// efivarfs the SecureBoot variable (4 bytes of attributes, then its value: 1 enforced, 0 off).
func uefi(t *testing.T, host lab.Host, secureBoot byte) {
	t.Helper()
	dir := filepath.Join(host.Root, "sys", "firmware", "efi", "efivars")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"), []byte{0x06, 0, 0, 0, secureBoot}, 0o644))
}

// bootModeCondition waits until the server's BootMode condition has reason, and returns it.
func bootModeCondition(t *testing.T, name, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	eventually(t, 20*time.Second, func() bool {
		var s m.Server
		require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
		c = meta.FindStatusCondition(s.Status.Conditions, m.ConditionBootMode)
		return c != nil && c.Reason == reason && c.ObservedGeneration == s.Generation
	}, "server %s: BootMode %s", name, reason)
	return c
}

// setSpecBootMode sets a server's spec.bootMode ("" removes it).
func setSpecBootMode(t *testing.T, name string, mode m.BootMode) {
	t.Helper()
	var s m.Server
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &s))
	before := s.DeepCopy()
	s.Spec.BootMode = mode
	require.NoError(t, k8s.Patch(context.Background(), &s, client.MergeFrom(before)))
}

// TestBootModeFromTheProbeDecidesTheClaims: four servers whose probes read their firmware's
// variables: Secure Boot enforced (two), Secure Boot off, and legacy BIOS. Each server's
// status.bootMode is what its probe's report found (source Probe); one whose spec.bootMode asks
// for another mode says so (BootMode False, BootModeMismatch, with what to do). A claim asking
// for UEFISecureBoot binds only a server found so and not held to another mode by its spec; a
// second one waits, saying what no server does, until such a server's spec stops asking for
// another mode.
func TestBootModeFromTheProbeDecidesTheClaims(t *testing.T) {
	ctx := context.Background()
	firmware := []m.BootMode{m.BootModeUEFISecureBoot, m.BootModeUEFI, m.BootModeLegacy, m.BootModeUEFISecureBoot}
	p := startPoolOf(t, "bootmode", 700, []string{"small-vm", "small-vm", "small-vm", "small-vm"}, bmcsim.Options{}, func(i int, host *lab.Host) {
		switch firmware[i] {
		case m.BootModeUEFISecureBoot:
			uefi(t, *host, 1)
		case m.BootModeUEFI:
			uefi(t, *host, 0)
		}
	})
	createNamespace(t, "bootmode")
	// The servers in the order of their hosts (systems 700-703).
	var names []string
	for i := range firmware {
		names = append(names, testSystem(700+i).UUID)
	}
	require.Len(t, p.hosts, len(firmware))
	for i, name := range names {
		var s m.Server
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &s))
		assert.Equal(t, firmware[i], s.Status.BootMode, "server %d, %s", i, name)
		assert.Equal(t, m.BootModeSourceProbe, s.Status.BootModeSource, "server %d, %s", i, name)
		c := bootModeCondition(t, name, m.ReasonBootModeAsFound)
		assert.Equal(t, metav1.ConditionTrue, c.Status)
		assert.Equal(t, "found booting "+string(firmware[i])+" (from the probe's report); spec.bootMode asks for no mode", c.Message)
	}
	secure, off, secureHeld := names[0], names[1], names[3]

	// Asked for Secure Boot, found with it off: the condition says what to do.
	setSpecBootMode(t, off, m.BootModeUEFISecureBoot)
	c := bootModeCondition(t, off, m.ReasonBootModeMismatch)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, "spec.bootMode is UEFISecureBoot, and the probe found the firmware booting UEFI with Secure Boot off: "+
		"enable Secure Boot in the firmware setup (or through the BMC), or set spec.bootMode to UEFI", c.Message)
	// Found with Secure Boot, held to UEFI without it by its spec.
	setSpecBootMode(t, secureHeld, m.BootModeUEFI)
	assert.Equal(t, metav1.ConditionFalse, bootModeCondition(t, secureHeld, m.ReasonBootModeMismatch).Status)
	setSpecBootMode(t, secure, m.BootModeUEFISecureBoot)
	assert.Equal(t, metav1.ConditionTrue, bootModeCondition(t, secure, m.ReasonBootModeMatches).Status)

	asks := func(name string) *m.ServerClaim {
		claim := poolClaim("bootmode", name, "bootmode")
		claim.Spec.BootMode = m.BootModeUEFISecureBoot
		require.NoError(t, k8s.Create(ctx, claim))
		return claim
	}
	boundTo := func(claim *m.ServerClaim) string {
		var server string
		eventually(t, 30*time.Second, func() bool {
			require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(claim), claim))
			if claim.Status.ServerRef != nil {
				server = claim.Status.ServerRef.Name
			}
			return server != ""
		}, "claim %s bound", claim.Name)
		return server
	}
	first := asks("first")
	assert.Equal(t, secure, boundTo(first), "the one server found with Secure Boot and not held to another mode")

	second := asks("second")
	eventually(t, 20*time.Second, func() bool {
		require.NoError(t, k8s.Get(ctx, client.ObjectKeyFromObject(second), second))
		c := meta.FindStatusCondition(second.Status.Conditions, m.ConditionBound)
		return c != nil && c.Reason == m.ClaimReasonNoMatchingServer
	}, "claim second waits")
	assert.Equal(t, "no Available server boots UEFISecureBoot (spec.bootMode); the claim binds as soon as one does",
		meta.FindStatusCondition(second.Status.Conditions, m.ConditionBound).Message)
	assert.Nil(t, second.Status.ServerRef)

	// The server found with Secure Boot is let go to the mode found: the waiting claim gets it.
	setSpecBootMode(t, secureHeld, "")
	assert.Equal(t, secureHeld, boundTo(second))
	var s m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: off}, &s))
	assert.Nil(t, s.Spec.ServerClaimRef, "the server found with Secure Boot off went to no claim")
}
