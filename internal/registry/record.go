package registry

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/hwrecord"
)

// recordReport writes a report's inventory into the server's status, or, where the server's
// record of its hardware stands (takesInventory), compares it with that record and says what
// it found in the HardwareRecord condition; it returns the differences found. A report cannot
// rewrite what a server is: outside a discovery, the disks a wipe is judged against and the
// MACs later boots are answered for stay those its discovery recorded.
func recordReport(server *metalv1alpha1.Server, inv *metalv1alpha1.Inventory, received metav1.Time) []string {
	recordBootMode(server, inv.BootMode)
	record := server.Status.Inventory
	if record == nil || record.Source != metalv1alpha1.InventorySourceProbe {
		replaceInventory(server, inv)
		return nil
	}
	diffs := hwrecord.Diff(record, inv)
	if takesInventory(server, diffs) {
		replaceInventory(server, inv)
	}
	cond := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionHardwareRecord)
	switch {
	case len(diffs) == 0:
		if cond == nil || cond.Status != metav1.ConditionTrue {
			SetHardwareRecord(server, metalv1alpha1.ReasonHardwareMatches,
				fmt.Sprintf("the probe's report of %s lists the recorded disks and NICs", received.UTC().Format(time.RFC3339)))
		}
	case !takesInventory(server, diffs):
		SetHardwareRecord(server, metalv1alpha1.ReasonHardwareChanged,
			fmt.Sprintf("the probe's report of %s lists other hardware than the server's record (its discovery's), which stands: %s",
				received.UTC().Format(time.RFC3339), hwrecord.Summary(diffs)))
	}
	return diffs
}

// recordBootMode takes the boot mode a report read from the firmware's own variables as the
// server's, whatever its BMC said: the firmware's state now, not the server's record of its
// hardware, so any report's counts. A report without one (the probe could not tell) changes
// nothing.
func recordBootMode(server *metalv1alpha1.Server, mode metalv1alpha1.BootMode) {
	if mode == "" {
		return
	}
	server.Status.BootMode = mode
	server.Status.BootModeSource = metalv1alpha1.BootModeSourceProbe
}

// takesInventory says whether a report replaces the server's record of its hardware: in a
// discovery (Initial, Discovery) when it lists the same disks and NICs, or the server holds no
// tenant's data (not Cleaned=False: a dirty server's discovery is a wipe, judged against the
// record), or a person's retry accepted its changed hardware (HardwareRecord Unknown).
func takesInventory(server *metalv1alpha1.Server, diffs []string) bool {
	switch server.Status.State {
	case "", metalv1alpha1.ServerStateInitial, metalv1alpha1.ServerStateDiscovery: // "": a new Server
	default:
		return false
	}
	if len(diffs) == 0 {
		return true
	}
	if c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionCleaned); c == nil || c.Status != metav1.ConditionFalse {
		return true
	}
	c := meta.FindStatusCondition(server.Status.Conditions, metalv1alpha1.ConditionHardwareRecord)
	return c != nil && c.Status == metav1.ConditionUnknown && c.Reason == metalv1alpha1.ReasonHardwareChangeAccepted
}

func replaceInventory(server *metalv1alpha1.Server, inv *metalv1alpha1.Inventory) {
	server.Status.Inventory = inv.DeepCopy()
	server.Status.Hardware = metalv1alpha1.SummarizeInventory(inv)
}
