package server

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/controller/status"
)

// The Server's conditions. Each is set by one function below and nowhere else (test/layout
// TestEachConditionIsSetInOnePlace), so what a condition means, and when it holds, is read in
// one place: a handler says what happened (a reason and a message for people), and the
// condition's function decides from that, or from the status it mirrors, whether it is True.
// The registry's conditions of a Server (Probe, HardwareRecord) are set by the registry's and
// internal/hwrecord's functions.

// setReady says whether the server is where it rests (Available, Reserved, Maintenance) with
// nothing failing: True there once a reconcile succeeded, with what holds it; False on the way
// somewhere, in Error, or when a reconcile failed, with what it waits for or what failed.
func setReady(s *metalv1alpha1.Server, failed bool, reason, message string) {
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionReady, status.BoolStatus(!failed && settled(s.Status.State)), reason, message)
}

// setPowered mirrors the last power request (status.powerDelivery) on the Powered condition:
// True once the BMC took it, or reports it; none without a request. unsent is the failed BMC
// call that left a request not sent yet, said in the message until it is sent.
func setPowered(s *metalv1alpha1.Server, unsent error) {
	d := s.Status.PowerDelivery
	if d == nil {
		meta.RemoveStatusCondition(&s.Status.Conditions, metalv1alpha1.ConditionPowered)
		return
	}
	message := poweredMessage(d)
	if unsent != nil && d.State == metalv1alpha1.PowerRequested {
		message = fmt.Sprintf("%s; the BMC call to send it failed (%v): retried with backoff", message, unsent)
	}
	status.SetCondition(&s.Status.Conditions, d.Generation, metalv1alpha1.ConditionPowered, poweredStatus(d), poweredReason(d), message)
}

// setDiscovered says whether the in-band probe's report was taken: True (ReportReceived), or
// False with why a discovery ended without one.
func setDiscovered(s *metalv1alpha1.Server, reason, message string) {
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionDiscovered,
		status.BoolStatus(reason == metalv1alpha1.ReasonReportReceived), reason, message)
}

// setProvisioned says whether the claim's image is on the server: True once it is installed
// and boots from the disk (Installed), or, for another boot operator, once its boot was
// handed to the server (ImageBooted); False while an install is on its way, waits or failed.
// An empty reason removes it: no claim's image is the server's concern now.
func setProvisioned(s *metalv1alpha1.Server, reason, message string) {
	if reason == "" {
		meta.RemoveStatusCondition(&s.Status.Conditions, metalv1alpha1.ConditionProvisioned)
		return
	}
	done := reason == metalv1alpha1.ReasonInstalled || reason == metalv1alpha1.ReasonImageBooted
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionProvisioned, status.BoolStatus(done), reason, message)
}

// setCleaned says whether the server's disks are known to hold no tenant's data: True once a
// wipe was verified against the server's record (WipeVerified); False from the moment a
// tenant's data may be on them (released, taken from its claim) until then, or when the wipe
// failed. False keeps the server out of the pool (dirty).
func setCleaned(s *metalv1alpha1.Server, reason, message string) {
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionCleaned,
		status.BoolStatus(reason == metalv1alpha1.ReasonWipeVerified), reason, message)
}

// setInMaintenance says which ServerMaintenance holds the server; none when none does.
func setInMaintenance(s *metalv1alpha1.Server, held *metalv1alpha1.ObjectReference) {
	if held == nil {
		meta.RemoveStatusCondition(&s.Status.Conditions, metalv1alpha1.ConditionInMaintenance)
		return
	}
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionInMaintenance, metav1.ConditionTrue, metalv1alpha1.ReasonMaintenanceStarted,
		fmt.Sprintf("held by %s/%s", held.Namespace, held.Name))
}

// setBootMode says whether the server's firmware boots in the mode spec.bootMode asks for
// (bootModeCondition). It is set at every reconcile from the server's own spec and status: it
// costs no API call, and it is written with whatever else the reconcile writes.
func setBootMode(s *metalv1alpha1.Server) {
	st, reason, message := bootModeCondition(s.Spec.BootMode, s.Status.BootMode, s.Status.BootModeSource)
	status.SetCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionBootMode, st, reason, message)
}

// bootModeCondition compares the mode spec.bootMode asks for (want) with the mode the firmware
// was found booting in (found, from source): Unknown while none was found; True when none is
// asked for (the mode found is taken) or the two agree; False, with what to change where, when
// they differ.
func bootModeCondition(want, found metalv1alpha1.BootMode, source string) (metav1.ConditionStatus, string, string) {
	switch {
	case found == "" && want == "":
		return metav1.ConditionUnknown, metalv1alpha1.ReasonBootModeUnknown,
			"the mode the firmware boots in is not known yet: neither its BMC nor a probe's report said"
	case found == "":
		return metav1.ConditionUnknown, metalv1alpha1.ReasonBootModeUnknown,
			fmt.Sprintf("spec.bootMode is %s; the mode the firmware boots in is not known yet: neither its BMC nor a probe's report said", want)
	case want == "":
		return metav1.ConditionTrue, metalv1alpha1.ReasonBootModeAsFound,
			fmt.Sprintf("found booting %s%s; spec.bootMode asks for no mode", found, fromSource(source))
	case want == found:
		return metav1.ConditionTrue, metalv1alpha1.ReasonBootModeMatches,
			fmt.Sprintf("found booting %s%s, as spec.bootMode asks", found, fromSource(source))
	}
	who := "the firmware was found booting"
	switch source {
	case metalv1alpha1.BootModeSourceProbe:
		who = "the probe found the firmware booting"
	case metalv1alpha1.BootModeSourceBMC:
		who = "the BMC says the firmware boots"
	}
	return metav1.ConditionFalse, metalv1alpha1.ReasonBootModeMismatch,
		fmt.Sprintf("spec.bootMode is %s, and %s %s: %s in the firmware setup (or through the BMC), or set spec.bootMode to %s",
			want, who, describeBootMode(found), bootModeChange(want, found), found)
}

// fromSource names where a mode was learned, for a message.
func fromSource(source string) string {
	switch source {
	case metalv1alpha1.BootModeSourceProbe:
		return " (from the probe's report)"
	case metalv1alpha1.BootModeSourceBMC:
		return " (from the BMC)"
	default:
		return ""
	}
}

// describeBootMode says a mode in words.
func describeBootMode(m metalv1alpha1.BootMode) string {
	switch m {
	case metalv1alpha1.BootModeUEFI:
		return "UEFI with Secure Boot off"
	case metalv1alpha1.BootModeUEFISecureBoot:
		return "UEFI with Secure Boot enforced"
	case metalv1alpha1.BootModeLegacy:
		return "the legacy BIOS way (Legacy)"
	default:
		return string(m)
	}
}

// bootModeChange says what to change in a firmware found booting found for it to boot want.
func bootModeChange(want, found metalv1alpha1.BootMode) string {
	switch {
	case want == metalv1alpha1.BootModeUEFISecureBoot && found == metalv1alpha1.BootModeUEFI:
		return "enable Secure Boot"
	case want == metalv1alpha1.BootModeUEFI && found == metalv1alpha1.BootModeUEFISecureBoot:
		return "disable Secure Boot"
	case want == metalv1alpha1.BootModeUEFISecureBoot:
		return "switch the firmware's boot mode from Legacy to UEFI and enable Secure Boot"
	case want == metalv1alpha1.BootModeUEFI:
		return "switch the firmware's boot mode from Legacy to UEFI"
	case want == metalv1alpha1.BootModeLegacy:
		return "switch the firmware's boot mode from UEFI to Legacy (CSM)"
	default:
		return "switch the firmware's boot mode to " + string(want)
	}
}
