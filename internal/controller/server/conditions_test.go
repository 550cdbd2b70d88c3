package server

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	m "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

func TestBootModeCondition(t *testing.T) {
	cases := []struct {
		name        string
		want, found m.BootMode
		source      string
		status      metav1.ConditionStatus
		reason      string
		message     string
	}{
		{"nothing known", "", "", "", metav1.ConditionUnknown, m.ReasonBootModeUnknown,
			"the mode the firmware boots in is not known yet: neither its BMC nor a probe's report said"},
		{"asked, not found yet", m.BootModeUEFISecureBoot, "", "", metav1.ConditionUnknown, m.ReasonBootModeUnknown,
			"spec.bootMode is UEFISecureBoot; the mode the firmware boots in is not known yet: neither its BMC nor a probe's report said"},
		{"none asked: as found", "", m.BootModeUEFI, m.BootModeSourceBMC, metav1.ConditionTrue, m.ReasonBootModeAsFound,
			"found booting UEFI (from the BMC); spec.bootMode asks for no mode"},
		{"as asked", m.BootModeUEFISecureBoot, m.BootModeUEFISecureBoot, m.BootModeSourceProbe, metav1.ConditionTrue, m.ReasonBootModeMatches,
			"found booting UEFISecureBoot (from the probe's report), as spec.bootMode asks"},
		{"Secure Boot off", m.BootModeUEFISecureBoot, m.BootModeUEFI, m.BootModeSourceProbe, metav1.ConditionFalse, m.ReasonBootModeMismatch,
			"spec.bootMode is UEFISecureBoot, and the probe found the firmware booting UEFI with Secure Boot off: enable Secure Boot in the firmware setup (or through the BMC), or set spec.bootMode to UEFI"},
		{"Secure Boot on", m.BootModeUEFI, m.BootModeUEFISecureBoot, m.BootModeSourceBMC, metav1.ConditionFalse, m.ReasonBootModeMismatch,
			"spec.bootMode is UEFI, and the BMC says the firmware boots UEFI with Secure Boot enforced: disable Secure Boot in the firmware setup (or through the BMC), or set spec.bootMode to UEFISecureBoot"},
		{"Legacy for Secure Boot", m.BootModeUEFISecureBoot, m.BootModeLegacy, m.BootModeSourceProbe, metav1.ConditionFalse, m.ReasonBootModeMismatch,
			"spec.bootMode is UEFISecureBoot, and the probe found the firmware booting the legacy BIOS way (Legacy): switch the firmware's boot mode from Legacy to UEFI and enable Secure Boot in the firmware setup (or through the BMC), or set spec.bootMode to Legacy"},
		{"Legacy for UEFI", m.BootModeUEFI, m.BootModeLegacy, m.BootModeSourceProbe, metav1.ConditionFalse, m.ReasonBootModeMismatch,
			"spec.bootMode is UEFI, and the probe found the firmware booting the legacy BIOS way (Legacy): switch the firmware's boot mode from Legacy to UEFI in the firmware setup (or through the BMC), or set spec.bootMode to Legacy"},
		{"UEFI for Legacy", m.BootModeLegacy, m.BootModeUEFISecureBoot, m.BootModeSourceProbe, metav1.ConditionFalse, m.ReasonBootModeMismatch,
			"spec.bootMode is Legacy, and the probe found the firmware booting UEFI with Secure Boot enforced: switch the firmware's boot mode from UEFI to Legacy (CSM) in the firmware setup (or through the BMC), or set spec.bootMode to UEFISecureBoot"},
	}
	for _, c := range cases {
		status, reason, message := bootModeCondition(c.want, c.found, c.source)
		assert.Equal(t, c.status, status, c.name)
		assert.Equal(t, c.reason, reason, c.name)
		assert.Equal(t, c.message, message, c.name)
	}
}

// setBootMode reads only the server it is given, and a brief wait does not write for it alone.
func TestSetBootModeFromTheServerItself(t *testing.T) {
	s := &m.Server{ObjectMeta: metav1.ObjectMeta{Generation: 3},
		Spec:   m.ServerSpec{BootMode: m.BootModeUEFISecureBoot},
		Status: m.ServerStatus{BootMode: m.BootModeUEFI, BootModeSource: m.BootModeSourceProbe}}
	before := s.Status.DeepCopy()
	setBootMode(s)
	c := apimeta.FindStatusCondition(s.Status.Conditions, m.ConditionBootMode)
	require.NotNil(t, c)
	assert.Equal(t, metav1.ConditionFalse, c.Status)
	assert.Equal(t, m.ReasonBootModeMismatch, c.Reason)
	assert.EqualValues(t, 3, c.ObservedGeneration)
	assert.True(t, onlyWaiting(before, &s.Status), "the BootMode condition alone is no reason for a brief wait to write")
}
