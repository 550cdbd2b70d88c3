package firmware

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// TestReadDue: a read is due when the server's firmware was never read, a person asks, or the
// versions the polls show changed since the last read; a failed read waits out the retry.
func TestReadDue(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	r := &Reconciler{Retry: time.Minute, Now: func() time.Time { return now }}
	server := &metalv1alpha1.Server{Status: metalv1alpha1.ServerStatus{BIOSVersion: "2.1"}}
	b := &metalv1alpha1.BMC{Status: metalv1alpha1.BMCStatus{FirmwareVersion: "7.0"}}
	readAt := func(ago time.Duration, reason string, annotations map[string]string) *metalv1alpha1.ServerFirmware {
		at := metav1.NewTime(now.Add(-ago))
		sfw := &metalv1alpha1.ServerFirmware{ObjectMeta: metav1.ObjectMeta{Annotations: annotations},
			Status: metalv1alpha1.ServerFirmwareStatus{LastReadTime: &at, ReadBIOSVersion: "2.1", ReadBMCVersion: "7.0"}}
		sfw.Status.Conditions = []metav1.Condition{{Type: metalv1alpha1.ConditionFirmwareRead, Reason: reason}}
		return sfw
	}
	for _, tc := range []struct {
		name string
		sfw  *metalv1alpha1.ServerFirmware
		due  bool
		wait time.Duration
	}{
		{"never read", &metalv1alpha1.ServerFirmware{}, true, 0},
		{"read, nothing changed", readAt(time.Hour, metalv1alpha1.ReasonFirmwareRead, nil), false, 0},
		{"unsupported is not read again", readAt(time.Hour, metalv1alpha1.ReasonFirmwareManagementUnsupported, nil), false, 0},
		{"asked for", readAt(time.Second, metalv1alpha1.ReasonFirmwareRead, map[string]string{metalv1alpha1.AnnotationReadFirmware: ""}), true, 0},
		{"failed, retry not yet", readAt(20*time.Second, metalv1alpha1.ReasonFirmwareReadFailed, nil), false, 40 * time.Second},
		{"failed, retry due", readAt(time.Minute, metalv1alpha1.ReasonFirmwareReadFailed, nil), true, 0},
		{"failed, asked for", readAt(time.Second, metalv1alpha1.ReasonFirmwareReadFailed, map[string]string{metalv1alpha1.AnnotationReadFirmware: "now"}), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, wait := r.readDue(tc.sfw, server, b, nil)
			assert.Equal(t, tc.due, due)
			assert.Equal(t, tc.wait, wait)
		})
	}
	// Another version polled since the last read, of the BIOS or of the BMC.
	sfw := readAt(time.Second, metalv1alpha1.ReasonFirmwareRead, nil)
	due, _ := r.readDue(sfw, &metalv1alpha1.Server{Status: metalv1alpha1.ServerStatus{BIOSVersion: "2.2"}}, b, nil)
	assert.True(t, due, "a BIOS version the poll shows changed")
	due, _ = r.readDue(sfw, server, &metalv1alpha1.BMC{Status: metalv1alpha1.BMCStatus{FirmwareVersion: "7.1"}}, nil)
	assert.True(t, due, "a BMC version the poll shows changed")
	due, _ = r.readDue(sfw, server, b, []metalv1alpha1.ObservedBaseline{{Name: "fleet", Generation: 1}})
	assert.True(t, due, "a baseline selects it now")
	sfw.Status.ObservedBaselines = []metalv1alpha1.ObservedBaseline{{Name: "fleet", Generation: 1}}
	due, _ = r.readDue(sfw, server, b, []metalv1alpha1.ObservedBaseline{{Name: "fleet", Generation: 2}})
	assert.True(t, due, "its baseline changed")
	due, _ = r.readDue(sfw, server, b, []metalv1alpha1.ObservedBaseline{{Name: "fleet", Generation: 1}})
	assert.False(t, due, "judged by these baselines already")

	// A read that failed waits out its retry, whatever changed since, unless a person asks:
	// each failed read writes the ServerFirmware, which wakes the reconciler again.
	failed := readAt(10*time.Second, metalv1alpha1.ReasonFirmwareReadFailed, nil)
	due, wait := r.readDue(failed, &metalv1alpha1.Server{Status: metalv1alpha1.ServerStatus{BIOSVersion: "2.2"}}, b,
		[]metalv1alpha1.ObservedBaseline{{Name: "fleet", Generation: 3}})
	assert.False(t, due, "a failing BMC is not read in a loop")
	assert.Equal(t, 50*time.Second, wait)
}
