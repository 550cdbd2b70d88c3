package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// apiAt answers every Get with the version the API is at, and counts the questions.
type apiAt struct {
	version string
	gone    bool
	gets    int
}

func (a *apiAt) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	a.gets++
	if a.gone {
		return apierrors.NewNotFound(schema.GroupResource{Group: m.GroupVersion.Group, Resource: "servers"}, key.Name)
	}
	obj.SetName(key.Name)
	obj.SetResourceVersion(a.version)
	return nil
}

func (a *apiAt) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func serverAt(version string) *m.Server {
	return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", ResourceVersion: version}}
}

func TestFreshnessWaitsForTheCacheWithoutAskingTheAPIAgain(t *testing.T) {
	ctx := context.Background()
	f := newFreshness()
	api := &apiAt{version: "12"}
	stale := func(cached string) bool {
		t.Helper()
		s, err := f.stale(ctx, api, serverAt(cached), &m.Server{})
		require.NoError(t, err)
		return s
	}

	assert.False(t, stale("10"), "nothing written: whatever the cache has is fresh")
	assert.Zero(t, api.gets)

	// A reconcile read version 10, patched metadata (11) and status (12).
	f.wrote(serverAt("12"), "10")
	for range 3 {
		assert.True(t, stale("10"), "the cache still shows the version the write was based on")
	}
	assert.Zero(t, api.gets, "a version known to be behind needs no question")

	assert.True(t, stale("11"), "a version between ours: the API says the cache lags")
	assert.Equal(t, 1, api.gets)
	assert.True(t, stale("11"), "the cache has not moved since the API was asked")
	assert.Equal(t, 1, api.gets)

	assert.False(t, stale("12"), "the cache has our write")
	assert.False(t, stale("12"))
	assert.Equal(t, 1, api.gets, "once caught up, the object is forgotten")
}

func TestFreshnessTakesALaterWriteBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	f := newFreshness()
	f.wrote(serverAt("12"), "10")

	// Someone else wrote 13 after us, and the cache already shows it.
	api := &apiAt{version: "13"}
	s, err := f.stale(ctx, api, serverAt("13"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "the cache is as new as the API")

	// Someone else wrote 13 and 14; the cache shows 13: wait for 14 (asking once).
	f.wrote(serverAt("12"), "10")
	api.version = "14"
	for range 2 {
		s, err = f.stale(ctx, api, serverAt("13"), &m.Server{})
		require.NoError(t, err)
		assert.True(t, s)
	}
	assert.Equal(t, 2, api.gets)
	s, err = f.stale(ctx, api, serverAt("14"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "the cache reached the API's version")
}

func TestFreshnessForgetsADeletedObject(t *testing.T) {
	ctx := context.Background()
	f := newFreshness()
	f.wrote(serverAt("12"), "10")
	api := &apiAt{gone: true}
	s, err := f.stale(ctx, api, serverAt("11"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "a deleted object is not waited for")
	assert.Empty(t, f.written)
}
