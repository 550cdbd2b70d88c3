package firmware

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// drifted is a ServerFirmware judged Drifted against bs, with diffs.
func drifted(bs []*m.FirmwareBaseline, diffs ...m.FirmwareDifference) *m.ServerFirmware {
	sfw := &m.ServerFirmware{}
	sfw.Status.ObservedBaselines, sfw.Status.Differences = observed(bs), diffs
	setCompliant(sfw, m.ReasonFirmwareDrifted, "drifted")
	return sfw
}

// TestAPlanIsOneBaselinesDifferences: the first baseline with differences is planned: one step
// per component (a pattern matching several members is one image), one per BIOS attribute; a
// BMC's firmware alone needs no host reset; nothing is planned from a read judged against
// other baselines, or while a want is invalid.
func TestAPlanIsOneBaselinesDifferences(t *testing.T) {
	a := baseline("a", map[string]string{"BMC": "2.0"}, nil)
	b := baseline("b", map[string]string{"BIOS": "3.0", "NIC.*": "9"}, map[string]string{"ProcVirtualization": "Disabled"})
	bs := []*m.FirmwareBaseline{a, b}
	diff := func(kind m.FirmwareDifferenceKind, name, want, have, baseline string) m.FirmwareDifference {
		return m.FirmwareDifference{Kind: kind, Name: name, Want: want, Have: have, Baseline: baseline}
	}
	sfw := drifted(bs,
		diff(m.FirmwareDifferenceComponent, "BIOS", "3.0", "2.0", "b"),
		diff(m.FirmwareDifferenceComponent, "NIC.*", "9", "7", "b"),
		diff(m.FirmwareDifferenceComponent, "NIC.*", "9", "8", "b"),
		diff(m.FirmwareDifferenceBIOSSetting, "ProcVirtualization", "Disabled", "Enabled", "b"))
	p := planFor(sfw, bs)
	require.NotNil(t, p)
	assert.Equal(t, "b", p.baseline.Name)
	assert.True(t, p.hostReset)
	assert.Equal(t, []m.FirmwareUpdateStep{
		{Kind: m.FirmwareDifferenceComponent, Name: "BIOS", From: "2.0", To: "3.0"},
		{Kind: m.FirmwareDifferenceComponent, Name: "NIC.*", From: "7, 8", To: "9"},
		{Kind: m.FirmwareDifferenceBIOSSetting, Name: "ProcVirtualization", From: "Enabled", To: "Disabled"},
	}, p.steps)

	sfw = drifted(bs, diff(m.FirmwareDifferenceComponent, "BMC", "2.0", "1.0", "a"), diff(m.FirmwareDifferenceComponent, "BIOS", "3.0", "2.0", "b"))
	p = planFor(sfw, bs)
	require.NotNil(t, p)
	assert.Equal(t, "a", p.baseline.Name, "one baseline at a time, by name")
	assert.False(t, p.hostReset, "a BMC's firmware alone: the host stays in service")

	b2 := *b
	b2.Generation = 2
	assert.Nil(t, planFor(sfw, []*m.FirmwareBaseline{a, &b2}), "judged against another generation: read first")
	sfw.Status.Conditions = nil
	setCompliant(sfw, m.ReasonInvalidSetting, "refused")
	assert.Nil(t, planFor(sfw, bs), "nothing is sent while a want is refused")
}

// TestMaxUnavailableIsAtLeastOne: a number as it is, a percentage of the matched servers rounded
// down, never 0.
func TestMaxUnavailableIsAtLeastOne(t *testing.T) {
	for _, tc := range []struct {
		v       *intstr.IntOrString
		matched int32
		want    int
	}{
		{nil, 20, 1},
		{ptrTo(intstr.FromInt32(3)), 20, 3},
		{ptrTo(intstr.FromString("20%")), 20, 4},
		{ptrTo(intstr.FromString("10%")), 5, 1},
		{ptrTo(intstr.FromString("100%")), 0, 1},
	} {
		b := &m.FirmwareBaseline{Spec: m.FirmwareBaselineSpec{Rollout: m.BaselineRollout{MaxUnavailable: tc.v}}, Status: m.FirmwareBaselineStatus{Matched: tc.matched}}
		got, err := maxUnavailable(b)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%v of %d", tc.v, tc.matched)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestWhoHoldsAPlace: an update under way or failed keeps its server out of service; a waiting
// one only when it is still in the maintenance it failed in.
func TestWhoHoldsAPlace(t *testing.T) {
	for state, want := range map[m.FirmwareUpdateState]bool{
		m.FirmwareUpdateWaiting: false, m.FirmwareUpdateEnteringMaintenance: true, m.FirmwareUpdateStaging: true,
		m.FirmwareUpdateInstalling: true, m.FirmwareUpdateRebooting: true, m.FirmwareUpdateVerifying: true,
		m.FirmwareUpdateFailed: true, m.FirmwareUpdateSucceeded: false, m.FirmwareUpdateWithdrawn: false,
	} {
		assert.Equal(t, want, holdsPlace(&m.FirmwareUpdate{State: state}), "%s", state)
	}
	assert.True(t, holdsPlace(&m.FirmwareUpdate{State: m.FirmwareUpdateWaiting, Maintenance: &m.ObjectReference{Name: "firmware-x"}}))
	assert.False(t, holdsPlace(nil))
}

// TestTheHostsBIOSVersionIsTheBMCs: equal, or one the other and more after a space.
func TestTheHostsBIOSVersionIsTheBMCs(t *testing.T) {
	assert.True(t, sameVersion("2.19.1", "2.19.1"))
	assert.True(t, sameVersion(" 1.13.2 ", "1.13.2"))
	assert.True(t, sameVersion("U46 v2.72 (03/21/2024)", "U46 v2.72"))
	assert.False(t, sameVersion("2.19.1", "2.19.10"))
	assert.False(t, sameVersion("", ""), "a host that says nothing does not agree")
}

// TestHostOfNamesNoPathOrToken: an image's URL in a message is its host alone.
func TestHostOfNamesNoPathOrToken(t *testing.T) {
	assert.Equal(t, "fw.example:8443", hostOf("https://fw.example:8443/t0ken/bios.bin?sig=x"))
	assert.Equal(t, "10.0.0.1", hostOf("http://10.0.0.1"))
}

// TestAStepIsDoneWhenTheReadSaysSo: a fresh read writes down what it found of each step being
// verified; a component is done when every member matching it runs the version, a setting
// when its value is the one sent (as the registry types it); nothing read is not done.
func TestAStepIsDoneWhenTheReadSaysSo(t *testing.T) {
	st := &m.ServerFirmwareStatus{BIOSVersion: "3.0", BMCVersion: "1.0",
		Components: []m.FirmwareComponent{{ID: "NIC.1", Version: "9"}, {ID: "NIC.2", Version: "8"}},
		BIOS:       &m.FirmwareSettings{Attributes: map[string]string{"ProcCoreDisable": "04", "ProcVirtualization": "Enabled"}},
		Update: &m.FirmwareUpdate{State: m.FirmwareUpdateVerifying, Steps: []m.FirmwareUpdateStep{
			{Kind: m.FirmwareDifferenceComponent, Name: "BIOS", To: "3.0"},
			{Kind: m.FirmwareDifferenceComponent, Name: "NIC.*", To: "9"},
			{Kind: m.FirmwareDifferenceBIOSSetting, Name: "ProcCoreDisable", To: "4"},
			{Kind: m.FirmwareDifferenceBIOSSetting, Name: "ProcVirtualization", To: "Disabled"},
		}}}
	assert.False(t, stepDone(st.Update.Steps[0]), "not read yet")
	readSteps(st)
	var done []bool
	for _, s := range st.Update.Steps {
		done = append(done, stepDone(s))
	}
	assert.Equal(t, []bool{true, false, true, false}, done)
	assert.Equal(t, "9, 8", *st.Update.Steps[1].Read)

	st.Update.State = m.FirmwareUpdateInstalling
	st.Update.Steps[0].Read = nil
	readSteps(st)
	assert.Nil(t, st.Update.Steps[0].Read, "only an update being verified is read into")
}
