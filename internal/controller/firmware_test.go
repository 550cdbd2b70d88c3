package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/test/bmcsim"
)

// firmwareRead is the ServerFirmware of name once its Read condition has reason, as the API has
// it (the manager's cache keeps it without its findings).
func firmwareRead(t *testing.T, name, reason string, also func(*m.ServerFirmware) bool) *m.ServerFirmware {
	t.Helper()
	var sfw m.ServerFirmware
	eventually(t, 30*time.Second, func() bool {
		if k8s.Get(context.Background(), client.ObjectKey{Name: name}, &sfw) != nil {
			return false
		}
		c := meta.FindStatusCondition(sfw.Status.Conditions, m.ConditionFirmwareRead)
		return c != nil && c.Reason == reason && (also == nil || also(&sfw))
	}, "ServerFirmware %s is read: %s", name, reason)
	return &sfw
}

// askForRead sets the read-firmware annotation on a ServerFirmware, as a person would.
func askForRead(t *testing.T, name string) {
	t.Helper()
	var sfw m.ServerFirmware
	require.NoError(t, k8s.Get(context.Background(), client.ObjectKey{Name: name}, &sfw))
	patch := client.MergeFrom(sfw.DeepCopy())
	metav1.SetMetaDataAnnotation(&sfw.ObjectMeta, m.AnnotationReadFirmware, "now")
	require.NoError(t, k8s.Patch(context.Background(), &sfw, patch))
}

// TestEveryServerGetsItsFirmwareReadFromItsBMC: a Server of a Redfish BMC gets a ServerFirmware
// of its name, owned by it, with the BMC's firmware inventory classified and its BIOS settings
// with their registry. A person's read request reads the BMC again (a BIOS updated meanwhile
// shows) and is removed. A read that fails says so and keeps what the last good read found;
// a ServerFirmware deleted is made again.
func TestEveryServerGetsItsFirmwareReadFromItsBMC(t *testing.T) {
	ctx := context.Background()
	sim := sims["firmware"]
	spec := testSystem(37)
	name := strings.ToLower(spec.UUID)
	createSecret(t, "firmware", goodUser, goodPassword)
	createDirectBMC(t, "firmware", simAddress(sim), "firmware")

	sfw := firmwareRead(t, name, m.ReasonFirmwareRead, nil)
	var server m.Server
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, &server))
	assert.True(t, metav1.IsControlledBy(sfw, &server), "owned by its Server, which it goes with")
	assert.Equal(t, name, sfw.Spec.ServerRef.Name)
	assert.Equal(t, spec.BIOSVersion, sfw.Status.BIOSVersion)
	assert.Equal(t, "1.2.3", sfw.Status.BMCVersion, "the BMC's own firmware")
	assert.Equal(t, spec.BIOSVersion, sfw.Status.ReadBIOSVersion)
	classes := map[m.FirmwareComponentClass]int{}
	for _, c := range sfw.Status.Components {
		classes[c.Class]++
		assert.NotEmpty(t, c.Version, "component %s", c.ID)
	}
	assert.Equal(t, map[m.FirmwareComponentClass]int{m.FirmwareComponentBIOS: 1, m.FirmwareComponentBMC: 1, m.FirmwareComponentOther: 1}, classes,
		"the BIOS, the BMC and the NIC: %+v", sfw.Status.Components)
	require.NotNil(t, sfw.Status.BIOS)
	assert.NotEmpty(t, sfw.Status.BIOS.Registry)
	assert.Contains(t, sfw.Status.BIOS.Attributes, "ProcVirtualization")
	assert.Contains(t, meta.FindStatusCondition(sfw.Status.Conditions, m.ConditionFirmwareRead).Message, "3 firmware components")
	firstRead := sfw.Status.LastReadTime

	// A BIOS update (the simulator's model, as an update will change it) shows at the read a
	// person asks for.
	sim.SetBIOSVersion(sim.SystemIDs()[0], "2.2.0")
	askForRead(t, name)
	sfw = firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return f.Status.BIOSVersion == "2.2.0" && f.Annotations[m.AnnotationReadFirmware] == ""
	})
	assert.True(t, sfw.Status.LastReadTime.After(firstRead.Time) || sfw.Status.LastReadTime.Equal(firstRead), "read again")
	assert.NotContains(t, sfw.Annotations, m.AnnotationReadFirmware, "the request is removed once answered")

	// A BMC that fails every request: the read fails, says so, and what was found stays.
	sim.SetFaults(bmcsim.Faults{ErrorRate: 1})
	askForRead(t, name)
	sfw = firmwareRead(t, name, m.ReasonFirmwareReadFailed, nil)
	sim.SetFaults(bmcsim.Faults{})
	assert.Equal(t, "2.2.0", sfw.Status.BIOSVersion, "the last good read's findings stay")
	assert.Len(t, sfw.Status.Components, 3)
	require.NotNil(t, sfw.Status.BIOS)
	assert.Contains(t, sfw.Status.BIOS.Attributes, "ProcVirtualization")

	// Deleted, it is made again, and read.
	require.NoError(t, k8s.Delete(ctx, sfw))
	eventually(t, 30*time.Second, func() bool {
		var again m.ServerFirmware
		return k8s.Get(ctx, client.ObjectKey{Name: name}, &again) == nil && again.UID != sfw.UID
	}, "the ServerFirmware is made again")
	firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool { return f.Status.BIOSVersion == "2.2.0" })

	require.NoError(t, k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "firmware"}}))
}
