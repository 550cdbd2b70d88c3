package cached

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

func TestFreshnessComparesVersionsAndNeverAsksTheAPI(t *testing.T) {
	ctx := context.Background()
	f := NewFreshness()
	api := &apiAt{version: "14"}
	stale := func(cached string) bool {
		t.Helper()
		s, err := f.Stale(ctx, api, serverAt(cached), &m.Server{})
		require.NoError(t, err)
		return s
	}
	// A reconcile read version 10, patched metadata (11) and status (12).
	f.Wrote(serverAt("12"), "10")
	assert.True(t, stale("10"), "the version the write was based on")
	assert.True(t, stale("11"), "a version between ours is older than the write")
	assert.True(t, stale("9"))
	assert.False(t, stale("13"), "a later write, by someone else, over ours")
	assert.Empty(t, f.written, "caught up: forgotten")

	f.Wrote(serverAt("12"), "10")
	assert.False(t, stale("12"), "our write")
	assert.Zero(t, api.gets, "comparable versions need no question")

	// Versions of different lengths compare as numbers, not strings.
	f.Wrote(serverAt("100"), "98")
	assert.True(t, stale("99"))
	assert.False(t, stale("1000"))
	assert.Zero(t, api.gets)
}

// The tests below give versions that are not well-formed (an API that does not promise
// comparable ones): the API is asked when the cache shows a version that cannot be placed.

func TestFreshnessWaitsForTheCacheWithoutAskingTheAPIAgain(t *testing.T) {
	ctx := context.Background()
	f := NewFreshness()
	api := &apiAt{version: "v12"}
	stale := func(cached string) bool {
		t.Helper()
		s, err := f.Stale(ctx, api, serverAt(cached), &m.Server{})
		require.NoError(t, err)
		return s
	}

	assert.False(t, stale("v10"), "nothing written: whatever the cache has is fresh")
	assert.Zero(t, api.gets)

	// A reconcile read version 10, patched metadata (11) and status (12).
	f.Wrote(serverAt("v12"), "v10")
	for range 3 {
		assert.True(t, stale("v10"), "the cache still shows the version the write was based on")
	}
	assert.Zero(t, api.gets, "a version known to be behind needs no question")

	assert.True(t, stale("v11"), "a version between ours: the API says the cache lags")
	assert.Equal(t, 1, api.gets)
	assert.True(t, stale("v11"), "the cache has not moved since the API was asked")
	assert.Equal(t, 1, api.gets)

	assert.False(t, stale("v12"), "the cache has our write")
	assert.False(t, stale("v12"))
	assert.Equal(t, 1, api.gets, "once caught up, the object is forgotten")
}

func TestFreshnessTakesALaterWriteBySomeoneElse(t *testing.T) {
	ctx := context.Background()
	f := NewFreshness()
	f.Wrote(serverAt("v12"), "v10")

	// Someone else wrote 13 after us, and the cache already shows it.
	api := &apiAt{version: "v13"}
	s, err := f.Stale(ctx, api, serverAt("v13"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "the cache is as new as the API")

	// Someone else wrote 13 and 14; the cache shows 13: wait for 14 (asking once).
	f.Wrote(serverAt("v12"), "v10")
	api.version = "v14"
	for range 2 {
		s, err = f.Stale(ctx, api, serverAt("v13"), &m.Server{})
		require.NoError(t, err)
		assert.True(t, s)
	}
	assert.Equal(t, 2, api.gets)
	s, err = f.Stale(ctx, api, serverAt("v14"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "the cache reached the API's version")
}

func TestFreshnessForgetsADeletedObject(t *testing.T) {
	ctx := context.Background()
	f := NewFreshness()
	f.Wrote(serverAt("v12"), "v10")
	api := &apiAt{gone: true}
	s, err := f.Stale(ctx, api, serverAt("v11"), &m.Server{})
	require.NoError(t, err)
	assert.False(t, s, "a deleted object is not waited for")
	assert.Empty(t, f.written)
}
