package redfish

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/stmcginnis/gofish/common"
	"github.com/stmcginnis/gofish/redfish"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
)

// Inventory reads a system's processors, memory, drives and NICs, and its boot mode (as
// BootMode does). A sub-resource that fails (a licence-gated OEM path, a ResourceMissingAtURI)
// is skipped: one bad link must not cost the whole inventory. Only the system itself failing is
// an error.
func (c *Client) Inventory(ctx context.Context, systemURI string) (metalv1alpha1.Inventory, error) {
	if err := ctx.Err(); err != nil {
		return metalv1alpha1.Inventory{}, err
	}
	system, err := redfish.GetComputerSystem(c.api, systemURI)
	if err != nil {
		return metalv1alpha1.Inventory{}, classify("reading system "+systemURI, err)
	}
	now := metav1.NewTime(time.Now())
	inv := metalv1alpha1.Inventory{Source: metalv1alpha1.InventorySourceRedfish, ReportedAt: &now}
	if processors, err := inventoryMembers[redfish.Processor](c, privateLink(system, "processors")); err == nil {
		addProcessors(&inv, processors)
	}
	if memory, err := inventoryMembers[redfish.Memory](c, privateLink(system, "memory")); err == nil {
		addMemory(&inv, memory)
	}
	if inv.Memory.Total == nil && system.MemorySummary.TotalSystemMemoryGiB > 0 {
		// Some BMCs list no DIMMs but do summarise (and in float GiB).
		inv.Memory.Total = bytesQuantity(int64(float64(system.MemorySummary.TotalSystemMemoryGiB) * (1 << 30)))
	}
	if storage, err := inventoryMembers[redfish.Storage](c, privateLink(system, "storage")); err == nil {
		addDrives(&inv, storage)
	}
	if nics, err := inventoryMembers[redfish.EthernetInterface](c, privateLink(system, "ethernetInterfaces")); err == nil {
		addNICs(&inv, nics)
	}
	sortInventory(&inv)
	inv.BootMode = bootModeOf(system)
	return inv, nil
}

// maxInventoryMembers bounds each list of a system's hardware a BMC gives (processors, memory
// modules, storage subsystems, each one's drives, NICs), whose members are each read and kept:
// more than any server has. A longer list is skipped, as one that fails to read is; without the
// bound, a collection of the response limit lists some 90,000 members.
const maxInventoryMembers = 1024

// inventoryMembers reads the members of one of a system's hardware collections, at most
// maxInventoryMembers of them (none when there are more); none when the system has no link.
func inventoryMembers[T any, PT interface {
	*T
	common.SchemaObject
}](c *Client, collection string) ([]*T, error) {
	if collection == "" {
		return nil, nil
	}
	links, err := c.memberLinks(collection, maxInventoryMembers)
	if err != nil {
		return nil, err
	}
	return common.GetObjects[T, PT](c.api, links)
}

// privateLink and privateLinks read a link gofish keeps in an unexported field of a resource
// (v0.20 follows them only without a bound); a field it no longer has reads as no link, which
// the tests against the simulators and the DMTF mockup catch, as for linksOf.
func privateLink(resource any, name string) string {
	if f := reflect.ValueOf(resource).Elem().FieldByName(name); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return ""
}

func privateLinks(resource any, name string) []string {
	f := reflect.ValueOf(resource).Elem().FieldByName(name)
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.String {
		return nil
	}
	out := make([]string, f.Len())
	for i := range out {
		out[i] = f.Index(i).String()
	}
	return out
}

func addProcessors(inv *metalv1alpha1.Inventory, processors []*redfish.Processor) {
	for _, p := range processors {
		if p.Status.State == common.AbsentState {
			continue
		}
		inv.Processors = append(inv.Processors, metalv1alpha1.Processor{
			ID:           p.ID,
			Type:         string(p.ProcessorType),
			Vendor:       clean(p.Manufacturer),
			Model:        clean(p.Model),
			Architecture: string(p.ProcessorArchitecture),
			Cores:        int32(p.TotalCores),
			Threads:      int32(p.TotalThreads),
			MaxSpeedMHz:  int32(p.MaxSpeedMHz),
		})
		// Count CPUs by type, not by collection length: GPUs are often listed first.
		if p.ProcessorType != "" && p.ProcessorType != redfish.CPUProcessorType {
			continue
		}
		inv.CPU.Sockets++
		inv.CPU.Cores += int32(p.TotalCores)
		inv.CPU.Threads += int32(p.TotalThreads)
		if inv.CPU.Model == "" {
			inv.CPU.Model = clean(p.Model)
		}
	}
}

func addMemory(inv *metalv1alpha1.Inventory, modules []*redfish.Memory) {
	var total int64
	for _, m := range modules {
		if m.Status.State == common.AbsentState || m.CapacityMiB == 0 {
			continue // half the slots of a real server are empty
		}
		size := int64(m.CapacityMiB) << 20
		total += size
		inv.MemoryModules = append(inv.MemoryModules, metalv1alpha1.MemoryModule{
			Locator:      firstNonEmpty(m.DeviceLocator, m.ID),
			Size:         bytesQuantity(size),
			Type:         string(m.MemoryDeviceType),
			SpeedMHz:     int32(m.OperatingSpeedMhz),
			Manufacturer: clean(m.Manufacturer),
			SerialNumber: clean(m.SerialNumber),
			PartNumber:   clean(m.PartNumber),
		})
	}
	if total > 0 {
		inv.Memory.Total = bytesQuantity(total)
		inv.Memory.Modules = int32(len(inv.MemoryModules))
	}
}

func addDrives(inv *metalv1alpha1.Inventory, storage []*redfish.Storage) {
	var total int64
	for _, s := range storage {
		if len(privateLinks(s, "drives")) > maxInventoryMembers {
			continue // skipped as a list that fails to read is
		}
		drives, err := s.Drives()
		if err != nil {
			continue
		}
		for _, d := range drives {
			if d.Status.State == common.AbsentState {
				continue
			}
			total += d.CapacityBytes
			inv.Storage = append(inv.Storage, metalv1alpha1.StorageDevice{
				Name:         d.ID,
				Model:        clean(d.Model),
				Vendor:       clean(d.Manufacturer),
				SerialNumber: clean(d.SerialNumber),
				Size:         bytesQuantity(d.CapacityBytes),
				Type:         driveType(d),
				Controller:   string(d.Protocol),
			})
		}
	}
	if total > 0 {
		inv.TotalStorage = bytesQuantity(total)
	}
}

func driveType(d *redfish.Drive) string {
	switch {
	case d.Protocol == common.NVMeProtocol:
		return "NVMe"
	case d.MediaType == redfish.SSDMediaType:
		return "SSD"
	case d.MediaType == redfish.HDDMediaType:
		return "HDD"
	default:
		return "Unknown"
	}
}

func addNICs(inv *metalv1alpha1.Inventory, nics []*redfish.EthernetInterface) {
	for _, n := range nics {
		mac := strings.ToLower(firstNonEmpty(n.PermanentMACAddress, n.MACAddress))
		if mac == "" {
			continue // HPE may omit both; a NIC without a MAC cannot be matched to anything
		}
		link := metalv1alpha1.LinkUnknown
		switch n.LinkStatus {
		case redfish.LinkUpLinkStatus:
			link = metalv1alpha1.LinkUp
		case redfish.LinkDownLinkStatus, redfish.NoLinkLinkStatus:
			link = metalv1alpha1.LinkDown
		}
		inv.NetworkInterfaces = append(inv.NetworkInterfaces, metalv1alpha1.NetworkInterface{
			Name:       n.ID,
			MACAddress: mac,
			SpeedMbps:  int32(n.SpeedMbps),
			Link:       link,
		})
	}
}

func bytesQuantity(n int64) *resource.Quantity {
	return resource.NewQuantity(n, resource.BinarySI)
}

func firstNonEmpty(values ...string) string {
	for _, v := range values {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}

// sortInventory orders every list by its natural key: gofish fetches collection members
// concurrently, and an inventory that reorders itself on every read would rewrite the status.
func sortInventory(inv *metalv1alpha1.Inventory) {
	slices.SortFunc(inv.Processors, func(a, b metalv1alpha1.Processor) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(inv.MemoryModules, func(a, b metalv1alpha1.MemoryModule) int { return strings.Compare(a.Locator, b.Locator) })
	slices.SortFunc(inv.Storage, func(a, b metalv1alpha1.StorageDevice) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(inv.NetworkInterfaces, func(a, b metalv1alpha1.NetworkInterface) int { return strings.Compare(a.Name, b.Name) })
}
