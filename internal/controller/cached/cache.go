// Package cached is how the reconcilers read the manager's cache: its options (Servers kept with
// a compact inventory), reads under a field index without copies, and the guards that keep a
// reconcile from acting on a cached object older than its own last write.
package cached

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// IndexedReader reads the cache's own objects under one of its field indexes, as pointers.
// A List, even with UnsafeDisableDeepCopy, copies each object's struct into the list: 640 bytes
// a Server, so 6 MiB a call at ten thousand servers, and the claims controller lists the
// bindable servers on every bind, from each of its workers at once. These are the objects the
// cache holds: read them, never change them.
type IndexedReader struct {
	Cache cache.Cache
}

// ByIndex returns the objects of obj's kind (cluster-scoped or across all namespaces) whose
// field index has value. It falls back to a List, with its copies, when the cache's informer
// exposes no indexer (not so in controller-runtime v0.24).
func ByIndex[T client.Object](ctx context.Context, r IndexedReader, obj T, list client.ObjectList, items func() []T, field, value string) ([]T, error) {
	inf, err := r.Cache.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		if err := r.Cache.List(ctx, list, client.MatchingFields{field: value}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		return items(), nil
	}
	// controller-runtime's own names for a field index and for a value across namespaces
	// (pkg/cache/internal: FieldIndexName, KeyToNamespacedKey("", value)).
	objs, err := indexed.GetIndexer().ByIndex("field:"+field, "__all_namespaces/"+value)
	if err != nil {
		return nil, fmt.Errorf("reading the cache's %s index: %w", field, err)
	}
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// ItemPointers points at a list's items (the fallback's).
func ItemPointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// Options are the manager's cache settings that the reconcilers are written for: objects
// without managedFields (never read; 2 KiB of a 10 KiB Server), and Servers with a compact
// inventory (compactInventory), and ServerFirmwares without their findings. The API keeps
// every object whole.
func Options() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&metalv1alpha1.Server{}: {Transform: func(o any) (any, error) {
				if s, ok := o.(*metalv1alpha1.Server); ok {
					s.ManagedFields = nil
					compactInventory(s)
				}
				return o, nil
			}},
			// The firmware controller decides from the versions and conditions; the inventory
			// and the BIOS attributes (hundreds on a real BMC) are for people, and it writes
			// them whole after each read.
			&metalv1alpha1.ServerFirmware{}: {Transform: func(o any) (any, error) {
				if f, ok := o.(*metalv1alpha1.ServerFirmware); ok {
					f.ManagedFields = nil
					f.Status.Components, f.Status.BIOS, f.Status.BMC = nil, nil, nil
				}
				return o, nil
			}},
		},
	}
}

// compactInventory keeps of a Server's inventory what the reconcilers read — its source and
// time, the CPU, memory and storage summaries, the disks' names, sizes, kinds, whether they
// are removable, and what identifies them (serial numbers, WWNs and bus paths: the record a
// wipe is judged against, and wipe exclusions, name disks by them), and the NICs (boot MACs,
// addresses) — and drops the per-part detail that only people read: processors, memory
// modules, PCI devices, DMI (but the BIOS's version, vendor and date), the disks' models, vendors and controllers, the NICs' LLDP neighbours, drivers
// and PCI addresses, the collector's version and warnings. That detail is most of an inventory's size, and a cache holds every Server of the
// fleet. Nothing written back is built from a cached Server's inventory: the registry replaces
// a Server's inventory whole with each report (a JSON patch), never merges into what the cache
// kept.
func compactInventory(s *metalv1alpha1.Server) {
	inv := s.Status.Inventory
	if inv == nil {
		return
	}
	inv.Processors, inv.MemoryModules, inv.PCIDevices = nil, nil, nil
	if inv.DMI != nil {
		// The BIOS version the host itself reports: a firmware update is verified by it.
		inv.DMI = &metalv1alpha1.DMI{BIOS: inv.DMI.BIOS}
	}
	inv.CollectorVersion, inv.Warnings = "", nil
	for i := range inv.NetworkInterfaces {
		nic := &inv.NetworkInterfaces[i]
		nic.LLDP, nic.Driver, nic.PCIAddress = nil, "", ""
	}
	for i := range inv.Storage {
		d := &inv.Storage[i]
		d.Model, d.Vendor, d.Controller = "", "", ""
	}
}
