package v1alpha1

// BootMethod is how the probe (discovery, install, wipe) is booted on a BMC's servers.
// +kubebuilder:validation:Enum=PXE;VirtualMedia;UefiHttp
type BootMethod string

const (
	// BootMethodPXE network-boots the probe: DHCP, TFTP and iPXE from Ironfleet's boot service.
	BootMethodPXE BootMethod = "PXE"
	// BootMethodVirtualMedia boots the probe from a per-boot ISO the BMC mounts as a virtual
	// CD/DVD over Redfish VirtualMedia: no DHCP, TFTP or PXE on the server's network. The ISO
	// carries the boot's ignition, and with it probeNetwork.
	BootMethodVirtualMedia BootMethod = "VirtualMedia"
	// BootMethodUefiHttp boots the probe by UEFI HTTP boot from a URI the BMC sets (Redfish
	// BootSourceOverrideTarget UefiHttp with HttpBootUri): the server's firmware fetches the
	// boot's ISO from the boot service over HTTP and boots it from a RAM disk, shim and signed
	// GRUB first, so Secure Boot or not. The server's DHCP gives it an address only: no TFTP,
	// no DHCP boot options. A BMC that cannot boot a URI (no UefiHttp target, no HttpBootUri)
	// says so in its HTTPBoot condition, and its servers boot by PXE instead.
	BootMethodUefiHttp BootMethod = "UefiHttp"
)

// ProbeNetwork is a static network configuration for the probe, for networks without DHCP
// (virtual-media boots). Without one the probe asks DHCP for an address.
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !isCIDR(self.address) || !isIP(self.gateway) || cidr(self.address).masked().containsIP(self.gateway)",message="gateway must be inside address's subnet"
// +kubebuilder:validation:XValidation:rule="!has(self.gateway) || !self.address.startsWith(self.gateway + '/')",message="gateway must not be the probe's own address"
type ProbeNetwork struct {
	// InterfaceMAC chooses the NIC by its MAC address (six colon-separated hex octets).
	// Empty: the first NIC with a link.
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$')",message="interfaceMAC must be six colon-separated hex octets, e.g. 3c:ec:ef:01:02:03"
	// +kubebuilder:validation:MaxLength=17
	// +optional
	InterfaceMAC string `json:"interfaceMAC,omitempty"`
	// VLANID tags the probe's traffic with this 802.1Q VLAN (1-4094). 0 or empty: untagged.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4094
	// +optional
	VLANID int32 `json:"vlanID,omitempty"`
	// Address is the probe's IPv4 or IPv6 address with its prefix length, e.g. 10.0.0.21/24.
	// +kubebuilder:validation:MaxLength=49
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="address must be an address with a prefix length, e.g. 10.0.0.21/24"
	Address string `json:"address"`
	// Gateway is the default route's next hop, in Address's subnet. Empty: no default route.
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="gateway must be an IPv4 or IPv6 address"
	// +optional
	Gateway string `json:"gateway,omitempty"`
	// DNS servers the probe resolves names with (at most 3, as resolv.conf takes).
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="self.all(a, isIP(a))",message="every dns entry must be an IP address"
	// +listType=atomic
	// +optional
	DNS []string `json:"dns,omitempty"`
}
