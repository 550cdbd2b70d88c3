package controller

import (
	"context"
	"errors"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Reasons of the Powered condition: a power request is recorded before it is sent, and marked
// sent once the BMC took it.
const (
	ReasonPowerOnRequested  = "PowerOnRequested"
	ReasonPowerOffRequested = "PowerOffRequested"
	ReasonPowerOnSent       = "PowerOnSent"
	ReasonPowerOffSent      = "PowerOffSent"
)

// Power requests of a server at rest (Available, Reserved, Maintenance) are delivered at least
// once. The step that asks records the request in its status write (Powered=False,
// Power<X>Requested); the BMC call runs after that write, and marks the request sent
// (Powered=True, Power<X>Sent) once the BMC took it. A manager that dies in between leaves a
// request marked unsent, and the state's handler sends it again. A request that was sent is
// not repeated: a power change made outside Ironfleet afterwards stands.

func requestedReason(want metalv1alpha1.Power) string {
	if want == metalv1alpha1.PowerOff {
		return ReasonPowerOffRequested
	}
	return ReasonPowerOnRequested
}

func sentReason(want metalv1alpha1.Power) string {
	if want == metalv1alpha1.PowerOff {
		return ReasonPowerOffSent
	}
	return ReasonPowerOnSent
}

// requestPower records a power request, not sent yet, in status.
func requestPower(s *metalv1alpha1.Server, want metalv1alpha1.Power, message string) {
	setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionPowered, metav1.ConditionFalse, requestedReason(want), message)
}

// sendPower is the BMC call that delivers a power request, and marks it sent once it has been.
// It does not read the power state first: some BMCs report the previous state for a while after
// a change (a server the probe just powered on still reads Off), and the request would be lost.
func sendPower(uri string, want metalv1alpha1.Power, message string) effect {
	eff := setPower(uri, powerAction(want))
	eff.done = func(s *metalv1alpha1.Server) {
		setCondition(&s.Status.Conditions, s.Generation, metalv1alpha1.ConditionPowered, metav1.ConditionTrue, sentReason(want), message)
	}
	return eff
}

// powerStep asks for a power state: recorded with the step's status write, sent after it.
func powerStep(server *metalv1alpha1.Server, want metalv1alpha1.Power, message string) step {
	return step{effect: sendPower(server.Spec.SystemURI, want, message), apply: func(s *metalv1alpha1.Server) { requestPower(s, want, message) }}
}

// unsentPower is the power a server was asked for that may never have reached its BMC.
func unsentPower(server *metalv1alpha1.Server) (want metalv1alpha1.Power, message string, ok bool) {
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionPowered)
	if c == nil || c.Status != metav1.ConditionFalse {
		return "", "", false
	}
	switch c.Reason {
	case ReasonPowerOnRequested:
		return metalv1alpha1.PowerOn, c.Message, true
	case ReasonPowerOffRequested:
		return metalv1alpha1.PowerOff, c.Message, true
	}
	return "", "", false
}

// resendPower sends again a power request that may never have reached the BMC; nothing when
// there is none.
func resendPower(server *metalv1alpha1.Server) step {
	want, message, ok := unsentPower(server)
	if !ok {
		return step{}
	}
	return step{effect: sendPower(server.Spec.SystemURI, want, message)}
}

// bootDisk points the server's boots at its disk: for good (BootSourceOverrideEnabled
// Continuous) where the BMC allows it; for the next boot only (persistent false) on a BMC that
// offers one-time overrides alone (Supermicro's). Either way the next boot is the disk.
func bootDisk(ctx context.Context, c bmc.Client, uri string) (persistent bool, err error) {
	err = c.SetBootPersistent(ctx, uri, bmc.BootDisk)
	if !errors.Is(err, bmc.ErrUnsupported) {
		return err == nil, err
	}
	return false, c.SetBootOnce(ctx, uri, bmc.BootDisk)
}

// bootOnceOnlyNote ends the Provisioned message of an installed server whose BMC allows only
// one-time boot overrides.
const bootOnceOnlyNote = " (when Ironfleet powers it on: its BMC allows only one-time boot overrides, so a power-on outside Ironfleet follows the firmware's boot order)"

// fromDisk makes a power effect boot the disk: the boot override is set (bootDisk) before the
// power action, and once both are done the Provisioned condition says whether the disk boot
// holds for every power-on or only for Ironfleet's.
func fromDisk(eff effect, uri string) effect {
	run, done := eff.run, eff.done
	persistent := true // what this effect's bootDisk found, for its done
	eff.run = func(ctx context.Context, c bmc.Client) error {
		var err error
		if persistent, err = bootDisk(ctx, c, uri); err != nil {
			return err
		}
		return run(ctx, c)
	}
	eff.done = func(s *metalv1alpha1.Server) {
		if done != nil {
			done(s)
		}
		c := meta.FindStatusCondition(s.Status.Conditions, metalv1alpha1.ConditionProvisioned)
		if c == nil || c.Status != metav1.ConditionTrue {
			return
		}
		c.Message = strings.TrimSuffix(c.Message, bootOnceOnlyNote)
		if !persistent {
			c.Message += bootOnceOnlyNote
		}
	}
	return eff
}

func powerAction(p metalv1alpha1.Power) bmc.PowerAction {
	if p == metalv1alpha1.PowerOff {
		return bmc.PowerOff
	}
	return bmc.PowerOn
}
