package collect

import (
	"context"
	"errors"
	"runtime"
	"strconv"

	"github.com/jaypipes/ghw"
	ghwcpu "github.com/jaypipes/ghw/pkg/cpu"

	metalv1alpha1 "github.com/ironfleet/ironfleet/apis/metal/v1alpha1"
	"github.com/ironfleet/ironfleet/internal/report"
)

// cpu fills the CPU summary and one Processor per package from /proc/cpuinfo and
// /sys/devices/system/cpu (ghw). ghw has no architecture or frequency; those come from
// /proc/sys/kernel/arch and cpufreq/cpuinfo_max_freq under the same root.
func (c *collector) cpu(_ context.Context, rep *report.Report) error {
	info, err := ghw.CPU(c.ghwOptions()...)
	if err != nil {
		return err
	}
	if len(info.Processors) == 0 {
		return errors.New("no processors found in /proc/cpuinfo and /sys/devices/system/cpu")
	}
	arch := c.architecture()
	inv := &rep.Inventory
	for _, p := range info.Processors {
		inv.Processors = append(inv.Processors, metalv1alpha1.Processor{
			ID:           strconv.Itoa(p.ID),
			Type:         "CPU",
			Vendor:       known(p.Vendor),
			Model:        known(p.Model),
			Architecture: arch,
			Cores:        int32(p.TotalCores),
			Threads:      int32(p.TotalHardwareThreads),
			MaxSpeedMHz:  c.maxSpeedMHz(p),
			Capabilities: p.Capabilities,
		})
	}
	inv.CPU = metalv1alpha1.CPUSummary{
		Sockets: int32(len(info.Processors)),
		Cores:   int32(info.TotalCores),
		Threads: int32(info.TotalHardwareThreads),
		Model:   known(info.Processors[0].Model),
	}
	return nil
}

// architecture is the kernel's machine name (uname -m). /proc/sys/kernel/arch has it since
// Linux 6.1; on the live system the probe's own build architecture is the fallback.
func (c *collector) architecture() string {
	if arch := c.readTrimmed("proc", "sys", "kernel", "arch"); arch != "" {
		return arch
	}
	if !c.live {
		return ""
	}
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	default:
		return runtime.GOARCH
	}
}

// maxSpeedMHz reads cpufreq's maximum for the package's first logical processor (kHz in
// sysfs); 0 when the host has no cpufreq (most VMs).
func (c *collector) maxSpeedMHz(p *ghwcpu.Processor) int32 {
	for _, core := range p.Cores {
		for _, lp := range core.LogicalProcessors {
			khz, err := strconv.ParseInt(c.readTrimmed("sys", "devices", "system", "cpu", "cpu"+strconv.Itoa(lp), "cpufreq", "cpuinfo_max_freq"), 10, 64)
			if err == nil && khz > 0 {
				return int32(khz / 1000)
			}
		}
	}
	return 0
}
