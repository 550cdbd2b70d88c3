package boot

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ironfleet/ironfleet/internal/boot/dhcp"
)

// Full DHCP mode keeps its lease table in a ConfigMap of the service's namespace, so that a
// restarted service (or a second one) offers no leased address to another MAC: loaded before
// the first DHCP answer, written after lease changes.
const (
	// LeaseConfigMap names the ConfigMap; the service's RBAC names it too.
	LeaseConfigMap = "ironfleet-boot-leases"
	// LeaseConfigMapKey holds the leases, one a line: "<ip> <mac> <expiry, RFC 3339>", the MAC
	// "-" for an address set aside by a DECLINE.
	LeaseConfigMapKey = "leases"
	// LabelComponent marks what the boot service keeps in the cluster.
	LabelComponent = "app.kubernetes.io/component"
)

// MaxLeaseRange is the largest full-mode range: its leases fit a ConfigMap (1 MiB) at ~56
// bytes a line.
const MaxLeaseRange = 16384

// Writes are batched: the first change after a write waits leaseWriteDelay for others, and a
// failed write is tried again after a backoff of up to leaseWriteMaxBackoff.
const (
	leaseWriteDelay      = time.Second
	leaseWriteMaxBackoff = 30 * time.Second
)

// leaseStore keeps a lease table in the ConfigMap at key.
type leaseStore struct {
	table  *dhcp.LeaseTable
	key    client.ObjectKey
	reader client.Reader // the API server, not the cache: ConfigMaps are not watched
	writer client.Client
	log    logr.Logger
	dirty  chan struct{}
}

func newLeaseStore(table *dhcp.LeaseTable, namespace string, reader client.Reader, writer client.Client, log logr.Logger) *leaseStore {
	st := &leaseStore{table: table, key: client.ObjectKey{Namespace: namespace, Name: LeaseConfigMap},
		reader: reader, writer: writer, log: log, dirty: make(chan struct{}, 1)}
	table.Notify(func() {
		select {
		case st.dirty <- struct{}{}:
		default: // a write is already due
		}
	})
	return st
}

// load adds the stored leases to the table. No ConfigMap is an empty table; one that cannot be
// read is an error: answering DHCP without it could offer a leased address.
func (st *leaseStore) load(ctx context.Context) error {
	var cm corev1.ConfigMap
	err := st.reader.Get(ctx, st.key, &cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("loading the DHCP leases from ConfigMap %s: %w", st.key, err)
	}
	leases, err := decodeLeases(cm.Data[LeaseConfigMapKey])
	if err != nil {
		return fmt.Errorf("ConfigMap %s, key %s: %w (fix or delete it)", st.key, LeaseConfigMapKey, err)
	}
	n := st.table.Restore(leases)
	st.log.Info("DHCP leases loaded", "configMap", st.key.String(), "stored", len(leases), "restored", n)
	return nil
}

// run writes the table after each change until ctx ends, then writes it a last time if a
// change is pending.
func (st *leaseStore) run(ctx context.Context) {
	backoff := leaseWriteDelay
	for {
		select {
		case <-ctx.Done():
			st.flush()
			return
		case <-st.dirty:
		}
		timer := time.NewTimer(leaseWriteDelay)
		select {
		case <-ctx.Done():
			timer.Stop()
			st.markDirty()
			st.flush()
			return
		case <-timer.C:
		}
		if err := st.write(ctx); err != nil {
			if ctx.Err() != nil {
				st.markDirty()
				continue
			}
			st.log.Error(err, "writing the DHCP leases; trying again", "configMap", st.key.String(), "in", backoff)
			st.markDirty()
			retryAt := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				retryAt.Stop()
			case <-retryAt.C:
			}
			backoff = min(2*backoff, leaseWriteMaxBackoff)
			continue
		}
		backoff = leaseWriteDelay
	}
}

func (st *leaseStore) markDirty() {
	select {
	case st.dirty <- struct{}{}:
	default:
	}
}

// flush writes a pending change when the service stops, within a few seconds.
func (st *leaseStore) flush() {
	select {
	case <-st.dirty:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := st.write(ctx); err != nil {
		st.log.Error(err, "writing the DHCP leases on stopping", "configMap", st.key.String())
	}
}

// write stores the table. On a conflict (another instance wrote in between) it reads what is
// stored, adds to the table what the table does not hold itself, and writes the union: no
// lease either instance made is lost. A lease freed here but still stored there comes back
// until it expires: the safe side.
func (st *leaseStore) write(ctx context.Context) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := st.reader.Get(ctx, st.key, &cm)
		if apierrors.IsNotFound(err) {
			cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: st.key.Namespace, Name: st.key.Name,
				Labels: map[string]string{LabelComponent: "boot-service-dhcp-leases"}},
				Data: map[string]string{LeaseConfigMapKey: encodeLeases(st.table.Snapshot())}}
			err = st.writer.Create(ctx, &cm)
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), st.key.Name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if stored, err := decodeLeases(cm.Data[LeaseConfigMapKey]); err == nil {
			st.table.Restore(stored)
		} else {
			st.log.Info("the stored DHCP leases do not read: overwriting them", "configMap", st.key.String(), "error", err.Error())
		}
		cm.Data = map[string]string{LeaseConfigMapKey: encodeLeases(st.table.Snapshot())}
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels[LabelComponent] = "boot-service-dhcp-leases"
		return st.writer.Update(ctx, &cm)
	})
}

func encodeLeases(leases []dhcp.Lease) string {
	var b strings.Builder
	for _, l := range leases {
		mac := l.MAC
		if mac == "" {
			mac = "-"
		}
		fmt.Fprintf(&b, "%s %s %s\n", l.IP, mac, l.Expires.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func decodeLeases(s string) ([]dhcp.Lease, error) {
	var out []dhcp.Lease
	for i, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("line %d: want \"<ip> <mac or -> <expiry>\", got %q", i+1, line)
		}
		ip, err := netip.ParseAddr(f[0])
		if err != nil || !ip.Is4() {
			return nil, fmt.Errorf("line %d: %q is not an IPv4 address", i+1, f[0])
		}
		mac := ""
		if f[1] != "-" {
			hw, err := net.ParseMAC(f[1])
			if err != nil || len(hw) != 6 {
				return nil, fmt.Errorf("line %d: %q is not a MAC address", i+1, f[1])
			}
			mac = hw.String()
		}
		exp, err := time.Parse(time.RFC3339, f[2])
		if err != nil {
			return nil, fmt.Errorf("line %d: expiry: %w", i+1, err)
		}
		out = append(out, dhcp.Lease{IP: ip, MAC: mac, Expires: exp})
	}
	return out, nil
}
