package bmcsim

import (
	"fmt"
	"strings"
)

// DefaultSystem builds a realistic system that varies with i, so a fleet exercises more
// than one shape: even i is a small single-socket box, odd i a dual-socket box with NVMe
// drives, and every fourth (i%4 == 3) also carries two GPUs. UUID, serials and MACs are
// derived from i: deterministic across runs, distinct across systems. Id, Manufacturer,
// Model and BIOSVersion are left empty for the BMC's profile to fill.
func DefaultSystem(i int) SystemSpec {
	spec := SystemSpec{
		UUID:         hashUUID(fmt.Sprintf("ironfleet-bmcsim-system-%d", i)),
		SerialNumber: fmt.Sprintf("SIM%07d", i),
		PowerState:   "Off",
	}
	serial := func(kind string, j int) string {
		return strings.ToUpper(strings.ReplaceAll(hashUUID(fmt.Sprintf("%s-%d-%d", kind, i, j)), "-", "")[:12])
	}
	mac := func(j int) string {
		return fmt.Sprintf("02:1f:%02x:%02x:%02x:%02x", (i>>16)&0xff, (i>>8)&0xff, i&0xff, j)
	}
	nic := func(j, speed int, up bool) NIC {
		return NIC{ID: fmt.Sprintf("NIC%d", j+1), MACAddress: mac(j), SpeedMbps: speed, LinkUp: up}
	}
	dimms := func(n, gib int, part string) []DIMM {
		out := make([]DIMM, n)
		for j := range out {
			out[j] = DIMM{
				ID: fmt.Sprintf("DIMM%d", j+1), CapacityMiB: gib * 1024, MemoryDeviceType: "DDR4", OperatingSpeedMhz: 3200,
				Manufacturer: []string{"Samsung", "SK Hynix"}[j%2], SerialNumber: serial("dimm", j), PartNumber: part,
			}
		}
		return out
	}
	nvme := func(j int, bytes int64, model string) Drive {
		return Drive{
			ID: fmt.Sprintf("Disk%d", j+1), Name: fmt.Sprintf("NVMe SSD %d", j+1), Model: model, Manufacturer: "Samsung",
			SerialNumber: serial("drive", j), CapacityBytes: bytes, MediaType: "SSD", Protocol: "NVMe",
		}
	}

	if i%2 == 0 {
		spec.SKU = "SIM-1S"
		spec.Processors = []Processor{{ID: "CPU1", ProcessorType: "CPU", Manufacturer: "Intel(R) Corporation",
			Model: "Intel(R) Xeon(R) E-2388G CPU @ 3.20GHz", TotalCores: 8, TotalThreads: 16, MaxSpeedMHz: 5100}}
		spec.Memory = dimms(4, 16, "M391A2G43BB2-CWE")
		spec.Drives = []Drive{nvme(0, 960_197_124_096, "SAMSUNG MZQL2960HCJR-00A07")}
		if i%4 == 2 {
			spec.Drives = append(spec.Drives, Drive{ID: "Disk2", Name: "SATA HDD 2", Model: "ST4000NM000A-2HZ100",
				Manufacturer: "Seagate", SerialNumber: serial("drive", 1), CapacityBytes: 4_000_787_030_016, MediaType: "HDD", Protocol: "SATA"})
		}
		spec.NICs = []NIC{nic(0, 10000, true), nic(1, 10000, false)}
		return spec
	}

	spec.SKU = "SIM-2S"
	cpu := func(j int) Processor {
		return Processor{ID: fmt.Sprintf("CPU%d", j+1), ProcessorType: "CPU", Manufacturer: "Intel(R) Corporation",
			Model: "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", TotalCores: 32, TotalThreads: 64, MaxSpeedMHz: 3200}
	}
	spec.Processors = []Processor{cpu(0), cpu(1)}
	spec.Memory = dimms(16, 32, "M393A4K40EB3-CWE")
	for j := range 4 {
		spec.Drives = append(spec.Drives, nvme(j, 3_840_755_982_336, "SAMSUNG MZQL23T8HCLS-00A07"))
	}
	spec.NICs = []NIC{nic(0, 25000, true), nic(1, 25000, true), nic(2, 1000, true), nic(3, 25000, false)}
	if i%4 == 3 {
		spec.SKU = "SIM-2S-GPU"
		for j := range 2 {
			spec.Processors = append(spec.Processors, Processor{ID: fmt.Sprintf("GPU%d", j+1), ProcessorType: "GPU",
				Manufacturer: "NVIDIA", Model: "NVIDIA H100 80GB HBM3", TotalCores: 16896, MaxSpeedMHz: 1980})
		}
		spec.NICs = spec.NICs[:3]
	}
	return spec
}
