package firmware

import (
	"testing"

	"k8s.io/utils/ptr"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

func baseline(name string, components map[string]string, bios map[string]string) *m.FirmwareBaseline {
	b := &m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	for c, v := range components {
		b.Spec.Components = append(b.Spec.Components, m.BaselineComponent{Component: c, Version: v, Image: m.FirmwareImage{URL: "https://fw.example/" + c}})
	}
	if bios != nil {
		b.Spec.Settings = &m.BaselineSettings{BIOS: bios}
	}
	return b
}

var registry = &bmc.SettingsRegistry{Name: "BiosAttributeRegistry", Attributes: map[string]bmc.AttributeDefinition{
	"ProcVirtualization": {Name: "ProcVirtualization", Type: bmc.AttributeEnumeration, AllowedValues: []string{"Enabled", "Disabled"}},
	"ProcCoreDisable":    {Name: "ProcCoreDisable", Type: bmc.AttributeInteger, LowerBound: ptr.To[int64](0), UpperBound: ptr.To[int64](63)},
	"AssetTag":           {Name: "AssetTag", Type: bmc.AttributeString, MaxLength: ptr.To[int64](8), ValueExpression: "[A-Z0-9-]*"},
	"SystemBiosVersion":  {Name: "SystemBiosVersion", Type: bmc.AttributeString, ReadOnly: true},
	"SetupPassword":      {Name: "SetupPassword", Type: bmc.AttributePassword},
	"Turbo":              {Name: "Turbo", Type: bmc.AttributeBoolean},
}}

// TestValidateRefusesWhatTheRegistryDoesNotAllow: each refusal names the attribute and why.
func TestValidateRefusesWhatTheRegistryDoesNotAllow(t *testing.T) {
	for _, tc := range []struct{ name, value, err string }{
		{"ProcVirtualization", "Enabled", ""},
		{"ProcVirtualization", "On", `ProcVirtualization allows Enabled, Disabled, not "On"`},
		{"ProcCoreDisable", "4", ""},
		{"ProcCoreDisable", "64", "ProcCoreDisable must be within 0..63, not 64"},
		{"ProcCoreDisable", "four", `ProcCoreDisable is an integer, not "four"`},
		{"AssetTag", "RACK-12", ""},
		{"AssetTag", "RACK-1234", "AssetTag must be at most 8 characters long, not 9"},
		{"AssetTag", "rack", `AssetTag must match [A-Z0-9-]*, not "rack"`},
		{"Turbo", "TRUE", ""},
		{"Turbo", "yes", `Turbo is true or false, not "yes"`},
		{"SystemBiosVersion", "1", "SystemBiosVersion is read-only"},
		{"SetupPassword", "x", "SetupPassword is a password: baselines do not set credentials"},
		{"NoSuchThing", "x", "registry BiosAttributeRegistry defines no attribute NoSuchThing"},
	} {
		err := validate(registry, tc.name, tc.value)
		if tc.err == "" {
			assert.NoError(t, err, "%s=%s", tc.name, tc.value)
		} else {
			assert.EqualError(t, err, tc.err)
		}
	}
}

// TestTwoBaselinesThatWantOtherwiseConflict: the same want twice is no conflict; another
// version or value is, naming both baselines.
func TestTwoBaselinesThatWantOtherwiseConflict(t *testing.T) {
	a := baseline("a", map[string]string{"BIOS": "2.0"}, map[string]string{"ProcVirtualization": "Enabled"})
	same := baseline("b", map[string]string{"BIOS": "2.0"}, nil)
	_, conflicts := merge([]*m.FirmwareBaseline{a, same})
	assert.Empty(t, conflicts)
	other := baseline("c", map[string]string{"BMC": "7"}, map[string]string{"ProcVirtualization": "Disabled"})
	w, conflicts := merge([]*m.FirmwareBaseline{a, other})
	assert.Equal(t, []string{`BIOS setting ProcVirtualization: a wants "Enabled", c wants "Disabled"`}, conflicts)
	assert.Equal(t, want{value: "7", baseline: "c"}, w.components["BMC"], "what does not conflict is merged")
	reason, msg := judge([]*m.FirmwareBaseline{a, other}, w, conflicts, nil)
	assert.Equal(t, m.ReasonConflictingBaselines, reason)
	assert.Contains(t, msg, "not touched")
}

// TestDifferences: versions by class, id and id pattern; settings compared as their types are;
// a want the registry refuses is a difference with the reason, even when the value matches.
func TestDifferences(t *testing.T) {
	st := &m.ServerFirmwareStatus{BIOSVersion: "2.1", BMCVersion: "7.0",
		Components: []m.FirmwareComponent{
			{ID: "Installed-159-2.1__BIOS.Setup.1-1", Class: m.FirmwareComponentBIOS, Version: "2.1"},
			{ID: "Installed-101-22.5__NIC.Integrated.1-1-1", Class: m.FirmwareComponentOther, Version: "22.5"},
			{ID: "Installed-101-22.0__NIC.Integrated.1-2-1", Class: m.FirmwareComponentOther, Version: "22.0"},
		},
		BIOS: &m.FirmwareSettings{Attributes: map[string]string{"ProcVirtualization": "Enabled", "ProcCoreDisable": "0", "Turbo": "true"}}}
	b := baseline("fleet", map[string]string{"BIOS": "2.1", "BMC": "7.1", "Installed-*__NIC.Integrated.1-*": "22.5", "Installed-*__RAID.*": "51.0"},
		map[string]string{"ProcVirtualization": "Enabled", "ProcCoreDisable": "00", "Turbo": "TRUE", "SystemBiosVersion": "2.1"})
	w, conflicts := merge([]*m.FirmwareBaseline{b})
	require.Empty(t, conflicts)
	diffs := differences(w, st, registry, nil)
	var got []string
	for _, d := range diffs {
		got = append(got, string(d.Kind)+" "+d.Name+" "+d.Have+"→"+d.Want+" "+d.Invalid)
	}
	assert.Equal(t, []string{
		"Component BMC 7.0→7.1 ",
		"Component Installed-*__NIC.Integrated.1-* 22.0→22.5 ",
		"Component Installed-*__RAID.* →51.0 ",
		"BIOSSetting SystemBiosVersion →2.1 SystemBiosVersion is read-only",
	}, got, "a NIC port behind, a controller missing; 00 is 0 and TRUE is true")
	reason, msg := judge([]*m.FirmwareBaseline{b}, w, nil, diffs)
	assert.Equal(t, m.ReasonInvalidSetting, reason, "an invalid want is said first")
	assert.Contains(t, msg, "SystemBiosVersion (baseline fleet): SystemBiosVersion is read-only")

	reason, msg = judge([]*m.FirmwareBaseline{b}, w, nil, diffs[:3])
	assert.Equal(t, m.ReasonFirmwareDrifted, reason)
	assert.Contains(t, msg, `component BMC is "7.0", baseline fleet wants "7.1"`)

	compliant := baseline("fleet", map[string]string{"BIOS": "2.1"}, map[string]string{"ProcVirtualization": "Enabled"})
	w, _ = merge([]*m.FirmwareBaseline{compliant})
	diffs = differences(w, st, registry, nil)
	assert.Empty(t, diffs)
	reason, _ = judge([]*m.FirmwareBaseline{compliant}, w, nil, diffs)
	assert.Equal(t, m.ReasonFirmwareCompliant, reason)
	reason, _ = judge(nil, wants{}, nil, nil)
	assert.Equal(t, m.ReasonNoBaseline, reason)

	// Without a registry, values are compared but cannot be checked.
	diffs = differences(w, &m.ServerFirmwareStatus{BIOSVersion: "2.1", BIOS: &m.FirmwareSettings{Attributes: map[string]string{"ProcVirtualization": "Disabled"}}}, nil, nil)
	require.Len(t, diffs, 1)
	assert.Empty(t, diffs[0].Invalid)
	// Without BIOS settings at all, a settings want cannot be sent.
	diffs = differences(w, &m.ServerFirmwareStatus{BIOSVersion: "2.1"}, nil, nil)
	require.Len(t, diffs, 1)
	assert.Equal(t, "the BMC exposes no BIOS settings", diffs[0].Invalid)

	// The BMC's own settings, judged against the BMC's registry, after the BIOS's.
	bmcRegistry := &bmc.SettingsRegistry{Name: "ManagerAttributeRegistry.v1_0_0", Attributes: map[string]bmc.AttributeDefinition{
		"IPMILan.1.Enable":    {Name: "IPMILan.1.Enable", Type: bmc.AttributeEnumeration, AllowedValues: []string{"Enabled", "Disabled"}},
		"WebServer.1.Timeout": {Name: "WebServer.1.Timeout", Type: bmc.AttributeInteger, LowerBound: ptr.To[int64](60)},
	}}
	w = wants{components: map[string]want{}, bios: map[string]want{}, bmc: map[string]want{
		"IPMILan.1.Enable": {value: "Disabled", baseline: "fleet"}, "WebServer.1.Timeout": {value: "30", baseline: "fleet"}}}
	dell := &m.ServerFirmwareStatus{BMC: &m.FirmwareSettings{Attributes: map[string]string{"IPMILan.1.Enable": "Enabled", "WebServer.1.Timeout": "1800"}}}
	got = nil
	for _, d := range differences(w, dell, nil, bmcRegistry) {
		got = append(got, string(d.Kind)+" "+d.Name+" "+d.Have+"→"+d.Want+" "+d.Invalid)
	}
	assert.Equal(t, []string{
		"BMCSetting IPMILan.1.Enable Enabled→Disabled ",
		"BMCSetting WebServer.1.Timeout 1800→30 WebServer.1.Timeout must be at least 60, not 30",
	}, got)
	diffs = differences(w, &m.ServerFirmwareStatus{}, nil, nil)
	require.Len(t, diffs, 2)
	assert.Contains(t, diffs[0].Invalid, "the BMC exposes no settings of its own")
}

// TestSelecting: by label selector, sorted by name, deleted baselines left out.
func TestSelecting(t *testing.T) {
	server := &m.Server{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"rack": "r1"}}}
	mk := func(name string, sel map[string]string) m.FirmwareBaseline {
		return m.FirmwareBaseline{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: m.FirmwareBaselineSpec{ServerSelector: metav1.LabelSelector{MatchLabels: sel}}}
	}
	gone := mk("gone", nil)
	now := metav1.Now()
	gone.DeletionTimestamp = &now
	got := selecting([]m.FirmwareBaseline{mk("z-all", nil), mk("r2", map[string]string{"rack": "r2"}), mk("a-r1", map[string]string{"rack": "r1"}), gone}, server)
	assert.Equal(t, "a-r1,z-all", names(got))
}
