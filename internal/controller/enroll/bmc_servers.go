package enroll

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/ironfleet/ironfleet/internal/controller/status"
	"github.com/ironfleet/ironfleet/internal/identity"
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

// serverName is the name a system's Server gets, and why it is not the UUID when it is not.
type serverName struct {
	name string
	// notByUUID says why the system is named by BMC and Id; "" when it is named by its UUID.
	notByUUID string
}

// serverNames names each system's Server (docs/identity.md). A system whose UUID is usable
// (identity.Usable: a UUID, not all zeros or all F, not a vendor placeholder) and reported by
// no other system of the BMC is named by it, so names survive re-ordering and re-enrolment.
// Any other system (no UUID, a placeholder, one UUID for several systems: blades, DPUs,
// Supermicro boards) is named by the BMC and the system's Id, which the BMC keeps stable. A
// serial number is not used: BMCs report placeholders there too ("To be filled by O.E.M."),
// and a board swap changes it while the slot (BMC and Id) stays the same.
func serverNames(bmcName string, systems []bmc.SystemInfo) []serverName {
	seen := map[string]int{}
	for _, s := range systems {
		if u := identity.Normalize(s.UUID); u != "" {
			seen[u]++
		}
	}
	names := make([]serverName, len(systems))
	for i, s := range systems {
		u := identity.Normalize(s.UUID)
		switch {
		case !identity.Usable(u):
			names[i].notByUUID = "its UUID cannot identify it: " + identity.Problem(u)
		case seen[u] > 1:
			names[i].notByUUID = fmt.Sprintf("%d systems of the BMC report its UUID %s", seen[u], u)
		case len(validation.IsDNS1123Subdomain(u)) != 0:
			names[i].notByUUID = "its UUID is not a valid name"
		default:
			names[i].name = u
			continue
		}
		names[i].name = fallbackServerName(bmcName, s)
	}
	return names
}

var nonNameChars = regexp.MustCompile(`[^a-z0-9.-]+`)

func fallbackServerName(bmcName string, s bmc.SystemInfo) string {
	id := s.ID
	if id == "" {
		id = s.URI[strings.LastIndex(strings.TrimSuffix(s.URI, "/"), "/")+1:]
	}
	return dnsName(bmcName + "-" + id)
}

// dnsName makes s a valid Server name: lower case, other characters as "-", at most 253.
func dnsName(s string) string {
	name := nonNameChars.ReplaceAllString(strings.ToLower(s), "-")
	name = strings.Trim(name, "-.")
	if len(name) > validation.DNS1123SubdomainMaxLength {
		name = strings.Trim(name[:validation.DNS1123SubdomainMaxLength], "-.")
	}
	return name
}

// hashedServerName is the last resort, when another BMC's Server has the fallback name too
// (BMC "a-b" with system "c", BMC "a" with system "b-c"): the fallback with a hash of the BMC
// and the system's URI, stable for the system.
func hashedServerName(bmcName string, s bmc.SystemInfo) string {
	sum := sha256.Sum256([]byte(bmcName + "\x00" + s.URI))
	suffix := "-" + hex.EncodeToString(sum[:4])
	base := fallbackServerName(bmcName, s)
	if room := validation.DNS1123SubdomainMaxLength - len(suffix); len(base) > room {
		base = strings.Trim(base[:room], "-.")
	}
	return base + suffix
}

// ensureServer gets or creates the Server for a system. A Server of the chosen name that
// belongs to another BMC means two BMCs report the same UUID (or fallback names collide): this
// system then takes the next name. Before a new Server is made, the BMC's Server already at the
// system's URI is taken instead when it is the same machine (serverAt): one an earlier rule
// named (by a placeholder UUID, or by a UUID a second system of the BMC now reports too) keeps
// its name, and no system gets two Servers.
func (r *BMCReconciler) ensureServer(ctx context.Context, b *metalv1alpha1.BMC, sys bmc.SystemInfo, chosen serverName) (*metalv1alpha1.Server, error) {
	candidates := []serverName{chosen}
	if fallback := fallbackServerName(b.Name, sys); fallback != chosen.name {
		candidates = append(candidates, serverName{name: fallback, notByUUID: "its UUID " + identity.Normalize(sys.UUID) + " is another BMC's server's name"})
	}
	candidates = append(candidates, serverName{name: hashedServerName(b.Name, sys), notByUUID: "its name by BMC and Id is another BMC's server's"})
	var duplicateOf *metalv1alpha1.Server // another BMC's Server named by this system's UUID
	for _, candidate := range candidates {
		var server metalv1alpha1.Server
		err := r.Client.Get(ctx, client.ObjectKey{Name: candidate.name}, &server)
		if err == nil {
			if server.Spec.BMCRef != nil && server.Spec.BMCRef.Name == b.Name {
				return &server, nil
			}
			if candidate.notByUUID == "" {
				if took, err := r.takeOver(ctx, b, sys, &server); err != nil || took {
					return &server, err
				}
				duplicateOf = &server
			}
			continue
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		if existing, err := r.serverAt(ctx, b, sys); err != nil || existing != nil {
			return existing, err
		}
		server = metalv1alpha1.Server{
			ObjectMeta: metav1.ObjectMeta{Name: candidate.name, Labels: serverLabels(b, sys), Finalizers: []string{metalv1alpha1.ServerFinalizer}},
			Spec: metalv1alpha1.ServerSpec{
				SystemUUID: identity.Normalize(sys.UUID),
				SystemURI:  sys.URI,
				BMCRef:     &metalv1alpha1.LocalObjectReference{Name: b.Name},
			},
		}
		if err := r.Client.Create(ctx, &server); err != nil {
			return nil, fmt.Errorf("creating server %s: %w", candidate.name, err)
		}
		if duplicateOf != nil {
			// Once, when the second Server is made: the polls after it find that Server by its
			// name, and the duplicate stays visible in both Servers' spec.systemUUID.
			r.Events.Eventf(b, duplicateOf, corev1.EventTypeWarning, metalv1alpha1.ReasonDuplicateSystemUUID, "CreateServer",
				"system %s reports UUID %s, already used by server %s of another BMC; naming it by BMC and Id", sys.URI, sys.UUID, duplicateOf.Name)
		}
		if candidate.notByUUID == "" {
			r.Events.Eventf(b, &server, corev1.EventTypeNormal, metalv1alpha1.ReasonServerCreated, "CreateServer", "created server %s for system %s, named by its UUID", candidate.name, sys.URI)
		} else {
			r.Events.Eventf(b, &server, corev1.EventTypeNormal, metalv1alpha1.ReasonServerCreated, "CreateServer", "created server %s for system %s, named by BMC and Id: %s", candidate.name, sys.URI, candidate.notByUUID)
		}
		return &server, nil
	}
	return nil, fmt.Errorf("no free name for system %s of BMC %s", sys.URI, b.Name)
}

// takeOver makes server, named by the system's UUID, this BMC's when the BMC it names is gone:
// a BMC deleted while a claim kept its Server, and the machine enrolled again under another BMC
// name. The claim keeps its machine, and its release wipes it through this BMC; a second Server
// for the machine would wait for ever for the first, which could never be wiped
// (docs/deletion.md). A BMC that is still there, even one being deleted, keeps its Server: two
// BMCs then report the same machine, and the second one's Server waits (MachineHeldElsewhere).
// Nor is a Server taken over by a BMC that has one for the system already (made while the old
// BMC was still there): one BMC's Servers never wait for each other, and that one would boot
// the tenant's machine.
func (r *BMCReconciler) takeOver(ctx context.Context, b *metalv1alpha1.BMC, sys bmc.SystemInfo, server *metalv1alpha1.Server) (bool, error) {
	if server.Spec.BMCRef == nil || identity.Normalize(server.Spec.SystemUUID) != identity.Normalize(sys.UUID) || !server.DeletionTimestamp.IsZero() {
		return false, nil
	}
	var own metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &own, client.MatchingFields{indexServerByBMC: b.Name}); err != nil {
		return false, fmt.Errorf("listing the BMC's servers: %w", err)
	}
	for i := range own.Items {
		if own.Items[i].Spec.SystemURI == sys.URI {
			return false, nil
		}
	}
	old := server.Spec.BMCRef.Name
	// Asked of the API, not the cache: a BMC made a moment ago may not be in the cache yet.
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: old}, &metalv1alpha1.BMC{})
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	before := server.DeepCopy()
	server.Spec.BMCRef = &metalv1alpha1.LocalObjectReference{Name: b.Name}
	server.Spec.SystemURI = sys.URI
	if server.Labels == nil {
		server.Labels = map[string]string{}
	}
	server.Labels[metalv1alpha1.LabelBMC] = labelValue(b.Name)
	if err := r.Client.Patch(ctx, server, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("taking over server %s of deleted BMC %s: %w", server.Name, old, err)
	}
	r.Events.Eventf(b, server, corev1.EventTypeNormal, metalv1alpha1.ReasonServerTakenOver, "TakeOverServer",
		"system %s is server %s's machine (UUID %s), whose BMC %s is gone: the server is this BMC's now", sys.URI, server.Name, identity.Normalize(sys.UUID), old)
	r.Events.Eventf(server, b, corev1.EventTypeNormal, metalv1alpha1.ReasonServerTakenOver, "TakeOverServer", "its BMC %s is gone; BMC %s reaches the machine now", old, b.Name)
	return true, nil
}

// serverAt is the BMC's Server at the system's URI (whatever its name), from the cache, when it
// is the same machine: it has the UUID the system reports now, or its identity never was a UUID
// (it was named by a placeholder, or by BMC and Id), so the slot is its identity. A Server
// whose identity is a UUID the system no longer reports was another machine (a board swap):
// the system gets a Server of its own.
func (r *BMCReconciler) serverAt(ctx context.Context, b *metalv1alpha1.BMC, sys bmc.SystemInfo) (*metalv1alpha1.Server, error) {
	var servers metalv1alpha1.ServerList
	if err := r.Client.List(ctx, &servers, client.MatchingFields{indexServerByBMC: b.Name}); err != nil {
		return nil, fmt.Errorf("listing the BMC's servers: %w", err)
	}
	for i := range servers.Items {
		s := &servers.Items[i]
		if s.Spec.SystemURI != sys.URI {
			continue
		}
		if identity.Normalize(s.Spec.SystemUUID) == identity.Normalize(sys.UUID) || identity.ServerUUID(s) == "" {
			return s, nil
		}
	}
	return nil, nil
}

func serverLabels(b *metalv1alpha1.BMC, sys bmc.SystemInfo) map[string]string {
	labels := map[string]string{}
	for k, v := range b.Labels {
		labels[k] = v
	}
	labels[metalv1alpha1.LabelBMC] = labelValue(b.Name)
	if v := labelValue(sys.Manufacturer); v != "" {
		labels[metalv1alpha1.LabelManufacturer] = v
	}
	if v := labelValue(sys.Model); v != "" {
		labels[metalv1alpha1.LabelModel] = v
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
// discovery replaces it with the in-band report. The boot mode is read with it (bmcBootMode).
// The lifecycle state is not the BMC reconciler's to write.
func (r *BMCReconciler) refreshServerStatus(ctx context.Context, c bmc.Client, server *metalv1alpha1.Server, sys bmc.SystemInfo) (conflict bool, err error) {
	original := server.DeepCopy()
	st := &server.Status
	st.PowerState = sys.PowerState
	st.Manufacturer, st.Model, st.SerialNumber, st.SKU, st.BIOSVersion = sys.Manufacturer, sys.Model, sys.SerialNumber, sys.SKU, sys.BIOSVersion
	if st.Inventory == nil {
		inv, err := c.Inventory(ctx, sys.URI)
		switch {
		case errors.Is(err, bmc.ErrUnsupported):
			// IPMI: no out-of-band inventory (the BMC's OutOfBandInventory condition says
			// so); discovery's in-band report is the Server's hardware. The boot flags say
			// the mode, while they are valid.
			if err := r.bmcBootMode(ctx, c, server, sys.URI); err != nil {
				return false, err
			}
		case err != nil:
			return false, err
		default:
			st.Inventory = &inv
			setBMCBootMode(server, inv.BootMode)
		}
	}
	// Servers whose inventory came before the summary get it at the next poll.
	st.Hardware = metalv1alpha1.SummarizeInventory(st.Inventory)
	if equality.Semantic.DeepEqual(original.Status, server.Status) {
		return false, nil // an idle fleet costs no API writes
	}
	// Optimistic: the server reconciler and the registry write this status too, and a poll
	// that read a stale server must not undo them (a stale "no inventory" would overwrite the
	// probe's report). A conflict just waits for the next poll.
	err = status.Patch(ctx, r.Client, server, client.MergeFromWithOptions(original, client.MergeFromWithOptimisticLock{}))
	if apierrors.IsConflict(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("updating server %s status: %w", server.Name, err)
	}
	return false, nil
}

// bmcBootMode reads the boot mode from a BMC that has no inventory to carry it (IPMI: its boot
// flags), at the polls that would read the inventory, so until discovery's report: no round
// trip more for a server the probe has reported on. A BMC that cannot say is no error.
func (r *BMCReconciler) bmcBootMode(ctx context.Context, c bmc.Client, server *metalv1alpha1.Server, uri string) error {
	if server.Status.BootModeSource == metalv1alpha1.BootModeSourceProbe {
		return nil
	}
	mode, err := c.BootMode(ctx, uri)
	if err != nil && !errors.Is(err, bmc.ErrUnsupported) {
		return err
	}
	setBMCBootMode(server, mode)
	return nil
}

// setBMCBootMode records the mode the BMC says the server boots in, source BMC. It never
// overwrites the probe's word (source Probe: read from the firmware's own variables inside the
// booted host, which the registry writes), nor a known mode with an unknown one.
func setBMCBootMode(server *metalv1alpha1.Server, mode metalv1alpha1.BootMode) {
	if mode == "" || server.Status.BootModeSource == metalv1alpha1.BootModeSourceProbe {
		return
	}
	server.Status.BootMode, server.Status.BootModeSource = mode, metalv1alpha1.BootModeSourceBMC
}
