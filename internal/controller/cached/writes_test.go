package cached

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func serverAt(version string) *m.Server {
	return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: "s1", ResourceVersion: version}}
}

func claimAt(version string) *m.ServerClaim {
	return &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "c", ResourceVersion: version}}
}

func TestWritesComparesVersions(t *testing.T) {
	w := NewWrites()
	// A reconcile read version 10, patched metadata (11) and status (12).
	w.Wrote(serverAt("12"), "10")
	assert.True(t, w.Behind(serverAt("10")), "the version the write was based on")
	assert.True(t, w.Behind(serverAt("11")), "a version between ours is older than the write")
	assert.True(t, w.Behind(serverAt("9")))
	assert.False(t, w.Behind(serverAt("13")), "a later write, by someone else, over ours")
	assert.Empty(t, w.written, "caught up: forgotten")
	assert.False(t, w.Behind(serverAt("10")), "nothing remembered: whatever the cache has is taken")

	w.Wrote(serverAt("12"), "10")
	assert.False(t, w.Behind(serverAt("12")), "our write")
	assert.Empty(t, w.written)

	// Versions of different lengths compare as numbers, not as strings.
	w.Wrote(serverAt("100"), "98")
	assert.True(t, w.Behind(serverAt("99")))
	assert.False(t, w.Behind(serverAt("101")))
}

func TestWritesOfVersionsThatDoNotCompare(t *testing.T) {
	w := NewWrites()
	w.Wrote(claimAt("v3"), "v1", "v2", "v3")
	assert.True(t, w.Behind(claimAt("v1")))
	assert.True(t, w.Behind(claimAt("v2")))
	assert.False(t, w.Behind(claimAt("v3")))
	assert.False(t, w.Behind(claimAt("v1")), "once the cache was seen at the write, nothing is remembered")

	w.Wrote(claimAt("v5"), "v4")
	assert.False(t, w.Behind(claimAt("v9")), "a version it did not make is newer")
	assert.False(t, w.Behind(claimAt("v4")), "and then nothing is remembered")
}

func TestWritesKeysAndForget(t *testing.T) {
	w := NewWrites()
	w.Wrote(claimAt("7"), "6")
	other := claimAt("6")
	other.Namespace = "u"
	assert.False(t, w.Behind(other), "the same name in another namespace is another object")
	assert.True(t, w.Behind(claimAt("6")))
	w.Forget(client.ObjectKeyFromObject(claimAt("")))
	assert.False(t, w.Behind(claimAt("6")), "a claim that is gone is forgotten")

	// A write that changed nothing (the answer carries the version read) remembers nothing.
	w.Wrote(claimAt("8"), "8", "8")
	assert.False(t, w.Behind(claimAt("8")))
	assert.Empty(t, w.written)
}

func TestWritesOfAnObjectGoing(t *testing.T) {
	w := NewWrites()
	w.Going(claimAt("4"), "4")
	assert.True(t, w.Behind(claimAt("4")))
	assert.True(t, w.Behind(claimAt("4")), "still there: still waits")
	assert.True(t, w.Behind(claimAt("3")), "an older version waits too")
	assert.False(t, w.Behind(claimAt("5")), "it was not deleted after all: another finalizer")
	assert.Empty(t, w.written)

	var none *Writes
	none.Wrote(claimAt("2"), "1")
	none.Going(claimAt("2"), "1")
	none.Forget(client.ObjectKey{})
	assert.False(t, none.Behind(claimAt("1")), "a nil one never waits")
}

// oneServer is a client.Reader holding one Server, or none.
type oneServer struct{ s *m.Server }

func (r oneServer) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if r.s == nil || key.Name != r.s.Name {
		return apierrors.NewNotFound(m.GroupVersion.WithResource("servers").GroupResource(), key.Name)
	}
	r.s.DeepCopyInto(obj.(*m.Server))
	return nil
}

func (oneServer) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

func TestGetSaysBehindAndForgetsWhatIsGone(t *testing.T) {
	ctx := context.Background()
	key := client.ObjectKey{Name: "s1"}
	w := NewWrites()
	w.Wrote(serverAt("12"), "10")
	var s m.Server
	behind, err := w.Get(ctx, oneServer{serverAt("10")}, key, &s)
	require.NoError(t, err)
	assert.True(t, behind)
	assert.Equal(t, "10", s.ResourceVersion, "read into obj")
	assert.Equal(t, 20*time.Millisecond, CatchUpIf(behind).RequeueAfter)

	behind, err = w.Get(ctx, oneServer{serverAt("12")}, key, &s)
	require.NoError(t, err)
	assert.False(t, behind)
	assert.Zero(t, CatchUpIf(behind))

	w.Wrote(serverAt("14"), "12")
	behind, err = w.Get(ctx, oneServer{}, key, &s)
	assert.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.False(t, behind)
	assert.Empty(t, w.written, "a gone object is forgotten")
}
