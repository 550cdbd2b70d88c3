package controller

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/bmc"
)

// Labels Ironfleet puts on Servers, for selectors in claims.
const (
	LabelBMC          = "metal.ironfleet.dev/bmc"
	LabelManufacturer = "metal.ironfleet.dev/manufacturer"
	LabelModel        = "metal.ironfleet.dev/model"
)

// syncServers makes sure each system the BMC lists has its Server, and refreshes what the
// systems list says about each (identity and power): no extra Redfish calls for known servers.
// It reports whether a write lost a race, so the caller comes back soon rather than at the
// next poll.
func (r *BMCReconciler) syncServers(ctx context.Context, b *metalv1alpha1.BMC, c bmc.Client, systems []bmc.SystemInfo) (raced bool, err error) {
	names := serverNames(b.Name, systems)
	for i, sys := range systems {
		server, err := r.ensureServer(ctx, b, sys, names[i])
		if err != nil {
			return raced, err
		}
		conflict, err := r.refreshServerStatus(ctx, c, server, sys)
		if err != nil {
			return raced, err
		}
		raced = raced || conflict
	}
	return raced, nil
}

// serverNames names each system's Server from its UUID, so names survive re-ordering and
// re-enrolment. Systems without a UUID, or sharing one with another system of the same BMC
// (blades, DPUs, some Supermicro boards), get a name from the BMC and the system's Id instead.
func serverNames(bmcName string, systems []bmc.SystemInfo) []string {
	seen := map[string]int{}
	for _, s := range systems {
		if s.UUID != "" {
			seen[s.UUID]++
		}
	}
	names := make([]string, len(systems))
	for i, s := range systems {
		if s.UUID != "" && seen[s.UUID] == 1 && len(validation.IsDNS1123Subdomain(s.UUID)) == 0 {
			names[i] = s.UUID
		} else {
			names[i] = fallbackServerName(bmcName, s)
		}
	}
	return names
}

var nonNameChars = regexp.MustCompile(`[^a-z0-9.-]+`)

func fallbackServerName(bmcName string, s bmc.SystemInfo) string {
	id := s.ID
	if id == "" {
		id = s.URI[strings.LastIndex(strings.TrimSuffix(s.URI, "/"), "/")+1:]
	}
	name := nonNameChars.ReplaceAllString(strings.ToLower(bmcName+"-"+id), "-")
	name = strings.Trim(name, "-.")
	if len(name) > validation.DNS1123SubdomainMaxLength {
		name = strings.Trim(name[:validation.DNS1123SubdomainMaxLength], "-.")
	}
	return name
}

// ensureServer gets or creates the Server for a system. A Server of that name that belongs to
// another BMC means two BMCs report the same UUID: this one then uses its fallback name.
func (r *BMCReconciler) ensureServer(ctx context.Context, b *metalv1alpha1.BMC, sys bmc.SystemInfo, name string) (*metalv1alpha1.Server, error) {
	for attempt := 0; attempt < 2; attempt++ {
		var server metalv1alpha1.Server
		err := r.Client.Get(ctx, client.ObjectKey{Name: name}, &server)
		if err == nil {
			if server.Spec.BMCRef == nil || server.Spec.BMCRef.Name != b.Name {
				r.Events.Eventf(b, &server, corev1.EventTypeWarning, "DuplicateSystemUUID", "CreateServer",
					"system %s reports UUID %s, already used by server %s of another BMC; naming it by BMC and Id", sys.URI, sys.UUID, name)
				name = fallbackServerName(b.Name, sys)
				continue
			}
			return &server, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		server = metalv1alpha1.Server{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: serverLabels(b, sys), Finalizers: []string{ServerFinalizer}},
			Spec: metalv1alpha1.ServerSpec{
				SystemUUID: sys.UUID,
				SystemURI:  sys.URI,
				BMCRef:     &metalv1alpha1.LocalObjectReference{Name: b.Name},
			},
		}
		if err := r.Client.Create(ctx, &server); err != nil {
			return nil, fmt.Errorf("creating server %s: %w", name, err)
		}
		r.Events.Eventf(b, &server, corev1.EventTypeNormal, "ServerCreated", "CreateServer", "created server %s for system %s", name, sys.URI)
		return &server, nil
	}
	return nil, fmt.Errorf("no free name for system %s of BMC %s", sys.URI, b.Name)
}

func serverLabels(b *metalv1alpha1.BMC, sys bmc.SystemInfo) map[string]string {
	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	labels[LabelBMC] = labelValue(b.Name)
	if v := labelValue(sys.Manufacturer); v != "" {
		labels[LabelManufacturer] = v
	}
	if v := labelValue(sys.Model); v != "" {
		labels[LabelModel] = v
	}
	return labels
}

var nonLabelChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// labelValue turns free text ("PowerEdge R650 ") into a valid label value ("PowerEdge_R650").
func labelValue(s string) string {
	v := nonLabelChars.ReplaceAllString(strings.TrimSpace(s), "_")
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	return strings.Trim(v, "._-")
}

// refreshServerStatus writes what the BMC says about a system into its Server's status:
// identity and power. The out-of-band inventory is read once, when the Server has none;
// discovery replaces it with the in-band report. The lifecycle state is not the BMC
// reconciler's to write.
func (r *BMCReconciler) refreshServerStatus(ctx context.Context, c bmc.Client, server *metalv1alpha1.Server, sys bmc.SystemInfo) (conflict bool, err error) {
	original := server.DeepCopy()
	st := &server.Status
	st.PowerState = sys.PowerState
	st.Manufacturer, st.Model, st.SerialNumber, st.SKU, st.BIOSVersion = sys.Manufacturer, sys.Model, sys.SerialNumber, sys.SKU, sys.BIOSVersion
	if st.Inventory == nil {
		inv, err := c.Inventory(ctx, sys.URI)
		if err != nil {
			return false, err
		}
		st.Inventory = &inv
	}
	// Servers whose inventory came before the summary get it at the next poll.
	st.Hardware = metalv1alpha1.SummarizeInventory(st.Inventory)
	if equality.Semantic.DeepEqual(original.Status, server.Status) {
		return false, nil // an idle fleet costs no API writes
	}
	// Optimistic: the server reconciler and the registry write this status too, and a poll
	// that read a stale server must not undo them (a stale "no inventory" would overwrite the
	// probe's report). A conflict just waits for the next poll.
	err = r.Client.Status().Patch(ctx, server, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("updating server %s status: %w", server.Name, err)
	}
	return false, nil
}
