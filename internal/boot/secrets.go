package boot

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// A boot's secrets (its ignition, which holds the probe's registry token) reach one host, once,
// after Ironic's agent token (handed out to the first agent that asks, never again):
//
//   - the boot is bound to one address: the DHCP lease of the server's NIC when this service
//     leased it one (full mode), else the address that first fetched one of the boot's own
//     artifacts (its iPXE script, its ignition). Another address is refused; when the address
//     was only the first to ask (not a lease), the two cannot be told apart and the boot ends;
//   - the ignition is served once: a second fetch is refused and ends the boot;
//   - a virtual-media boot's ISO (which carries the ignition) goes to the first address that
//     fetches it, the BMC, in as many range reads as it likes; another address ends the boot.
//
// Every decision is recorded in the configuration's status.secrets, under an optimistic lock,
// before a byte is sent: a restarted service, or a second replica, sees it. An ended boot is not
// Ready any more (ReasonBootEnded): nothing of it is served, and the operator, seeing the
// IgnitionServed condition False, ends the probe boot (the registry then refuses its token) and
// makes a new one with new secrets.

// Where status.secrets.hostAddress came from.
const (
	hostFromLease      = "Lease"
	hostFromFirstFetch = "FirstFetch"
)

// fetch is what a request asks of a boot.
type fetch string

const (
	fetchScript   fetch = "iPXE script"
	fetchIgnition fetch = "ignition"
	fetchMedia    fetch = "ISO"
	// fetchURIMedia is the ISO of a boot by URI (bootMethod UefiHttp): the host's firmware
	// fetches it, bound to the host as its script would be, and may read it more than once
	// (UEFI HTTP boot asks HEAD, then GET).
	fetchURIMedia fetch = "ISO (HTTP boot)"
)

// bootKey names the boot a configuration serves now, as the tokens do: its probe boot, or its
// generation. status.secrets of another key is an earlier boot's.
func bootKey(sbc *metalv1alpha1.ServerBootConfiguration) string {
	if boot := sbc.Annotations[metalv1alpha1.AnnotationProbeBoot]; boot != "" {
		return boot
	}
	return fmt.Sprintf("generation:%d", sbc.Generation)
}

// secretsOf is the record of the boot sbc serves now (empty when nothing was recorded for it).
func secretsOf(sbc *metalv1alpha1.ServerBootConfiguration) metalv1alpha1.BootSecrets {
	if r := sbc.Status.Secrets; r != nil && r.Boot == bootKey(sbc) {
		return *r
	}
	return metalv1alpha1.BootSecrets{Boot: bootKey(sbc)}
}

// ended says whether the boot sbc serves now was ended by a boot service.
func ended(sbc *metalv1alpha1.ServerBootConfiguration) bool {
	return secretsOf(sbc).Ended
}

// decision is what admit does with one request.
type decision struct {
	record metalv1alpha1.BootSecrets
	// cond is the IgnitionServed condition (its status, reason and message), set with the record.
	cond  *metav1.Condition
	write bool
	// refuse says why the request is refused ("": admitted); end, that the boot ends with it.
	refuse string
	end    bool
}

// decide applies the rules to one request of kind from addr. leased are the addresses this
// service's DHCP leased to the server's NICs (none outside full mode).
func decide(sbc *metalv1alpha1.ServerBootConfiguration, leased []netip.Addr, addr netip.Addr, kind fetch, now time.Time) decision {
	d := decision{record: secretsOf(sbc)}
	rec := &d.record
	a := addr.String()
	if rec.Ended {
		d.refuse = "the boot was ended"
		return d
	}
	endWith := func(reason, message string) decision {
		rec.Ended = true
		d.write, d.refuse, d.end = true, message, true
		d.cond = &metav1.Condition{Status: metav1.ConditionFalse, Reason: reason, Message: message}
		return d
	}
	if kind != fetchMedia { // the virtual-media ISO is the BMC's to fetch, not the host's
		switch {
		case len(leased) > 0 && !slices.Contains(leased, addr):
			d.refuse = fmt.Sprintf("%s asked for the %s of the boot, and the server's DHCP lease is %s", a, kind, joinAddrs(leased))
			return d
		case len(leased) > 0:
			if rec.HostAddress != a || rec.HostAddressSource != hostFromLease {
				rec.HostAddress, rec.HostAddressSource, d.write = a, hostFromLease, true
			}
		case rec.HostAddress == "":
			rec.HostAddress, rec.HostAddressSource, d.write = a, hostFromFirstFetch, true
		case rec.HostAddress != a:
			return endWith(metalv1alpha1.ReasonWrongHost, fmt.Sprintf("the boot is bound to %s (the first address to fetch one of its artifacts), and %s asked for its %s: one of them is not the server; refused, and the boot is ended: a new boot with new secrets follows", rec.HostAddress, a, kind))
		}
	}
	switch {
	case kind == fetchScript:
	case rec.IgnitionServedTo == "":
		at := metav1.NewTime(now)
		rec.IgnitionServedTo, rec.IgnitionServedAt, d.write = a, &at, true
		d.cond = &metav1.Condition{Status: metav1.ConditionTrue, Reason: metalv1alpha1.ReasonIgnitionServedOnce,
			Message: fmt.Sprintf("the %s was served to %s; it is served to no one again", kind, a)}
	case (kind == fetchMedia || kind == fetchURIMedia) && rec.IgnitionServedTo == a:
		// The BMC reads the ISO in ranges, many times over; a firmware HEAD first, then GET.
	default:
		served := "earlier"
		if rec.IgnitionServedAt != nil {
			served = "at " + rec.IgnitionServedAt.UTC().Format(time.RFC3339)
		}
		return endWith(metalv1alpha1.ReasonSecondFetchRefused, fmt.Sprintf("the boot's ignition was served to %s %s; a second fetch (of its %s), from %s, was refused, and the boot is ended: a new boot with new secrets follows", rec.IgnitionServedTo, served, kind, a))
	}
	return d
}

func joinAddrs(addrs []netip.Addr) string {
	s := make([]string, len(addrs))
	for i, a := range addrs {
		s[i] = a.String()
	}
	return strings.Join(s, ", ")
}

// leasedAddresses are the addresses this service's DHCP has leased (or offered) to the server's
// NICs; none outside full mode.
func (s *Service) leasedAddresses(server *metalv1alpha1.Server) []netip.Addr {
	if s.leases == nil {
		return nil
	}
	var out []netip.Addr
	for _, m := range serverMACs(server) {
		mac, err := net.ParseMAC(m)
		if err != nil {
			continue
		}
		if ip, ok := s.leases.Address(mac); ok {
			out = append(out, ip)
		}
	}
	return out
}

// errBootGone: the boot a request named stopped being served while it was decided.
var errBootGone = errors.New("the boot is no longer served")

// admit decides whether the request r may have kind of boot t, and records the decision in the
// configuration's status (under its optimistic lock, retried on conflict with the configuration
// as it is then) before the caller sends anything. A refused request is answered here (403; 404
// when the boot went meanwhile) and false returned. t.sbc is left as written.
func (s *Service) admit(ctx context.Context, w http.ResponseWriter, r *http.Request, t *target, kind fetch) bool {
	addr, err := remoteAddr(r)
	if err != nil {
		s.fail(w, http.StatusBadRequest, errBadRequest)
		return false
	}
	if status := s.admitAddr(ctx, t, addr, kind); status != 0 {
		s.fail(w, status, "")
		return false
	}
	return true
}

// admitAddr is admit for a request from addr, whatever its protocol (TFTP asks too): 0 when it
// may have kind of boot t, else the HTTP status it is refused with (403; 404 when the boot went
// meanwhile; 500).
func (s *Service) admitAddr(ctx context.Context, t *target, addr netip.Addr, kind fetch) int {
	var d decision
	var err error
	sbc := t.sbc
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d = decide(sbc, s.leasedAddresses(t.server), addr, kind, time.Now())
		if !d.write {
			return nil
		}
		updated := sbc.DeepCopy()
		updated.Status.Secrets = &d.record
		if d.cond != nil {
			meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: metalv1alpha1.ConditionIgnitionServed,
				Status: d.cond.Status, Reason: d.cond.Reason, Message: d.cond.Message, ObservedGeneration: sbc.Generation})
		}
		err := s.client.Status().Patch(ctx, updated, client.MergeFromWithOptions(sbc, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			sbc = updated
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		// Another request (or replica) wrote first: decide again on what it wrote.
		var fresh metalv1alpha1.ServerBootConfiguration
		if err := s.api.Get(ctx, client.ObjectKeyFromObject(sbc), &fresh); err != nil {
			return err
		}
		if !ready(&fresh) || bootKey(&fresh) != bootKey(sbc) || s.tokens.token(&fresh) != s.tokens.token(sbc) {
			return errBootGone
		}
		sbc = &fresh
		return err // the conflict: decided again
	})
	switch {
	case errors.Is(err, errBootGone) || apierrors.IsNotFound(err):
		return http.StatusNotFound
	case err != nil:
		s.log.Error(err, "recording who a boot's secrets went to", "bootConfiguration", t.sbc.Name)
		return http.StatusInternalServerError
	}
	t.sbc = sbc
	if d.refuse == "" {
		return 0
	}
	s.log.Info("refused a boot request", "bootConfiguration", sbc.Name, "server", t.server.Name, "fetch", string(kind), "from", addr.String(), "why", d.refuse, "ended", d.end)
	switch {
	case d.end:
		s.events.Eventf(sbc, nil, corev1.EventTypeWarning, d.cond.Reason, "Boot", "server %s: %s", t.server.Name, d.refuse)
	case !d.record.Ended:
		s.events.Eventf(sbc, nil, corev1.EventTypeWarning, metalv1alpha1.ReasonBootRequestRefused, "Boot", "server %s: %s; refused", t.server.Name, d.refuse)
	}
	return http.StatusForbidden
}

// remoteAddr is the address a request came from (an IPv4-mapped IPv6 address as IPv4).
func remoteAddr(r *http.Request) (netip.Addr, error) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("request address %q: %w", r.RemoteAddr, err)
	}
	return ap.Addr().Unmap(), nil
}
