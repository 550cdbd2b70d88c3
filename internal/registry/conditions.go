package registry

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/ignition"
)

// The conditions of a Server that the probe's reports set. Each is set by one function here and
// nowhere else (test/layout TestEachConditionIsSetInOnePlace): the registry sets them from the
// reports it takes, and the Server reconciler calls the same functions where its lifecycle
// changes them (an install's boot clears the last probe's stage; a discovery makes its report
// the server's record; a person's retry accepts changed hardware).

// SetProbeCondition shows the stage the server's probe last reported (Booted, Collecting,
// Wiping, Installing, …; ignition's boot stages) with its message: True while it goes on,
// False once it Failed. An empty stage removes it: a new probe boot has not reported yet.
func SetProbeCondition(s *metalv1alpha1.Server, stage, message string) {
	if stage == "" {
		meta.RemoveStatusCondition(&s.Status.Conditions, metalv1alpha1.ConditionProbe)
		return
	}
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionProbe,
		status.BoolStatus(stage != string(ignition.StageFailed)), stage, message)
}

// SetHardwareRecord says how the server's record of its hardware (the disks and NICs its
// discovery's report listed, which a wipe is judged against) stands: True when it was
// recorded (HardwareRecorded) or a later report lists the same (HardwareMatches); False when a
// report lists other hardware, which a person must look at (HardwareChanged); Unknown when a
// person's retry accepted a change and the next discovery records what it finds
// (HardwareChangeAccepted).
func SetHardwareRecord(s *metalv1alpha1.Server, reason, message string) {
	st := metav1.ConditionTrue
	switch reason {
	case metalv1alpha1.ReasonHardwareChanged:
		st = metav1.ConditionFalse
	case metalv1alpha1.ReasonHardwareChangeAccepted:
		st = metav1.ConditionUnknown
	}
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionHardwareRecord, st, reason, message)
}
