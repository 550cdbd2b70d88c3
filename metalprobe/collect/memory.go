package collect

import (
	"context"
	"fmt"

	"github.com/jaypipes/ghw"
	"k8s.io/apimachinery/pkg/api/resource"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// memory fills installed and usable memory (ghw). Usable is /proc/meminfo's MemTotal; total
// is the online blocks in /sys/devices/system/memory, else the kernel's boot line in
// /var/log/syslog, else (ghw's fallback) the usable amount, which is then noted.
// ghw reads DIMM modules only on Windows, so on Linux MemoryModules stay empty.
func (c *collector) memory(_ context.Context, rep *report.Report) error {
	info, err := ghw.Memory(c.ghwOptions()...)
	if err != nil {
		return fmt.Errorf("reading /proc/meminfo: %w", err)
	}
	inv := &rep.Inventory
	if info.TotalPhysicalBytes > 0 {
		inv.Memory.Total = bytesQuantity(info.TotalPhysicalBytes)
	}
	if info.TotalUsableBytes > 0 {
		inv.Memory.Usable = bytesQuantity(info.TotalUsableBytes)
	}
	if info.TotalPhysicalBytes == info.TotalUsableBytes {
		c.note("memory: installed memory unknown (no /sys/devices/system/memory or boot log); total is the usable amount")
	}
	for _, m := range info.Modules {
		if m == nil {
			continue
		}
		locator := known(m.Location)
		if locator == "" {
			locator = known(m.Label)
		}
		module := metalv1alpha1.MemoryModule{
			Locator:      locator,
			Manufacturer: known(m.Vendor),
			SerialNumber: known(m.SerialNumber),
		}
		if m.SizeBytes > 0 {
			module.Size = bytesQuantity(m.SizeBytes)
		}
		inv.MemoryModules = append(inv.MemoryModules, module)
	}
	inv.Memory.Modules = int32(len(inv.MemoryModules))
	return nil
}

// bytesQuantity is a byte count as the API stores sizes: binary SI (Ki, Mi, Gi, ...).
func bytesQuantity(n int64) *resource.Quantity {
	return resource.NewQuantity(n, resource.BinarySI)
}
