package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// TestAnEndedProbeBootIsReplaced: when the boot service ends a server's probe boot (its
// ignition, with the registry token, was asked for a second time: internal/boot), the operator
// drops that boot at once, so that the registry refuses its token, and boots the server again
// with a new boot and new secrets; a report of the new boot brings it to Available.
func TestAnEndedProbeBootIsReplaced(t *testing.T) {
	ctx := context.Background()
	host := enrollHost(t, "small-vm", 31)
	boots.Hold(host.UUID)
	createSecret(t, "bootended", goodUser, goodPassword)
	createDirectBMC(t, "bootended", simAddress(sims["bootended"]), "bootended")
	s := waitForState(t, 31, m.ServerStateDiscovery, 30*time.Second)
	sbcs := probeBoots(t, s.Name)
	require.Len(t, sbcs, 1)
	first := s.Status.ProbeBoot
	require.NotEmpty(t, first)
	require.Equal(t, first, sbcs[0].Annotations[m.AnnotationProbeBoot])

	// The boot service ends the boot, as it does on a second fetch of its ignition.
	sbc := sbcs[0].DeepCopy()
	before := sbc.DeepCopy()
	sbc.Status.Secrets = &m.BootSecrets{Boot: first, HostAddress: "192.0.2.7", HostAddressSource: "FirstFetch", IgnitionServedTo: "192.0.2.7", Ended: true}
	meta.SetStatusCondition(&sbc.Status.Conditions, metav1.Condition{Type: m.ConditionIgnitionServed, Status: metav1.ConditionFalse,
		Reason: "SecondFetchRefused", Message: "the boot's ignition was served to 192.0.2.7; a second fetch, from 192.0.2.66, was refused"})
	require.NoError(t, k8s.Status().Patch(ctx, sbc, client.MergeFrom(before)))

	// Dropped at once, and a new boot made, under another name (another registry token).
	var second string
	eventually(t, 15*time.Second, func() bool {
		cur := serverOf(t, 31)
		discovered := meta.FindStatusCondition(cur.Status.Conditions, m.ConditionDiscovered)
		if cur.Status.ProbeBoot == first || cur.Status.ProbeBoot == "" || discovered == nil || discovered.Reason != m.ReasonProbeBootEnded {
			return false
		}
		second = cur.Status.ProbeBoot
		sbcs := probeBoots(t, cur.Name)
		return len(sbcs) == 1 && sbcs[0].Annotations[m.AnnotationProbeBoot] == second && sbcs[0].Status.Secrets == nil
	}, "the ended boot is replaced by a new one")
	cur := serverOf(t, 31)
	discovered := meta.FindStatusCondition(cur.Status.Conditions, m.ConditionDiscovered)
	require.NotNil(t, discovered)
	assert.Contains(t, discovered.Message, "192.0.2.66", "the condition says who asked")
	assert.NotEqual(t, first, second)

	boots.Release(host.UUID)
	s = waitForState(t, 31, m.ServerStateAvailable, 30*time.Second)
	assert.Empty(t, probeBoots(t, s.Name))
}
