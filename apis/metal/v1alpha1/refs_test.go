package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func claim(namespace, name, uid string) *m.ServerClaim {
	return &m.ServerClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: k8stypes.UID(uid)}}
}

func TestAReferenceNamesItsObjectByNameAndUID(t *testing.T) {
	web := claim("tenant", "web", "u1")
	pinned := &m.ObjectReference{Namespace: "tenant", Name: "web", UID: "u1"}
	assert.True(t, pinned.Names(web))
	assert.False(t, pinned.Names(claim("tenant", "web", "u2")), "made again under the same name: another claim")
	assert.False(t, pinned.Names(claim("other", "web", "u1")), "another namespace")
	assert.False(t, pinned.Names(claim("tenant", "db", "u1")), "another name")
	unpinned := &m.ObjectReference{Namespace: "tenant", Name: "web"}
	assert.False(t, unpinned.Names(web), "a reference without a UID names nothing")
	assert.False(t, unpinned.Names(claim("tenant", "web", "")), "not even an object without one")
	var none *m.ObjectReference
	assert.False(t, none.Names(web), "no reference names nothing")
}

func TestSameReference(t *testing.T) {
	a := &m.ObjectReference{Namespace: "n", Name: "a", UID: "1"}
	assert.True(t, m.SameReference(nil, nil))
	assert.False(t, m.SameReference(a, nil))
	assert.False(t, m.SameReference(nil, a))
	assert.True(t, m.SameReference(a, &m.ObjectReference{Namespace: "n", Name: "a", UID: "1"}))
	assert.False(t, m.SameReference(a, &m.ObjectReference{Namespace: "n", Name: "a", UID: "2"}))
	assert.False(t, m.SameReference(a, &m.ObjectReference{Namespace: "n", Name: "b", UID: "1"}))
}

func TestAServerIsHeldByTheClaimWhoseUIDItNames(t *testing.T) {
	web := claim("tenant", "web", "u1")
	held := &m.Server{Spec: m.ServerSpec{ServerClaimRef: &m.ObjectReference{Namespace: "tenant", Name: "web", UID: "u1"}}}
	assert.True(t, held.HeldByClaim(web))
	assert.False(t, held.HeldByClaim(claim("tenant", "web", "u2")), "a claim made again under the same name does not hold it")
	assert.False(t, (&m.Server{}).HeldByClaim(web), "an unclaimed server")
	unpinned := &m.Server{Spec: m.ServerSpec{ServerClaimRef: &m.ObjectReference{Namespace: "tenant", Name: "web"}}}
	assert.False(t, unpinned.HeldByClaim(web), "the claim controller binds by UID")
}

func TestAServerIsHeldByTheMaintenanceItNames(t *testing.T) {
	sm := &m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "firmware"}}
	held := &m.Server{Spec: m.ServerSpec{MaintenanceRef: &m.ObjectReference{Namespace: "ops", Name: "firmware"}}}
	assert.True(t, held.HeldByMaintenance(sm))
	assert.False(t, held.HeldByMaintenance(&m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "bios"}}))
	assert.False(t, held.HeldByMaintenance(&m.ServerMaintenance{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "firmware"}}))
	assert.False(t, (&m.Server{}).HeldByMaintenance(sm), "a server no maintenance holds")
}

func TestInstallTargetIsTheImageAndItsChecksum(t *testing.T) {
	assert.Equal(t, "https://images/a.raw", m.InstallTarget("https://images/a.raw", ""))
	assert.Equal(t, "https://images/a.raw sha256:ab", m.InstallTarget("https://images/a.raw", "sha256:ab"))
	assert.NotEqual(t, m.InstallTarget("a", "sha256:1"), m.InstallTarget("a", "sha256:2"), "a new checksum is a new target")
}
