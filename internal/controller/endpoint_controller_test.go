package controller_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func createEndpoint(t *testing.T, name, mac string) {
	t.Helper()
	require.NoError(t, k8s.Create(context.Background(), &m.Endpoint{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       m.EndpointSpec{MACAddress: mac, IP: "127.0.0.1"},
	}))
}

func endpointCondition(name, condType string) *metav1.Condition {
	var ep m.Endpoint
	if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &ep) != nil {
		return nil
	}
	return meta.FindStatusCondition(ep.Status.Conditions, condType)
}

// TestMatchingEndpointYieldsAReadyBMC: the second default credential is the right one; the
// Endpoint gets a BMC and BMCSecret it owns, the BMC becomes Ready and enrolls the servers.
func TestMatchingEndpointYieldsAReadyBMC(t *testing.T) {
	ctx := context.Background()
	createEndpoint(t, "ep-good", prefixGood+":01")

	eventually(t, 20*time.Second, func() bool {
		c := endpointCondition("ep-good", m.ConditionReady)
		return c != nil && c.Status == metav1.ConditionTrue
	}, "endpoint reports its BMC")
	var ep m.Endpoint
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "ep-good"}, &ep))
	assert.Equal(t, "Contoso", ep.Status.Manufacturer)
	assert.Equal(t, "Redfish", ep.Status.Protocol)
	assert.Equal(t, prefixGood, ep.Status.MACPrefix)
	assert.Equal(t, "ep-good", ep.Status.BMCRef.Name)

	var secret m.BMCSecret
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "ep-good"}, &secret))
	assert.Equal(t, goodPassword, secret.Spec.Password, "the credential that authenticated is the one kept")
	assert.Equal(t, "1", secret.Annotations[m.AnnotationCredentialIndex], "and which one it was is remembered")
	assert.True(t, metav1.IsControlledBy(&secret, &ep))

	var b m.BMC
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "ep-good"}, &b))
	assert.True(t, metav1.IsControlledBy(&b, &ep))
	assert.Equal(t, "ep-good", b.Spec.EndpointRef.Name)
	assert.False(t, b.Spec.InsecureSkipVerify, "TLS stays verified")
	eventually(t, 20*time.Second, func() bool { return readyReason("ep-good") == m.BMCReasonConnected }, "BMC becomes Ready")

	var servers m.ServerList
	eventually(t, 20*time.Second, func() bool {
		_ = k8s.List(ctx, &servers, client.MatchingLabels{m.LabelBMC: "ep-good"})
		return len(servers.Items) == 2
	}, "one server per simulated system")
}

// TestNoDefaultCredentialAuthenticates: a matched endpoint whose BMC refuses every default
// credential gets no BMC and says why.
func TestNoDefaultCredentialAuthenticates(t *testing.T) {
	createEndpoint(t, "ep-allwrong", prefixAllWrong+":01")
	eventually(t, 20*time.Second, func() bool {
		c := endpointCondition("ep-allwrong", m.ConditionReady)
		return c != nil && c.Reason == m.EndpointReasonNoCredential
	})
	c := endpointCondition("ep-allwrong", m.ConditionReady)
	assert.Contains(t, c.Message, "none of the 2 default credentials")
	err := k8s.Get(context.Background(), client.ObjectKey{Name: "ep-allwrong"}, &m.BMC{})
	assert.True(t, apierrors.IsNotFound(err), "no BMC without working credentials")
}

// TestUnreachableEndpointWaits: a matched endpoint whose BMC does not answer gets no BMC yet.
func TestUnreachableEndpointWaits(t *testing.T) {
	createEndpoint(t, "ep-dead", prefixNoBMC+":01")
	eventually(t, 20*time.Second, func() bool {
		c := endpointCondition("ep-dead", m.ConditionReady)
		return c != nil && c.Reason == m.BMCReasonUnreachable
	})
	err := k8s.Get(context.Background(), client.ObjectKey{Name: "ep-dead"}, &m.BMC{})
	assert.True(t, apierrors.IsNotFound(err))
}

// TestUnmatchedMACCreatesNothing.
func TestUnmatchedMACCreatesNothing(t *testing.T) {
	createEndpoint(t, "ep-unknown", unmatchedMAC)
	eventually(t, 20*time.Second, func() bool {
		c := endpointCondition("ep-unknown", m.ConditionMatched)
		return c != nil && c.Status == metav1.ConditionFalse
	})
	c := endpointCondition("ep-unknown", m.ConditionMatched)
	assert.Equal(t, m.EndpointReasonNoMatchingPrefix, c.Reason)
	assert.Contains(t, c.Message, unmatchedMAC)
	err := k8s.Get(context.Background(), client.ObjectKey{Name: "ep-unknown"}, &m.BMC{})
	assert.True(t, apierrors.IsNotFound(err))
	err = k8s.Get(context.Background(), client.ObjectKey{Name: "ep-unknown"}, &m.BMCSecret{})
	assert.True(t, apierrors.IsNotFound(err))
}
