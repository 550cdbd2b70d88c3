package enroll

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
	"github.com/ironfleet/ironfleet/test/testenv"
)

const (
	goodUUID    = "4c4c4544-0042-3510-8052-b7c04f564433"
	otherUUID   = "4c4c4544-0042-3510-8052-b7c04f564434"
	amiDefault  = "03000200-0400-0500-0006-000700080009"
	allZeroUUID = "00000000-0000-0000-0000-000000000000"
)

func system(id, uuid string) bmc.SystemInfo {
	return bmc.SystemInfo{ID: id, URI: "/redfish/v1/Systems/" + id, UUID: uuid}
}

func TestServerNamesFollowTheIdentityRule(t *testing.T) {
	systems := []bmc.SystemInfo{
		system("1", strings.ToUpper(goodUUID)),         // usable and unique: its UUID, lower case
		system("2", otherUUID), system("3", otherUUID), // shared within the BMC
		system("4", ""), system("5", allZeroUUID), system("6", "ffffffff-ffff-ffff-ffff-ffffffffffff"),
		system("7", amiDefault), system("8", "Not Settable"),
		system("System.Embedded.9", "00020003-0004-0005-0006-000700080009"),
	}
	var names []string
	for _, n := range serverNames("Rack4_BMC", systems) {
		names = append(names, n.name)
		if n.name == goodUUID {
			assert.Empty(t, n.notByUUID)
		} else {
			assert.NotEmpty(t, n.notByUUID, "%s says why it is not named by its UUID", n.name)
		}
	}
	assert.Equal(t, []string{goodUUID, "rack4-bmc-2", "rack4-bmc-3", "rack4-bmc-4", "rack4-bmc-5", "rack4-bmc-6", "rack4-bmc-7", "rack4-bmc-8", "rack4-bmc-system.embedded.9"}, names)
	assert.Contains(t, serverNames("b", systems)[1].notByUUID, "2 systems of the BMC report its UUID")
	assert.Contains(t, serverNames("b", systems)[6].notByUUID, "AMI BIOS default")
	assert.NotEqual(t, hashedServerName("a-b", system("c", "")), hashedServerName("a", system("b-c", "")), "the last resort tells colliding fallbacks apart")
	assert.Len(t, hashedServerName(strings.Repeat("b", 300), system("1", "")), 253)
}

// bmcReconcilerWith is a BMC reconciler on a fake client holding objs, with the BMC index.
func bmcReconcilerWith(objs ...client.Object) (*BMCReconciler, client.Client, *events.FakeRecorder) {
	c := fake.NewClientBuilder().WithScheme(testenv.Scheme()).WithObjects(objs...).
		WithIndex(&m.Server{}, indexServerByBMC, func(o client.Object) []string {
			if ref := o.(*m.Server).Spec.BMCRef; ref != nil {
				return []string{ref.Name}
			}
			return nil
		}).Build()
	rec := events.NewFakeRecorder(16)
	return &BMCReconciler{Client: c, APIReader: c, Events: rec}, c, rec
}

func serverOfBMC(name, bmcName, uri, uuid string) *m.Server {
	return &m.Server{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: m.ServerSpec{SystemUUID: uuid, SystemURI: uri, BMCRef: &m.LocalObjectReference{Name: bmcName}}}
}

// ensure runs one sync's naming and getting of a system's Server, as syncServers does.
func ensure(t *testing.T, r *BMCReconciler, b *m.BMC, systems []bmc.SystemInfo, i int) *m.Server {
	t.Helper()
	s, err := r.ensureServer(context.Background(), b, systems[i], serverNames(b.Name, systems)[i])
	require.NoError(t, err)
	return s
}

func serverCount(t *testing.T, c client.Client) int {
	t.Helper()
	var list m.ServerList
	require.NoError(t, c.List(context.Background(), &list))
	return len(list.Items)
}

// TestEnsureServerKeepsEveryMachineToOneServer: existing Servers keep their names whatever rule
// named them, and no system gets a second Server; a board swap (another usable UUID in the
// slot of a Server named by its UUID) is another machine.
func TestEnsureServerKeepsEveryMachineToOneServer(t *testing.T) {
	b := &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "bmc-1"}}

	// An older Ironfleet named a Server by the AMI placeholder, the only one in the cluster.
	r, c, _ := bmcReconcilerWith(serverOfBMC(amiDefault, "bmc-1", "/redfish/v1/Systems/1", amiDefault))
	s := ensure(t, r, b, []bmc.SystemInfo{system("1", amiDefault)}, 0)
	assert.Equal(t, amiDefault, s.Name, "it keeps its name")
	assert.Equal(t, 1, serverCount(t, c))

	// A Server named by its UUID, and a second system of the BMC now reports that UUID too.
	r, c, _ = bmcReconcilerWith(serverOfBMC(goodUUID, "bmc-1", "/redfish/v1/Systems/1", goodUUID))
	both := []bmc.SystemInfo{system("1", goodUUID), system("2", goodUUID)}
	assert.Equal(t, goodUUID, ensure(t, r, b, both, 0).Name, "the first keeps its Server")
	assert.Equal(t, "bmc-1-2", ensure(t, r, b, both, 1).Name, "the second gets one by BMC and Id")
	assert.Equal(t, goodUUID, ensure(t, r, b, both, 0).Name, "and the next poll agrees")
	assert.Equal(t, 2, serverCount(t, c))

	// The slot of a Server named by BMC and Id reports a UUID now (firmware programmed one): the
	// slot was its identity, it is the same Server.
	r, c, _ = bmcReconcilerWith(serverOfBMC("bmc-1-1", "bmc-1", "/redfish/v1/Systems/1", ""))
	assert.Equal(t, "bmc-1-1", ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID)}, 0).Name)
	assert.Equal(t, 1, serverCount(t, c))

	// A board swap: the slot of a Server named by its UUID reports another usable UUID.
	r, c, _ = bmcReconcilerWith(serverOfBMC(goodUUID, "bmc-1", "/redfish/v1/Systems/1", goodUUID))
	assert.Equal(t, otherUUID, ensure(t, r, b, []bmc.SystemInfo{system("1", otherUUID)}, 0).Name)
	assert.Equal(t, 2, serverCount(t, c))
}

// TestEnsureServerNamesADuplicateOfAnotherBMCByBMCAndId: a UUID another BMC's Server is named
// by; then a fallback name another BMC's Server has too.
func TestEnsureServerNamesADuplicateOfAnotherBMCByBMCAndId(t *testing.T) {
	b := &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	r, c, rec := bmcReconcilerWith(serverOfBMC(goodUUID, "other", "/redfish/v1/Systems/1", goodUUID), &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
		serverOfBMC("a-b-c", "a-b", "/redfish/v1/Systems/c", ""))
	s := ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID)}, 0)
	assert.Equal(t, "a-1", s.Name)
	assert.Equal(t, goodUUID, s.Spec.SystemUUID, "the UUID is kept, for people")
	assert.Contains(t, <-rec.Events, "DuplicateSystemUUID")
	assert.Contains(t, <-rec.Events, "named by BMC and Id: its UUID "+goodUUID+" is another BMC's server's name")
	assert.Equal(t, "a-1", ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID)}, 0).Name, "the next poll finds it")
	assert.Empty(t, rec.Events, "and warns no more: the duplicate was told when its Server was made")

	s = ensure(t, r, b, []bmc.SystemInfo{system("b-c", "")}, 0)
	assert.Equal(t, hashedServerName("a", system("b-c", "")), s.Name)
	assert.Equal(t, 4, serverCount(t, c))
	assert.Equal(t, s.Name, ensure(t, r, b, []bmc.SystemInfo{system("b-c", "")}, 0).Name, "stable")
}

// TestEnsureServerTakesOverTheServerOfADeletedBMC: a machine enrolled again under another BMC
// name, whose Server (named by its UUID) a deleted BMC left, gets that Server, not a second;
// a Server named by BMC and Id is not taken (its name says nothing of the machine).
func TestEnsureServerTakesOverTheServerOfADeletedBMC(t *testing.T) {
	b := &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	kept := serverOfBMC(goodUUID, "gone", "/redfish/v1/Systems/old", goodUUID)
	kept.Labels = map[string]string{m.LabelBMC: "gone", "rack": "r1"}
	r, c, rec := bmcReconcilerWith(kept, serverOfBMC("gone-2", "gone", "/redfish/v1/Systems/2", ""))
	s := ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID)}, 0)
	assert.Equal(t, goodUUID, s.Name, "the same Server")
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: goodUUID}, s))
	assert.Equal(t, "new", s.Spec.BMCRef.Name)
	assert.Equal(t, "/redfish/v1/Systems/1", s.Spec.SystemURI)
	assert.Equal(t, map[string]string{m.LabelBMC: "new", "rack": "r1"}, s.Labels)
	assert.Contains(t, <-rec.Events, "ServerTakenOver")
	assert.Equal(t, "new-2", ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID), system("2", "")}, 1).Name,
		"a system named by BMC and Id gets its own")
	assert.Equal(t, 3, serverCount(t, c))

	// The new BMC made a Server for the system while the old BMC was still there (it waits,
	// MachineHeldElsewhere): the kept one is not taken as well, which would give one BMC two
	// Servers of the machine, the waiting one no longer held back.
	r, c, _ = bmcReconcilerWith(serverOfBMC(goodUUID, "gone", "/redfish/v1/Systems/old", goodUUID), serverOfBMC("new-1", "new", "/redfish/v1/Systems/1", goodUUID))
	assert.Equal(t, "new-1", ensure(t, r, b, []bmc.SystemInfo{system("1", goodUUID)}, 0).Name)
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: goodUUID}, s))
	assert.Equal(t, "gone", s.Spec.BMCRef.Name, "not taken over")
}
