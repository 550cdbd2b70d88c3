package v1alpha1

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Where an Inventory came from (Inventory.Source).
const (
	// InventorySourceRedfish: read out-of-band, through the BMC.
	InventorySourceRedfish = "Redfish"
	// InventorySourceProbe: reported in-band, by metalprobe.
	InventorySourceProbe = "Probe"
)

// Inventory is a server's hardware as discovered, in-band by metalprobe or out-of-band through
// the BMC. Nothing a probe reports is thrown away: every field it sends has a home here.
type Inventory struct {
	// Source says where the inventory came from: Redfish (BMC) or Probe (in-band report).
	// +kubebuilder:validation:Enum=Redfish;Probe
	// +optional
	Source string `json:"source,omitempty"`
	// ReportedAt is when the inventory was collected.
	// +optional
	ReportedAt *metav1.Time `json:"reportedAt,omitempty"`
	// CollectorVersion identifies the probe build (or BMC firmware) that collected it.
	// +optional
	CollectorVersion string `json:"collectorVersion,omitempty"`
	// Warnings name the collectors that failed; the rest of the inventory is still valid.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Warnings []string `json:"warnings,omitempty"`

	// CPU summarises the processors.
	// +optional
	CPU CPUSummary `json:"cpu,omitempty"`
	// +listType=atomic
	// +optional
	Processors []Processor `json:"processors,omitempty"`

	// Memory summarises the installed memory.
	// +optional
	Memory MemorySummary `json:"memory,omitempty"`
	// +listType=atomic
	// +optional
	MemoryModules []MemoryModule `json:"memoryModules,omitempty"`

	// TotalStorage is the sum of the sizes of Storage.
	// +optional
	TotalStorage *resource.Quantity `json:"totalStorage,omitempty"`
	// +listType=atomic
	// +optional
	Storage []StorageDevice `json:"storage,omitempty"`

	// +listType=atomic
	// +optional
	NetworkInterfaces []NetworkInterface `json:"networkInterfaces,omitempty"`

	// +listType=atomic
	// +optional
	PCIDevices []PCIDevice `json:"pciDevices,omitempty"`

	// +optional
	DMI *DMI `json:"dmi,omitempty"`

	// BootMode is how the firmware booted the collector: the probe reads it from the
	// firmware's variables (UEFI or Legacy, and the SecureBoot variable), a BMC from its boot
	// settings.
	// +optional
	BootMode BootMode `json:"bootMode,omitempty"`
}

// CPUSummary counts processors the way schedulers and claims compare them.
type CPUSummary struct {
	// Sockets is the number of physical CPU packages (GPUs and accelerators excluded).
	// +optional
	Sockets int32 `json:"sockets,omitempty"`
	// Cores is the total number of physical cores.
	// +optional
	Cores int32 `json:"cores,omitempty"`
	// Threads is the total number of hardware threads.
	// +optional
	Threads int32 `json:"threads,omitempty"`
	// Model of the first CPU package.
	// +optional
	Model string `json:"model,omitempty"`
}

// Processor is one CPU package.
type Processor struct {
	// +optional
	ID string `json:"id,omitempty"`
	// Type is CPU, GPU, FPGA, Accelerator, … as the source reports it.
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	Architecture string `json:"architecture,omitempty"`
	// +optional
	Cores int32 `json:"cores,omitempty"`
	// +optional
	Threads int32 `json:"threads,omitempty"`
	// +optional
	MaxSpeedMHz int32 `json:"maxSpeedMHz,omitempty"`
	// +listType=atomic
	// +optional
	Capabilities []string `json:"capabilities,omitempty"`
}

// MemorySummary is the installed and usable memory.
type MemorySummary struct {
	// Total physical memory installed.
	// +optional
	Total *resource.Quantity `json:"total,omitempty"`
	// Usable memory as seen by the operating system.
	// +optional
	Usable *resource.Quantity `json:"usable,omitempty"`
	// Modules is the number of populated DIMM slots.
	// +optional
	Modules int32 `json:"modules,omitempty"`
}

// MemoryModule is one populated DIMM slot.
type MemoryModule struct {
	// +optional
	Locator string `json:"locator,omitempty"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	SpeedMHz int32 `json:"speedMHz,omitempty"`
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	PartNumber string `json:"partNumber,omitempty"`
}

// StorageDevice is one block device.
type StorageDevice struct {
	// Name is the kernel name (sda, nvme0n1) or the BMC's drive Id.
	Name string `json:"name"`
	// +optional
	Model string `json:"model,omitempty"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	WWN string `json:"wwn,omitempty"`
	// +optional
	Size *resource.Quantity `json:"size,omitempty"`
	// Type is HDD, SSD, NVMe, or Unknown.
	// +optional
	Type string `json:"type,omitempty"`
	// +optional
	Rotational bool `json:"rotational,omitempty"`
	// +optional
	Removable bool `json:"removable,omitempty"`
	// Controller is the bus the device hangs off (SATA, SAS, NVMe, SCSI, virtio, …).
	// +optional
	Controller string `json:"controller,omitempty"`
	// BusPath is the stable device path (by-path), for wipes and root-device hints.
	// +optional
	BusPath string `json:"busPath,omitempty"`
}

// NoDataOn says why a device of a probe's inventory can hold no data of a tenant's, and so is
// neither wiped nor asked to be, or "" when it can: an optical drive (kernel name sr<N>: a CD,
// the probe's own virtual-media ISO among them, is read-only to the host), or a drive with no
// medium in it (size 0: a card reader without a card). Removable devices with a medium (USB
// sticks, SD modules) are disks like the others. A medium put in later changes the device's
// size, and so the server's hardware (docs/deletion.md).
func NoDataOn(d StorageDevice) string {
	if OpticalDrive(d) {
		return "optical drive"
	}
	if d.Size == nil || d.Size.Sign() <= 0 {
		return "no medium"
	}
	return ""
}

// OpticalDrive says whether a device is a CD/DVD drive (kernel name sr<N>).
func OpticalDrive(d StorageDevice) bool { return opticalName.MatchString(d.Name) }

var opticalName = regexp.MustCompile(`^sr[0-9]+$`)

// LinkState of a network port.
// +kubebuilder:validation:Enum=Up;Down;Unknown
type LinkState string

const (
	LinkUp      LinkState = "Up"
	LinkDown    LinkState = "Down"
	LinkUnknown LinkState = "Unknown"
)

// NetworkInterface is one NIC port.
type NetworkInterface struct {
	// +optional
	Name       string `json:"name,omitempty"`
	MACAddress string `json:"macAddress"`
	// +optional
	SpeedMbps int32 `json:"speedMbps,omitempty"`
	// +optional
	Link LinkState `json:"link,omitempty"`
	// +optional
	Driver string `json:"driver,omitempty"`
	// +optional
	PCIAddress string `json:"pciAddress,omitempty"`
	// +listType=atomic
	// +optional
	IPAddresses []string `json:"ipAddresses,omitempty"`
	// LLDP is the switch port this NIC is cabled to, when LLDP was heard.
	// +optional
	LLDP *LLDPNeighbor `json:"lldp,omitempty"`
}

// LLDPNeighbor is what the switch on the other end of a cable announced.
type LLDPNeighbor struct {
	// +optional
	ChassisID string `json:"chassisID,omitempty"`
	// +optional
	SystemName string `json:"systemName,omitempty"`
	// +optional
	SystemDescription string `json:"systemDescription,omitempty"`
	// +optional
	PortID string `json:"portID,omitempty"`
	// +optional
	PortDescription string `json:"portDescription,omitempty"`
	// +optional
	VLANID int32 `json:"vlanID,omitempty"`
	// +optional
	ManagementAddress string `json:"managementAddress,omitempty"`
}

// PCIDevice is one PCI function.
type PCIDevice struct {
	// Address is the PCI address, e.g. 0000:3b:00.0.
	Address string `json:"address"`
	// +optional
	VendorID string `json:"vendorID,omitempty"`
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	ProductID string `json:"productID,omitempty"`
	// +optional
	Product string `json:"product,omitempty"`
	// +optional
	Class string `json:"class,omitempty"`
	// +optional
	Subclass string `json:"subclass,omitempty"`
	// +optional
	Driver string `json:"driver,omitempty"`
}

// DMI is the SMBIOS identity of the machine.
type DMI struct {
	// +optional
	System DMISystem `json:"system,omitempty"`
	// +optional
	Baseboard DMIBoard `json:"baseboard,omitempty"`
	// +optional
	Chassis DMIBoard `json:"chassis,omitempty"`
	// +optional
	BIOS DMIBIOS `json:"bios,omitempty"`
}

// DMISystem is SMBIOS type 1.
type DMISystem struct {
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	ProductName string `json:"productName,omitempty"`
	// +optional
	Family string `json:"family,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	SKU string `json:"sku,omitempty"`
	// +optional
	UUID string `json:"uuid,omitempty"`
}

// DMIBoard is SMBIOS type 2 (baseboard) or 3 (chassis).
type DMIBoard struct {
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// +optional
	Product string `json:"product,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	SerialNumber string `json:"serialNumber,omitempty"`
	// +optional
	AssetTag string `json:"assetTag,omitempty"`
}

// DMIBIOS is SMBIOS type 0.
type DMIBIOS struct {
	// +optional
	Vendor string `json:"vendor,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Date string `json:"date,omitempty"`
}

// HardwareSummary is a server's inventory as `kubectl get servers` shows it: cores, and sizes in
// binary units a person reads ("29.3 TiB", not "31490537400Ki").
type HardwareSummary struct {
	// CPUs is the number of physical CPU cores.
	// +optional
	CPUs int32 `json:"cpus,omitempty"`
	// Memory is the installed memory, e.g. "512.0 GiB".
	// +optional
	Memory string `json:"memory,omitempty"`
	// Storage is the sum of the disks' sizes, e.g. "29.3 TiB".
	// +optional
	Storage string `json:"storage,omitempty"`
}

// SummarizeInventory is the summary of inv; nil for no inventory.
func SummarizeInventory(inv *Inventory) *HardwareSummary {
	if inv == nil {
		return nil
	}
	s := &HardwareSummary{CPUs: inv.CPU.Cores}
	if inv.Memory.Total != nil {
		s.Memory = HumanBytes(inv.Memory.Total.Value())
	}
	if inv.TotalStorage != nil {
		s.Storage = HumanBytes(inv.TotalStorage.Value())
	}
	return s
}

// HumanBytes prints a size in binary units with one decimal ("1.5 GiB"), bytes below 1 KiB.
func HumanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
