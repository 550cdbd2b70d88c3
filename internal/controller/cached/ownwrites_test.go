package cached

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func claimAt(version string) *m.ServerClaim {
	return &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "web", ResourceVersion: version}}
}

// A reconcile that read version 1, added its finalizer (2) and wrote status (3): the cache at
// 1 or 2 is behind and waits; at 3, or at a later version of someone else's, it is not, and
// what was remembered is dropped.
func TestOwnWritesWaitForTheCache(t *testing.T) {
	w := NewOwnWrites()
	w.Wrote(claimAt("3"), "1", "2", "3")
	assert.True(t, w.Behind(claimAt("1")))
	assert.True(t, w.Behind(claimAt("2")))
	assert.False(t, w.Behind(claimAt("3")))
	assert.False(t, w.Behind(claimAt("1")), "once the cache was seen at the write, nothing is remembered")

	w.Wrote(claimAt("5"), "4")
	assert.False(t, w.Behind(claimAt("9")), "a version it did not make is newer")
	assert.False(t, w.Behind(claimAt("4")), "and then nothing is remembered")

	// Another namespace's claim of the same name is another object.
	w.Wrote(claimAt("7"), "6")
	other := claimAt("6")
	other.Namespace = "u"
	assert.False(t, w.Behind(other))
	assert.True(t, w.Behind(claimAt("6")))
	w.Forget(client.ObjectKeyFromObject(claimAt("")))
	assert.False(t, w.Behind(claimAt("6")), "a claim that is gone is forgotten")

	// A reconcile that wrote nothing remembers nothing.
	w.Wrote(claimAt("8"), "8", "8")
	assert.False(t, w.Behind(claimAt("8")))
}

// The update that removes the last finalizer may answer with the version it was sent: the
// version read is behind all the same, until the object is gone.
func TestOwnWritesGoing(t *testing.T) {
	w := NewOwnWrites()
	w.Going(claimAt("4"), "4")
	assert.True(t, w.Behind(claimAt("4")))
	assert.True(t, w.Behind(claimAt("4")))
	assert.False(t, w.Behind(claimAt("5")), "it was not deleted after all: another finalizer")

	var none *OwnWrites
	none.Wrote(claimAt("2"), "1")
	none.Going(claimAt("2"), "1")
	none.Forget(client.ObjectKey{})
	assert.False(t, none.Behind(claimAt("1")), "a nil one never waits")
}
