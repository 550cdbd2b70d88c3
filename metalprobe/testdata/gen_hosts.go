//go:build ignore

package main

// The hosts the fixture trees describe. Their facts are restated by hand in
// hosts/<name>/expected.json; change both together.

const (
	xeonFlags = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand lahf_lm abm avx2 avx512f avx512dq avx512bw avx512vl avx512_vnni"
	vmFlags   = "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss syscall nx pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology cpuid pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt aes xsave avx f16c rdrand hypervisor lahf_lm abm avx2 avx512f"
)

func hosts() []host { return []host{smallVM(), dualSocket(), storage1U()} }

// smallVM is a QEMU/KVM guest: 1 socket × 2 cores, 4 GiB, one virtio disk (plus the probe's
// own squashfs on loop0, which is virtual), one virtio NIC that is not itself a PCI function.
func smallVM() host {
	return host{
		name: "small-vm",
		arch: "x86_64",
		cpu: cpuSpec{vendor: "GenuineIntel", model: "Intel Xeon Processor (Icelake)", family: 6, modelNum: 106,
			sockets: 1, cores: 2, threads: 1, mhz: "2593.906", flags: vmFlags},
		mem: memSpec{totalKB: 4026640, blockSize: 128 << 20, blocks: 32},
		disks: []disk{
			{name: "vda", major: 252, minor: 0, sectors: 83886080, rotational: true, vendor: "0x1af4",
				udev: []string{"ID_SERIAL=ironfleet-smallvm-root", "ID_PATH=pci-0000:00:04.0", "ID_PATH_TAG=pci-0000_00_04_0"}},
			{name: "loop0", major: 7, minor: 0, sectors: 1310720, virtual: true},
		},
		pci: []pciFn{
			{addr: "0000:00:00.0", vendor: 0x8086, device: 0x29c0, subVendor: 0x1af4, subDevice: 0x1100, class: 0x060000},
			{addr: "0000:00:01.0", vendor: 0x1234, device: 0x1111, subVendor: 0x1af4, subDevice: 0x1100, class: 0x030000, rev: 2, driver: "bochs-drm"},
			{addr: "0000:00:03.0", vendor: 0x1af4, device: 0x1000, subVendor: 0x1af4, subDevice: 0x0001, class: 0x020000, driver: "virtio-pci"},
			{addr: "0000:00:04.0", vendor: 0x1af4, device: 0x1001, subVendor: 0x1af4, subDevice: 0x0002, class: 0x010000, driver: "virtio-pci"},
			{addr: "0000:00:1f.0", vendor: 0x8086, device: 0x2918, subVendor: 0x1af4, subDevice: 0x1100, class: 0x060100, rev: 2, driver: "lpc_ich"},
		},
		nics: []nic{
			{name: "lo", mac: "00:00:00:00:00:00", operstate: "unknown", virtual: true},
			{name: "eth0", mac: "52:54:00:12:34:56", speed: "-1", operstate: "up", pci: "0000:00:03.0", virtio: "virtio0"},
		},
		dmi: map[string]string{
			"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)", "product_version": "pc-q35-8.2",
			"product_family": "", "product_serial": "", "product_sku": "",
			"product_uuid": "5f3c9b7e-2a41-4d8e-9c1b-7e0f4a6d2b31",
			"board_vendor": "", "board_name": "", "board_version": "", "board_serial": "", "board_asset_tag": "",
			"chassis_vendor": "QEMU", "chassis_type": "1", "chassis_version": "pc-q35-8.2", "chassis_serial": "",
			"chassis_asset_tag": "",
			"bios_vendor":       "EDK II", "bios_version": "edk2-stable202302-for-qemu", "bios_date": "02/06/2015",
		},
	}
}

// dualSocket is a 1U Dell with 2 × 16-core Xeons (HT), 256 GiB, four NVMe drives of four
// sizes and a SATA boot SSD, a dual-port X710 and a dual-port ConnectX-5, two of them cabled
// to switches that speak LLDP, and a pci.ids so devices get names.
func dualSocket() host {
	nvme := func(n, minor int, sectors int64, model, serial, eui, pci string) disk {
		return disk{name: "nvme" + itoa(n) + "n1", major: 259, minor: minor, sectors: sectors, udev: []string{
			"ID_MODEL=" + model, "ID_SERIAL_SHORT=" + serial, "ID_SERIAL=" + model + "_" + serial,
			"ID_WWN=" + eui, "ID_PATH=pci-" + pci + "-nvme-1", "ID_REVISION=GDC5602Q"}}
	}
	return host{
		name: "dual-socket",
		arch: "x86_64",
		cpu: cpuSpec{vendor: "GenuineIntel", model: "Intel(R) Xeon(R) Gold 6226R CPU @ 2.90GHz", family: 6, modelNum: 85,
			step: 7, sockets: 2, cores: 16, threads: 2, mhz: "2900.000", maxKHz: 3900000, flags: xeonFlags},
		mem: memSpec{totalKB: 263578468, blockSize: 2 << 30, blocks: 128},
		disks: []disk{
			nvme(0, 0, 7501476528, "SAMSUNG MZQL23T8HCLS-00A07", "S64HNE0R500101", "eui.36344830525001010025384500000001", "0000:5e:00.0"),
			nvme(1, 1, 3750748848, "SAMSUNG MZQL21T9HCJR-00A07", "S64GNE0R600202", "eui.36344730526002020025384500000001", "0000:5f:00.0"),
			nvme(2, 2, 15002931888, "SAMSUNG MZQL27T6HBLA-00A07", "S6CKNE0T700303", "eui.36434b30547003030025384500000001", "0000:d8:00.0"),
			nvme(3, 3, 1875385008, "SAMSUNG MZQL2960HCJR-00A07", "S64FNE0R800404", "eui.36344630528004040025384500000001", "0000:d9:00.0"),
			{name: "sda", major: 8, minor: 0, sectors: 937703088, vendor: "ATA", physicalBlockSize: 4096, udev: []string{
				"ID_BUS=ata", "ID_MODEL=INTEL_SSDSC2KB480G8", "ID_SERIAL_SHORT=PHYF912300AB480BGN",
				"ID_SERIAL=INTEL_SSDSC2KB480G8_PHYF912300AB480BGN", "ID_WWN=0x55cd2e415a1b2c3d",
				"ID_WWN_WITH_EXTENSION=0x55cd2e415a1b2c3d", "ID_PATH=pci-0000:00:17.0-ata-1"}},
		},
		pci: []pciFn{
			{addr: "0000:00:00.0", vendor: 0x8086, device: 0x2020, subVendor: 0x1028, subDevice: 0x0716, class: 0x060000, rev: 7},
			{addr: "0000:00:17.0", vendor: 0x8086, device: 0xa182, subVendor: 0x1028, subDevice: 0x0716, class: 0x010601, rev: 9, driver: "ahci"},
			{addr: "0000:03:00.0", vendor: 0x1a03, device: 0x2000, subVendor: 0x1028, subDevice: 0x0716, class: 0x030000, rev: 0x41, driver: "ast"},
			{addr: "0000:18:00.0", vendor: 0x8086, device: 0x1572, subVendor: 0x8086, subDevice: 0x0006, class: 0x020000, rev: 2, driver: "i40e"},
			{addr: "0000:18:00.1", vendor: 0x8086, device: 0x1572, subVendor: 0x8086, subDevice: 0x0006, class: 0x020000, rev: 2, driver: "i40e"},
			{addr: "0000:5e:00.0", vendor: 0x144d, device: 0xa80a, subVendor: 0x144d, subDevice: 0xa813, class: 0x010802, driver: "nvme"},
			{addr: "0000:5f:00.0", vendor: 0x144d, device: 0xa80a, subVendor: 0x144d, subDevice: 0xa813, class: 0x010802, driver: "nvme"},
			{addr: "0000:86:00.0", vendor: 0x15b3, device: 0x1017, subVendor: 0x15b3, subDevice: 0x0007, class: 0x020000, driver: "mlx5_core"},
			{addr: "0000:86:00.1", vendor: 0x15b3, device: 0x1017, subVendor: 0x15b3, subDevice: 0x0007, class: 0x020000, driver: "mlx5_core"},
			{addr: "0000:d8:00.0", vendor: 0x144d, device: 0xa80a, subVendor: 0x144d, subDevice: 0xa813, class: 0x010802, driver: "nvme"},
			{addr: "0000:d9:00.0", vendor: 0x144d, device: 0xa80a, subVendor: 0x144d, subDevice: 0xa813, class: 0x010802, driver: "nvme"},
		},
		nics: []nic{
			{name: "lo", mac: "00:00:00:00:00:00", operstate: "unknown", virtual: true},
			{name: "eno1", mac: "3c:fd:fe:a1:b2:c0", speed: "10000", operstate: "up", pci: "0000:18:00.0"},
			{name: "eno2", mac: "3c:fd:fe:a1:b2:c1", speed: "-1", operstate: "down", pci: "0000:18:00.1"},
			{name: "ens2f0np0", mac: "b8:59:9f:c4:d5:e0", speed: "25000", operstate: "up", pci: "0000:86:00.0"},
			{name: "ens2f1np1", mac: "b8:59:9f:c4:d5:e1", speed: "25000", operstate: "up", pci: "0000:86:00.1"},
		},
		dmi: map[string]string{
			"sys_vendor": "Dell Inc.", "product_name": "PowerEdge R640", "product_family": "PowerEdge",
			"product_version": "", "product_serial": "8XK4Q53", "product_sku": "SKU=0716;ModelName=PowerEdge R640",
			"product_uuid": "4c4c4544-0058-4b10-8034-b8c04f513533",
			"board_vendor": "Dell Inc.", "board_name": "0H28RR", "board_version": "A06",
			"board_serial": ".8XK4Q53.CNIVC0098B0123.", "board_asset_tag": "",
			"chassis_vendor": "Dell Inc.", "chassis_type": "23", "chassis_version": "",
			"chassis_serial": "8XK4Q53", "chassis_asset_tag": "RACK4-U07",
			"bios_vendor": "Dell Inc.", "bios_version": "2.19.1", "bios_date": "06/20/2023",
		},
		lldp:   dualSocketLLDP,
		pciIDs: dualSocketPCIIDs,
	}
}

// storage1U is a Supermicro storage node: 1 socket × 8 cores (HT), 64 GiB known only from the
// kernel's boot line in /var/log/syslog, four SAS HDDs behind an HBA, a SATA boot SSD and a
// removable USB stick (not counted in TotalStorage), two onboard NICs (one with a MAC set by
// userspace), docker0 (virtual), no pci.ids, an lldpctl.json with no neighbours, and two
// deliberately upper-case values (one MAC, the UUID) that the probe must lower-case.
func storage1U() host {
	sas := func(n int, letter string) disk {
		serial := "ZA1B2C0" + itoa(n+1)
		wwn := "0x5000c500a1b2c30" + itoa(n+1)
		return disk{name: "sd" + letter, major: 8, minor: 16 * n, sectors: 15628053168, rotational: true,
			vendor: "SEAGATE", physicalBlockSize: 4096, udev: []string{
				"ID_BUS=scsi", "ID_VENDOR=SEAGATE", "ID_MODEL=ST8000NM001A", "SCSI_IDENT_SERIAL=" + serial,
				"ID_SCSI_SERIAL=" + serial, "ID_SERIAL=3" + wwn[2:], "ID_SERIAL_SHORT=" + wwn[2:],
				"ID_WWN=" + wwn, "ID_WWN_WITH_EXTENSION=" + wwn,
				"ID_PATH=pci-0000:18:00.0-sas-phy" + itoa(n) + "-lun-0"}}
	}
	return host{
		name: "storage-1u",
		arch: "x86_64",
		cpu: cpuSpec{vendor: "GenuineIntel", model: "Intel(R) Xeon(R) Silver 4208 CPU @ 2.10GHz", family: 6, modelNum: 85,
			step: 7, sockets: 1, cores: 8, threads: 2, mhz: "2100.000", maxKHz: 3200000, flags: xeonFlags},
		mem: memSpec{totalKB: 65686340, syslogLine: "Mar  1 09:00:01 stor07 kernel: [    0.000000] Memory: 65521380K/67108864K available " +
			"(16384K kernel code, 3145K rwdata, 11244K rodata, 4536K init, 4900K bss, 1587224K reserved, 0K cma-reserved)"},
		disks: []disk{
			sas(0, "a"), sas(1, "b"), sas(2, "c"), sas(3, "d"),
			{name: "sde", major: 8, minor: 64, sectors: 468862128, vendor: "ATA", physicalBlockSize: 4096, udev: []string{
				"ID_BUS=ata", "ID_MODEL=Micron_5300_MTFDDAK240TDS", "ID_SERIAL_SHORT=2001262A1B2C",
				"ID_SERIAL=Micron_5300_MTFDDAK240TDS_2001262A1B2C", "ID_WWN=0x500a07512a1b2c3d",
				"ID_WWN_WITH_EXTENSION=0x500a07512a1b2c3d", "ID_PATH=pci-0000:00:17.0-ata-1"}},
			{name: "sdf", major: 8, minor: 80, sectors: 30031872, removable: true, vendor: "SanDisk", udev: []string{
				"ID_BUS=usb", "ID_MODEL=Ultra_Fit", "ID_SERIAL_SHORT=4C530001230512113245",
				"ID_SERIAL=SanDisk_Ultra_Fit_4C530001230512113245-0:0",
				"ID_PATH=pci-0000:00:14.0-usb-0:3:1.0-scsi-0:0:0:0"}},
		},
		pci: []pciFn{
			{addr: "0000:00:00.0", vendor: 0x8086, device: 0x2020, subVendor: 0x15d9, subDevice: 0x095d, class: 0x060000, rev: 7},
			{addr: "0000:00:14.0", vendor: 0x8086, device: 0xa1af, subVendor: 0x15d9, subDevice: 0x095d, class: 0x0c0330, rev: 9, driver: "xhci_hcd"},
			{addr: "0000:00:17.0", vendor: 0x8086, device: 0xa182, subVendor: 0x15d9, subDevice: 0x095d, class: 0x010601, rev: 9, driver: "ahci"},
			{addr: "0000:03:00.0", vendor: 0x1a03, device: 0x2000, subVendor: 0x15d9, subDevice: 0x095d, class: 0x030000, rev: 0x41, driver: "ast"},
			{addr: "0000:18:00.0", vendor: 0x1000, device: 0x0097, subVendor: 0x15d9, subDevice: 0x0808, class: 0x010700, rev: 2, driver: "mpt3sas"},
			{addr: "0000:19:00.0", vendor: 0x8086, device: 0x1521, subVendor: 0x15d9, subDevice: 0x1521, class: 0x020000, rev: 1, driver: "igb"},
			{addr: "0000:19:00.1", vendor: 0x8086, device: 0x1521, subVendor: 0x15d9, subDevice: 0x1521, class: 0x020000, rev: 1, driver: "igb"},
		},
		nics: []nic{
			{name: "lo", mac: "00:00:00:00:00:00", operstate: "unknown", virtual: true},
			{name: "docker0", mac: "02:42:7e:0a:11:22", assignType: 3, operstate: "down", virtual: true},
			{name: "eno1", mac: "AC:1F:6B:2D:4E:80", speed: "1000", operstate: "up", pci: "0000:19:00.0"},
			{name: "eno2", mac: "ac:1f:6b:2d:4e:81", assignType: 3, speed: "-1", operstate: "down", pci: "0000:19:00.1"},
		},
		dmi: map[string]string{
			"sys_vendor": "Supermicro", "product_name": "SYS-1029U-E1CRTP", "product_family": "SMC X11",
			"product_version": "0123456789", "product_serial": "S411795X9A12345", "product_sku": "To Be Filled By O.E.M.",
			"product_uuid": "00000000-0000-0000-0000-AC1F6B2D4E80",
			"board_vendor": "Supermicro", "board_name": "X11DPU", "board_version": "1.10",
			"board_serial": "ZM19AS012345", "board_asset_tag": "",
			"chassis_vendor": "Supermicro", "chassis_type": "17", "chassis_version": "0123456789",
			"chassis_serial": "C1160LI12A34567", "chassis_asset_tag": "",
			"bios_vendor": "American Megatrends Inc.", "bios_version": "3.8a", "bios_date": "01/19/2023",
		},
		lldp: "{\n  \"lldp\": {\n\n  }\n}\n",
	}
}

func itoa(n int) string { return string(rune('0' + n)) }
