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
	firstRead := sfw.Status.LastReadTime
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
	// One read at enrollment: it waits for the lifecycle to take the server in, by when its
	// BMC has written the BIOS version the read is compared with (a read before that would be
	// made again as soon as the version showed).
	require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: name}, sfw))
	assert.Equal(t, firstRead, sfw.Status.LastReadTime, "not read twice")

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

// firmwareUpdate is the ServerFirmware of name once its update holds cond.
func firmwareUpdate(t *testing.T, name string, cond func(*m.FirmwareUpdate) bool) *m.ServerFirmware {
	t.Helper()
	var sfw m.ServerFirmware
	if !assert.Eventually(t, func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Name: name}, &sfw) == nil && sfw.Status.Update != nil && cond(sfw.Status.Update)
	}, 60*time.Second, 50*time.Millisecond, "ServerFirmware %s's update", name) {
		t.Logf("last seen: update %+v, conditions %+v", sfw.Status.Update, sfw.Status.Conditions)
		t.FailNow()
	}
	return &sfw
}

// baselineAt is the FirmwareBaseline name once cond holds of it.
func baselineAt(t *testing.T, name string, cond func(*m.FirmwareBaseline) bool, what string) *m.FirmwareBaseline {
	t.Helper()
	var b m.FirmwareBaseline
	eventually(t, 30*time.Second, func() bool {
		return k8s.Get(context.Background(), client.ObjectKey{Name: name}, &b) == nil && b.Status.ObservedGeneration == b.Generation && cond(&b)
	}, "baseline %s: %s", name, what)
	return &b
}

func conditionOf(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{}
}

// TestABaselineJudgesTheServersItSelects: a FirmwareBaseline selecting a server by label is
// compared with what its BMC reports: compliant, then drifted when it wants another BIOS
// version (the difference named), refused before anything is sent when it asks for an
// attribute the BMC's registry does not define or a value out of range (named on the
// baseline), and in conflict with a second baseline that wants another version (both say so,
// and the server is judged by neither).
func TestABaselineJudgesTheServersItSelects(t *testing.T) {
	ctx := context.Background()
	sim := sims["baseline"]
	spec := testSystem(38)
	name := strings.ToLower(spec.UUID)
	createSecret(t, "baseline", goodUser, goodPassword)
	createDirectBMC(t, "baseline", simAddress(sim), "baseline")
	firmwareRead(t, name, m.ReasonFirmwareRead, nil)

	selector := metav1.LabelSelector{MatchLabels: map[string]string{m.LabelBMC: "baseline"}}
	fleet := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: selector,
		Components:     []m.BaselineComponent{{Component: "BIOS", Version: spec.BIOSVersion, Image: m.FirmwareImage{URL: "https://fw.example/bios.bin"}}},
		Settings:       &m.BaselineSettings{BIOS: map[string]string{"ProcVirtualization": "Enabled", "ProcCoreDisable": "0"}},
		// Judged only: the rollout is TestARolloutNeverExceedsMaxUnavailable's.
		Rollout: m.BaselineRollout{Paused: true},
	}}
	require.NoError(t, k8s.Create(ctx, fleet))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), fleet) })

	sfw := firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonFirmwareCompliant
	})
	assert.Equal(t, "fleet", sfw.Status.Baseline)
	assert.Empty(t, sfw.Status.Differences)
	b := baselineAt(t, "fleet", func(b *m.FirmwareBaseline) bool { return b.Status.Compliant == 1 }, "one compliant server")
	assert.Equal(t, int32(1), b.Status.Matched)
	assert.Equal(t, metav1.ConditionTrue, conditionOf(b.Status.Conditions, m.ConditionBaselineValid).Status)

	// Another BIOS version wanted: drifted, the difference named.
	update := func(mutate func(*m.FirmwareBaseline)) {
		t.Helper()
		var cur m.FirmwareBaseline
		require.NoError(t, k8s.Get(ctx, client.ObjectKey{Name: "fleet"}, &cur))
		mutate(&cur)
		require.NoError(t, k8s.Update(ctx, &cur))
	}
	update(func(b *m.FirmwareBaseline) { b.Spec.Components[0].Version = "9.9.9" })
	sfw = firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonFirmwareDrifted
	})
	assert.Equal(t, []m.FirmwareDifference{{Kind: m.FirmwareDifferenceComponent, Name: "BIOS", Want: "9.9.9", Have: spec.BIOSVersion, Baseline: "fleet"}}, sfw.Status.Differences)
	baselineAt(t, "fleet", func(b *m.FirmwareBaseline) bool {
		return b.Status.Matched == 1 && b.Status.Compliant == 0 && b.Status.Rollout == m.RolloutPaused
	}, "none compliant, the rollout paused")
	// Paused: the server waits, untouched.
	sfw = firmwareUpdate(t, name, func(u *m.FirmwareUpdate) bool { return u.Reason == m.ReasonRolloutPaused })
	assert.Equal(t, m.FirmwareUpdateWaiting, sfw.Status.Update.State)
	assert.Nil(t, sfw.Status.Update.Maintenance)

	// An attribute the registry does not define and a value out of its range: refused, named.
	update(func(b *m.FirmwareBaseline) {
		b.Spec.Components[0].Version = spec.BIOSVersion
		b.Spec.Settings.BIOS = map[string]string{"NoSuchSetting": "On", "ProcCoreDisable": "99"}
	})
	sfw = firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonInvalidSetting
	})
	b = baselineAt(t, "fleet", func(b *m.FirmwareBaseline) bool {
		return conditionOf(b.Status.Conditions, m.ConditionBaselineValid).Reason == m.ReasonInvalidSetting
	}, "its settings refused")
	valid := conditionOf(b.Status.Conditions, m.ConditionBaselineValid)
	assert.Equal(t, metav1.ConditionFalse, valid.Status)
	assert.Contains(t, valid.Message, "defines no attribute NoSuchSetting")
	assert.Contains(t, valid.Message, "ProcCoreDisable must be within 0..63, not 99")
	assert.Contains(t, valid.Message, "server "+name)
	// Nothing is sent while a setting is refused: the waiting update is withdrawn, and the BMC
	// never saw an update or a settings write.
	sfw = firmwareUpdate(t, name, func(u *m.FirmwareUpdate) bool { return u.State == m.FirmwareUpdateWithdrawn })
	assert.Equal(t, m.ReasonUpdateWithdrawn, sfw.Status.Update.Reason)
	assert.Zero(t, sim.Stats().Updates, "no update sent to the BMC")
	assert.Zero(t, sim.Stats().BIOSPatches, "no settings sent to the BMC")

	// A second baseline wanting another BIOS version of the same server: both say so.
	update(func(b *m.FirmwareBaseline) { b.Spec.Settings.BIOS = map[string]string{"ProcVirtualization": "Enabled"} })
	rival := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: "rival"}, Spec: m.FirmwareBaselineSpec{
		ServerSelector: selector,
		Components:     []m.BaselineComponent{{Component: "BIOS", Version: "3.0.0", Image: m.FirmwareImage{URL: "https://fw.example/bios3.bin"}}},
		Rollout:        m.BaselineRollout{Paused: true},
	}}
	require.NoError(t, k8s.Create(ctx, rival))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rival) })
	sfw = firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonConflictingBaselines
	})
	assert.Equal(t, "fleet,rival", sfw.Status.Baseline)
	assert.Contains(t, conditionOf(sfw.Status.Conditions, m.ConditionFirmwareCompliant).Message, `component BIOS: fleet wants "`+spec.BIOSVersion+`", rival wants "3.0.0"`)
	for _, n := range []string{"fleet", "rival"} {
		b := baselineAt(t, n, func(b *m.FirmwareBaseline) bool { return b.Status.Conflicting == 1 }, "its server conflicting")
		assert.Equal(t, metav1.ConditionTrue, conditionOf(b.Status.Conditions, m.ConditionBaselineConflict).Status)
		assert.Equal(t, int32(0), b.Status.Compliant)
	}

	// The rival gone, the server is compliant with the first again.
	require.NoError(t, k8s.Delete(ctx, rival))
	firmwareRead(t, name, m.ReasonFirmwareRead, func(f *m.ServerFirmware) bool {
		return f.Status.Baseline == "fleet" && conditionOf(f.Status.Conditions, m.ConditionFirmwareCompliant).Reason == m.ReasonFirmwareCompliant
	})
	baselineAt(t, "fleet", func(b *m.FirmwareBaseline) bool { return b.Status.Compliant == 1 && b.Status.Conflicting == 0 }, "compliant again")

	require.NoError(t, k8s.Delete(ctx, &m.BMC{ObjectMeta: metav1.ObjectMeta{Name: "baseline"}}))
}
