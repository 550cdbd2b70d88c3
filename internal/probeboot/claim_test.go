package probeboot

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/testenv"
)

// A claim's boot configuration made for a server the claim no longer holds is deleted (the
// caller learns which, to say so), and the next look makes one for the server it holds, owned
// by the claim and labelled for the boot operator.
func TestEnsureClaimBootReplacesOneForAnotherServer(t *testing.T) {
	ctx := context.Background()
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-web"},
		Spec: m.ServerClaimSpec{Image: "http://images/os.img"}}
	lost := &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "lost"}, Purpose: m.BootPurposeProvisioning}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(claim).Build()
	require.NoError(t, controllerutil.SetControllerReference(claim, lost, c.Scheme()))
	require.NoError(t, c.Create(ctx, lost))
	held := &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "held"}}

	sbc, err := EnsureClaimBoot(ctx, c, "other-operator", claim, held)
	var stale *StaleClaimBootError
	require.True(t, errors.As(err, &stale), "got %v", err)
	assert.Nil(t, sbc)
	assert.Equal(t, "lost", stale.Deleted.Spec.ServerRef.Name)
	assert.Equal(t, "held", stale.Server)
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(lost), &m.ServerBootConfiguration{})))

	sbc, err = EnsureClaimBoot(ctx, c, "other-operator", claim, held)
	require.NoError(t, err)
	assert.Equal(t, "held", sbc.Spec.ServerRef.Name)
	assert.Equal(t, claim.Spec.Image, sbc.Spec.Image)
	assert.True(t, metav1.IsControlledBy(sbc, claim))
	assert.Equal(t, map[string]string{m.LabelServer: "held", m.LabelBootOperator: "other-operator"}, sbc.Labels)
}

// One at the claim's name that an earlier claim of the name made is not this claim's to use,
// nor to delete: DropOrphanClaimBoot deletes it once that claim is gone.
func TestEnsureClaimBootRefusesAnEarlierClaimsAndDropOrphanDeletesIt(t *testing.T) {
	ctx := context.Background()
	earlier := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-earlier"}}
	claim := &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "uid-now"}}
	old := &m.ServerBootConfiguration{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web"},
		Spec: m.ServerBootConfigurationSpec{ServerRef: m.LocalObjectReference{Name: "s1"}, Purpose: m.BootPurposeProvisioning}}
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(claim).Build()
	require.NoError(t, controllerutil.SetControllerReference(earlier, old, c.Scheme()))
	require.NoError(t, c.Create(ctx, old))

	_, err := EnsureClaimBoot(ctx, c, "other-operator", claim, &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1"}})
	require.Error(t, err)
	var stale *StaleClaimBootError
	assert.False(t, errors.As(err, &stale))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(old), &m.ServerBootConfiguration{}), "not deleted by the claim that found it")

	require.NoError(t, DropOrphanClaimBoot(ctx, c, c, client.ObjectKeyFromObject(claim), claim))
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(old), &m.ServerBootConfiguration{})), "the earlier claim's is deleted")
}
