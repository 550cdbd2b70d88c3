package boot

import (
	"context"
	"fmt"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
)

// loaderReason is the LoaderOffered reason of a boot file DHCP offers: "" for what is not a
// loader (iPXE's script URL).
func loaderReason(file string) string {
	switch file {
	case dhcp.FileBIOS, dhcp.FileEFI, dhcp.FileEFISNPOnly:
		return metalv1alpha1.ReasonLoaderIPXE
	case dhcp.FileShim:
		return metalv1alpha1.ReasonLoaderSignedChain
	}
	return ""
}

// loaderNoteEvery bounds how often one boot's LoaderOffered is written again for the same
// loader: a PXE ROM's OFFER and ACK come within a second, a new attempt of the boot minutes
// later.
const loaderNoteEvery = 30 * time.Second

// noteLoader records, on the Ready boot of mac, the loader DHCP just offered it (the
// LoaderOffered condition, its time the offer's), so that a boot that then times out with
// nothing of it asked for can say the firmware did not run it. A failure is logged: the
// record only explains, it decides nothing.
func (s *Service) noteLoader(mac net.HardwareAddr, file string) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	t, err := s.targetByMAC(ctx, mac)
	if err != nil || t == nil {
		return
	}
	reason := loaderReason(file)
	what := "iPXE, unsigned: a firmware with Secure Boot on refuses it"
	if reason == metalv1alpha1.ReasonLoaderSignedChain {
		what = "shim, the signed chain for Secure Boot"
	}
	msg := fmt.Sprintf("DHCP offered %s (%s) to %s", file, what, mac)
	sbc := t.sbc
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		now := time.Now()
		if c := meta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionLoaderOffered); c != nil &&
			c.Reason == reason && c.Message == msg && now.Sub(c.LastTransitionTime.Time) < loaderNoteEvery {
			return nil
		}
		updated := sbc.DeepCopy()
		// Removed first, so that the condition's time is this offer's.
		meta.RemoveStatusCondition(&updated.Status.Conditions, metalv1alpha1.ConditionLoaderOffered)
		meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionLoaderOffered,
			Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: sbc.Generation,
			LastTransitionTime: metav1.NewTime(now)})
		err := s.client.Status().Patch(ctx, updated, client.MergeFromWithOptions(sbc, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err
		}
		var fresh metalv1alpha1.ServerBootConfiguration
		if err := s.api.Get(ctx, client.ObjectKeyFromObject(sbc), &fresh); err != nil {
			return err
		}
		sbc = &fresh
		return err
	})
	if err != nil && !apierrors.IsNotFound(err) {
		s.log.Info("recording the loader offered to a boot failed", "bootConfiguration", t.sbc.Name, "error", err.Error())
	}
}
