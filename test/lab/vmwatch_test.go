package lab

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBootStage: the console lines of a network boot (iPXE, or under Secure Boot shim and
// GRUB), of a virtual-media boot (SeaBIOS and isolinux, OVMF and GRUB) and of an HTTP boot (of
// iPXE, or of the ISO by URI), as the lab's VMs print them, each read as its stage.
func TestBootStage(t *testing.T) {
	for line, want := range map[string]string{
		">>Start PXE over IPv4.":                         "firmware PXE",
		"Configuring (net0 52:54:00:1f:00:00)...... ok":  "iPXE: DHCP",
		"http://10.213.1.1:8080/artifacts/vmlinuz... ok": "iPXE: loading kernel + initramfs over HTTP",
		"Booting from DVD/CD...":                         "firmware: CD (virtual media)",
		`BdsDxe: loading Boot0001 "UEFI QEMU DVD-ROM QM00005 " from PciRoot(0x0)/Pci(0x1F,0x2)/Sata(0x2,0xFFFF,0x0)`:                          "firmware: CD (virtual media)",
		"ISOLINUX 6.04 20200816 ETCD Copyright (C) 1994-2015 H. Peter Anvin et al":                                                            "isolinux",
		"\x1b[0m\x1b[30m\x1b[47mWelcome to GRUB!":                                                                                             "GRUB",
		"[    0.000000] Linux version 6.1.0-56-amd64 (debian-kernel@lists.debian.org)":                                                        "kernel",
		"ironfleet-init: ignition from the boot media":                                                                                        "probe: ignition from the boot media",
		"ironfleet-init: stage=NetworkUp eth1 static 10.213.1.51/24 on eth1":                                                                  "probe: NetworkUp",
		"Booting from Hard Disk...":                                                                                                           "",
		"  NBP filename is shimx64.efi":                                                                                                       "firmware PXE: shim (the signed chain) over TFTP",
		"Fetching Netboot Image grubx64.efi":                                                                                                  "shim: GRUB over TFTP",
		"Ironfleet: booting the metalprobe (discovery) for server x over the signed chain":                                                    "GRUB: kernel + initramfs over TFTP",
		"[    0.000000] secureboot: Secure boot enabled":                                                                                      "kernel: Secure Boot enforced",
		"  Station IP address is 10.213.2.184":                                                                                                "firmware: DHCP",
		"  URI: http://10.213.2.1:8080/loaders/snponly.efi":                                                                                   "firmware HTTP boot: loading iPXE over HTTP",
		"  URI: http://10.213.2.1:8080/boot/t0ken/probe.iso":                                                                                  "firmware HTTP boot: loading the ISO over HTTP (the URI its BMC set)",
		`BdsDxe: starting Boot0F00 "Ironfleet HTTP boot" from Uri(http://10.213.2.1:8080/boot/t0ken/probe.iso)`:                               "firmware: booting the ISO from a RAM disk",
		`BdsDxe: starting Boot0003 "UEFI HTTPv4 (MAC:5254001F0003)" from PciRoot(0x0)/Pci(0x2,0x0)/MAC(5254001F0003,0x1)/IPv4(0.0.0.0)/Uri()`: "",
	} {
		assert.Equal(t, want, BootStage(line), "%q", line)
	}
}
