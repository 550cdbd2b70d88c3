package controller

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// endedProbeBoot says why the boot service ended the server's current probe boot of purpose, ""
// when it did not. A configuration whose boot is not the one the Server names is an earlier
// boot's, already dropped.
func (r *ServerReconciler) endedProbeBoot(ctx context.Context, server *metalv1alpha1.Server, purpose metalv1alpha1.BootPurpose) (string, error) {
	var sbc metalv1alpha1.ServerBootConfiguration
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: r.Probe.Namespace, Name: probeBootName(server, purpose)}, &sbc)
	if err != nil {
		return "", client.IgnoreNotFound(err)
	}
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	rec := sbc.Status.Secrets
	if rec == nil || !rec.Ended || boot == "" || rec.Boot != boot || server.Status.ProbeBoot != boot {
		return "", nil
	}
	why := "its secrets were asked for twice, or by another host"
	if c := apimeta.FindStatusCondition(sbc.Status.Conditions, metalv1alpha1.ConditionIgnitionServed); c != nil {
		why = c.Message
	}
	return fmt.Sprintf("the boot service ended probe boot %s/%s (%s); it is dropped, its registry token refused, and a new boot with new secrets follows", sbc.Namespace, sbc.Name, why), nil
}

// spentProbeBoot says whether the boot a configuration serves has given out its secrets (its
// ignition was served) or was ended: booting it again would have the host refused, so the next
// attempt needs a new boot.
func spentProbeBoot(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	rec := sbc.Status.Secrets
	boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]
	return rec != nil && boot != "" && rec.Boot == boot && (rec.Ended || rec.IgnitionServedTo != "")
}
