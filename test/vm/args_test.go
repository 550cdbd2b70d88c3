package vm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/bmcsim"
	"github.com/ironfleet/ironfleet/test/vm"
)

func argvLayout(def vm.Definition) vm.Layout {
	l := vm.Layout{QMPSocket: "/run/x/qmp.sock", ConsoleLog: "/var/x/console.log", FirmwareVars: "/var/x/OVMF_VARS.fd"}
	for i := range def.Disks {
		l.DiskFiles = append(l.DiskFiles, "/var/x/disk"+string(rune('0'+i))+".raw")
	}
	for i := range def.NICs {
		l.NICFDs = append(l.NICFDs, 3+i)
	}
	return l
}

// values lists the values following each occurrence of flag, e.g. every "-device".
func values(args []string, flag string) []string {
	var out []string
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

func twoNICDefinition(fw vm.Firmware) vm.Definition {
	def := testDefinition("argv", fw)
	def.CPUs, def.MemoryMiB = 2, 1536
	def.NICs = append(def.NICs, vm.NIC{Model: vm.E1000, MAC: "52:54:00:AA:00:02"})
	return def
}

func TestArgsForABIOSMachine(t *testing.T) {
	def := twoNICDefinition(vm.BIOS)
	args, err := vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)

	assert.Equal(t, []string{"pc"}, values(args, "-machine"))
	assert.Equal(t, []string{"tcg"}, values(args, "-accel"))
	assert.Equal(t, []string{"max"}, values(args, "-cpu"))
	assert.Equal(t, []string{"2,sockets=1,cores=2,threads=1"}, values(args, "-smp"))
	assert.Equal(t, []string{"1536"}, values(args, "-m"))
	for _, flag := range []string{"-nographic", "-no-user-config", "-nodefaults"} {
		assert.Contains(t, args, flag)
	}
	assert.NotContains(t, strings.Join(args, " "), "kvm", "TCG only: KVM hangs guests here")
	assert.Equal(t, []string{"type=1,manufacturer=Ironfleet,product=QEMU Test Box,serial=IFT-argv,uuid=" + def.SMBIOS.UUID}, values(args, "-smbios"))
	assert.Equal(t, []string{"file,id=console,append=on,path=/var/x/console.log"}, values(args, "-chardev"))
	assert.Equal(t, []string{"chardev:console"}, values(args, "-serial"))
	assert.Equal(t, []string{"unix:/run/x/qmp.sock,server=on,wait=off"}, values(args, "-qmp"))
	assert.Equal(t, []string{"order=n"}, values(args, "-boot"), "SeaBIOS takes the legacy boot order")
	assert.Equal(t, []string{
		"file=/var/x/disk0.raw,format=raw,if=none,id=drive0,discard=unmap",
		"file=/var/x/disk1.raw,format=raw,if=none,id=drive1,discard=unmap",
		"file=/var/x/disk2.raw,format=raw,if=none,id=drive2,discard=unmap",
	}, values(args, "-drive"), "no pflash on BIOS")
	assert.Equal(t, []string{
		"virtio-rng-pci",
		"virtio-blk-pci,id=disk0,drive=drive0,serial=VD-argv",
		"nvme,id=disk1,drive=drive1,serial=NV-argv",
		"ahci,id=sata",
		"ide-hd,id=disk2,bus=sata.0,drive=drive2,serial=SA-argv",
		"virtio-net-pci,speed=10000,duplex=full,id=nic0,netdev=net0,mac=52:54:00:aa:00:01",
		"e1000,id=nic1,netdev=net1,mac=52:54:00:aa:00:02",
	}, values(args, "-device"), "no bootindex on BIOS, and the NICs keep QEMU's iPXE ROM")
	assert.Equal(t, []string{"tap,id=net0,fd=3", "tap,id=net1,fd=4"}, values(args, "-netdev"))

	args, err = vm.Args(def, argvLayout(def), vm.BootDisk)
	require.NoError(t, err)
	assert.Equal(t, []string{"order=c"}, values(args, "-boot"))
}

func TestArgsForAUEFIMachineOrderBootByIndex(t *testing.T) {
	def := twoNICDefinition(vm.UEFI)
	args, err := vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)
	assert.Equal(t, []string{"q35"}, values(args, "-machine"))
	assert.Empty(t, values(args, "-boot"), "OVMF follows bootindex, not -boot")
	drives := values(args, "-drive")
	assert.Equal(t, "if=pflash,format=raw,unit=0,readonly=on,file="+vm.DefaultOVMFCode, drives[0])
	assert.Equal(t, "if=pflash,format=raw,unit=1,file=/var/x/OVMF_VARS.fd", drives[1])

	assert.Equal(t, map[string]string{"nic0": "1", "nic1": "2", "disk0": "3", "disk1": "4", "disk2": "5"}, bootIndexes(args))
	args, err = vm.Args(def, argvLayout(def), vm.BootDisk)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"disk0": "1", "disk1": "2", "disk2": "3", "nic0": "4", "nic1": "5"}, bootIndexes(args))
}

// TestArgsForASecureBootMachine: Debian's Secure Boot OVMF (Microsoft's keys) needs SMM and a
// secure flash; the plain UEFI machine has neither.
func TestArgsForASecureBootMachine(t *testing.T) {
	def := twoNICDefinition(vm.UEFI)
	def.SecureBoot = true
	args, err := vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)
	assert.Equal(t, []string{"q35,smm=on"}, values(args, "-machine"))
	assert.Equal(t, []string{"driver=cfi.pflash01,property=secure,value=on"}, values(args, "-global"))
	assert.Equal(t, "if=pflash,format=raw,unit=0,readonly=on,file="+vm.SecureBootOVMFCode, values(args, "-drive")[0])
	assert.Equal(t, vm.SecureBootOVMFVars, vm.OVMFVarsTemplate(def))

	def.SecureBoot = false
	args, err = vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)
	assert.Empty(t, values(args, "-global"))
	assert.Equal(t, vm.DefaultOVMFVars, vm.OVMFVarsTemplate(def))

	bios := testDefinition("bios", vm.BIOS)
	bios.SecureBoot = true
	_, err = vm.Args(bios, argvLayout(bios), vm.BootNetwork)
	assert.ErrorContains(t, err, "Secure Boot needs UEFI")
}

// TestArgsForAnHTTPBootMachine: OVMF's PXE turned off through its fw_cfg knobs, leaving UEFI
// HTTP boot; only on UEFI.
func TestArgsForAnHTTPBootMachine(t *testing.T) {
	def := twoNICDefinition(vm.UEFI)
	def.HTTPBoot = true
	args, err := vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)
	assert.Equal(t, []string{"name=opt/org.tianocore/IPv4PXESupport,string=n", "name=opt/org.tianocore/IPv6PXESupport,string=n"}, values(args, "-fw_cfg"))
	def.HTTPBoot = false
	args, err = vm.Args(def, argvLayout(def), vm.BootNetwork)
	require.NoError(t, err)
	assert.Empty(t, values(args, "-fw_cfg"))
	bios := testDefinition("bios", vm.BIOS)
	bios.HTTPBoot = true
	_, err = vm.Args(bios, argvLayout(bios), vm.BootNetwork)
	assert.ErrorContains(t, err, "HTTP boot needs UEFI")
}

func TestArgsEscapeCommasInValues(t *testing.T) {
	def := testDefinition("comma", vm.BIOS)
	def.SMBIOS.Manufacturer = "Acme, Inc."
	l := argvLayout(def)
	l.ConsoleLog = "/var/x,y/console.log"
	args, err := vm.Args(def, l, vm.BootDisk)
	require.NoError(t, err)
	assert.Contains(t, values(args, "-smbios")[0], "manufacturer=Acme,, Inc.,")
	assert.Equal(t, "file,id=console,append=on,path=/var/x,,y/console.log", values(args, "-chardev")[0])
}

// TestArgsPublishTheBIOSVersion: a definition's BIOS version becomes an SMBIOS type 0, which
// SeaBIOS and OVMF publish instead of their own; the vendor and date it leaves out are the
// firmware's own, UEFI firmware says it supports UEFI, and commas are escaped. Without a
// version there is no type 0: the firmware publishes its own.
func TestArgsPublishTheBIOSVersion(t *testing.T) {
	for _, tc := range []struct {
		name string
		fw   vm.Firmware
		bios vm.SMBIOS
		want string
	}{
		{"BIOS, version only", vm.BIOS, vm.SMBIOS{BIOSVersion: "2.3.5"}, "type=0,vendor=SeaBIOS,version=2.3.5,date=04/01/2014"},
		{"UEFI, version only", vm.UEFI, vm.SMBIOS{BIOSVersion: "2.3.5"},
			"type=0,vendor=EFI Development Kit II / OVMF,version=2.3.5,date=02/06/2015,uefi=on"},
		{"UEFI, everything", vm.UEFI, vm.SMBIOS{BIOSVendor: "Acme, Inc.", BIOSVersion: "U30 v2.80, (01/20/2024)", BIOSDate: "01/20/2024"},
			"type=0,vendor=Acme,, Inc.,version=U30 v2.80,, (01/20/2024),date=01/20/2024,uefi=on"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := testDefinition("bios", tc.fw)
			def.SMBIOS.BIOSVendor, def.SMBIOS.BIOSVersion, def.SMBIOS.BIOSDate = tc.bios.BIOSVendor, tc.bios.BIOSVersion, tc.bios.BIOSDate
			args, err := vm.Args(def, argvLayout(def), vm.BootDisk)
			require.NoError(t, err)
			smbios := values(args, "-smbios")
			require.Len(t, smbios, 2, "type 1 and type 0")
			assert.True(t, strings.HasPrefix(smbios[0], "type=1,"), smbios[0])
			assert.Equal(t, tc.want, smbios[1])
			assert.Equal(t, tc.bios.BIOSVersion, vm.SystemSpec(def).BIOSVersion, "the BMC reports the version the guest reads")
		})
	}
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		def := testDefinition("own", fw)
		args, err := vm.Args(def, argvLayout(def), vm.BootDisk)
		require.NoError(t, err)
		assert.Len(t, values(args, "-smbios"), 1, "%s: no type 0 without a version: the firmware's own", fw)
	}
}

func TestArgsRefuseWhatQEMUWouldRefuseLater(t *testing.T) {
	good := testDefinition("ok", vm.BIOS)
	for _, tc := range []struct {
		name   string
		change func(*vm.Definition)
		want   string
	}{
		{"firmware", func(d *vm.Definition) { d.Firmware = "coreboot" }, "firmware"},
		{"name", func(d *vm.Definition) { d.Name = "a b" }, "name"},
		{"no CPUs", func(d *vm.Definition) { d.CPUs = 0 }, "CPUs"},
		{"tiny memory", func(d *vm.Definition) { d.MemoryMiB = 8 }, "memory"},
		{"long serial", func(d *vm.Definition) { d.Disks[0].Serial = strings.Repeat("S", 21) }, "serial"},
		{"odd size", func(d *vm.Definition) { d.Disks[0].SizeBytes = 1000 }, "size"},
		{"bus", func(d *vm.Definition) { d.Disks[0].Bus = "scsi" }, "bus"},
		{"MAC", func(d *vm.Definition) { d.NICs[0].MAC = "52:54:00" }, "MAC"},
		{"multicast MAC", func(d *vm.Definition) { d.NICs[0].MAC = "01:00:5e:00:00:01" }, "multicast"},
		{"same MAC twice", func(d *vm.Definition) { d.NICs = append(d.NICs, d.NICs[0]) }, "used twice"},
		{"UUID", func(d *vm.Definition) { d.SMBIOS.UUID = "not-a-uuid" }, "UUID"},
		{"BIOS vendor without a version", func(d *vm.Definition) { d.SMBIOS.BIOSVendor = "Acme" }, "without a BIOS version"},
		{"BIOS date", func(d *vm.Definition) { d.SMBIOS.BIOSVersion, d.SMBIOS.BIOSDate = "1.0", "2025-11-28" }, "MM/DD/YYYY"},
		{"seven SATA disks", func(d *vm.Definition) {
			d.Disks = slices.Repeat([]vm.Disk{{Bus: vm.SATA, SizeBytes: 512, Serial: "S"}}, 7)
		}, "ports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def := good
			def.Disks = slices.Clone(good.Disks)
			def.NICs = slices.Clone(good.NICs)
			tc.change(&def)
			_, err := vm.Args(def, argvLayout(def), vm.BootDisk)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := vm.Args(good, argvLayout(good), "cdrom")
	assert.ErrorContains(t, err, "boot device")
	l := argvLayout(good)
	l.NICFDs = nil
	_, err = vm.Args(good, l, vm.BootDisk)
	assert.ErrorContains(t, err, "NIC descriptors")
	uefi := testDefinition("uefi", vm.UEFI)
	l = argvLayout(uefi)
	l.FirmwareVars = ""
	_, err = vm.Args(uefi, l, vm.BootDisk)
	assert.ErrorContains(t, err, "variable store")
}

// bootIndexes maps each -device's id to its bootindex, for devices that have one.
func bootIndexes(args []string) map[string]string {
	out := map[string]string{}
	for _, d := range values(args, "-device") {
		id, index := "", ""
		for opt := range strings.SplitSeq(d, ",") {
			if v, ok := strings.CutPrefix(opt, "id="); ok {
				id = v
			}
			if v, ok := strings.CutPrefix(opt, "bootindex="); ok {
				index = v
			}
		}
		if index != "" {
			out[id] = index
		}
	}
	return out
}

func TestArgsForACDROMDrive(t *testing.T) {
	t.Run("BIOS", func(t *testing.T) {
		def := twoNICDefinition(vm.BIOS)
		def.CDROM = true
		l := argvLayout(def)
		args, err := vm.Args(def, l, vm.BootDisk)
		require.NoError(t, err)
		assert.Equal(t, []string{"order=c"}, values(args, "-boot"))
		drives := values(args, "-drive")
		assert.Equal(t, "if=none,id=cd0drive,media=cdrom,readonly=on", drives[len(drives)-1], "an empty drive")
		devices := values(args, "-device")
		assert.Equal(t, []string{
			"virtio-rng-pci",
			"virtio-blk-pci,id=disk0,drive=drive0,serial=VD-argv",
			"nvme,id=disk1,drive=drive1,serial=NV-argv",
			"ahci,id=sata",
			"ide-hd,id=disk2,bus=sata.0,drive=drive2,serial=SA-argv",
			"ide-cd,id=cd0,drive=cd0drive,bus=ide.1",
			"virtio-net-pci,speed=10000,duplex=full,id=nic0,netdev=net0,mac=52:54:00:aa:00:01",
			"e1000,id=nic1,netdev=net1,mac=52:54:00:aa:00:02",
		}, devices, "the PIIX IDE's secondary master, where -cdrom goes")

		l.CDROMFile = "/var/x,y/probe.iso"
		args, err = vm.Args(def, l, vm.BootCD)
		require.NoError(t, err)
		assert.Equal(t, []string{"order=d"}, values(args, "-boot"), "SeaBIOS: the CD, then the rest")
		drives = values(args, "-drive")
		assert.Equal(t, "if=none,id=cd0drive,media=cdrom,readonly=on,file=/var/x,,y/probe.iso,format=raw", drives[len(drives)-1])
		assert.Contains(t, values(args, "-device"), "ide-cd,id=cd0,drive=cd0drive,bus=ide.1")

		again, err := vm.Args(def, l, vm.BootCD)
		require.NoError(t, err)
		assert.Equal(t, args, again, "deterministic")
	})
	t.Run("UEFI", func(t *testing.T) {
		def := twoNICDefinition(vm.UEFI)
		def.CDROM = true
		l := argvLayout(def)
		l.CDROMFile = "/var/x/probe.iso"
		args, err := vm.Args(def, l, vm.BootCD)
		require.NoError(t, err)
		assert.Empty(t, values(args, "-boot"))
		assert.Contains(t, values(args, "-drive"), "if=none,id=cd0drive,media=cdrom,readonly=on,file=/var/x/probe.iso,format=raw")
		assert.Contains(t, values(args, "-device"), "ide-cd,id=cd0,drive=cd0drive,bus=ide.2,bootindex=1",
			"port 2 of q35's built-in AHCI, where -cdrom goes, apart from the SATA disks' controller")
		assert.Equal(t, map[string]string{"cd0": "1", "disk0": "2", "disk1": "3", "disk2": "4", "nic0": "5", "nic1": "6"}, bootIndexes(args),
			"the CD, then the disks, then the network")

		// Other boot devices keep their order, and the CD comes last.
		args, err = vm.Args(def, l, vm.BootDisk)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"disk0": "1", "disk1": "2", "disk2": "3", "nic0": "4", "nic1": "5", "cd0": "6"}, bootIndexes(args))
		args, err = vm.Args(def, l, vm.BootNetwork)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"nic0": "1", "nic1": "2", "disk0": "3", "disk1": "4", "disk2": "5", "cd0": "6"}, bootIndexes(args))
	})
}

func TestArgsRefuseACDBootWithoutDriveOrMedium(t *testing.T) {
	def := testDefinition("nocd", vm.BIOS)
	l := argvLayout(def)
	_, err := vm.Args(def, l, vm.BootCD)
	assert.ErrorContains(t, err, "needs a CD/DVD drive")
	l.CDROMFile = "/var/x/probe.iso"
	_, err = vm.Args(def, l, vm.BootDisk)
	assert.ErrorContains(t, err, "no CD/DVD drive")

	def.CDROM = true
	l.CDROMFile = ""
	_, err = vm.Args(def, l, vm.BootCD)
	assert.ErrorContains(t, err, "needs a medium")
}

func TestBootDeviceForCdNeedsAMedium(t *testing.T) {
	assert.Equal(t, vm.BootCD, vm.BootDeviceFor(bmcsim.BootCd, true))
	assert.Equal(t, vm.BootDisk, vm.BootDeviceFor(bmcsim.BootCd, false), "no medium: the firmware falls through to the disk")
	assert.Equal(t, vm.BootNetwork, vm.BootDeviceFor(bmcsim.BootPxe, true))
	assert.Equal(t, vm.BootDisk, vm.BootDeviceFor(bmcsim.BootHdd, true))
	assert.Equal(t, vm.BootDisk, vm.BootDeviceFor("Usb", true))
}

func TestArgsAddAnInBandIPMIBMC(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		def := testDefinition("ipmi", fw)
		l := argvLayout(def)
		args, err := vm.Args(def, l, vm.BootDisk)
		require.NoError(t, err)
		assert.NotContains(t, strings.Join(args, " "), "ipmi0", "no IPMI device unless the layout asks")

		l.IPMIChardev = "127.0.0.1:9634"
		args, err = vm.Args(def, l, vm.BootDisk)
		require.NoError(t, err)
		assert.Contains(t, values(args, "-chardev"), "socket,id=ipmi0,host=127.0.0.1,port=9634,reconnect=2")
		devices := values(args, "-device")
		assert.Equal(t, []string{"ipmi-bmc-extern,id=bmc0,chardev=ipmi0", "isa-ipmi-kcs,bmc=bmc0"}, devices[len(devices)-2:])

		l.IPMIChardev = "127.0.0.1"
		_, err = vm.Args(def, l, vm.BootDisk)
		assert.ErrorContains(t, err, "host:port")
	}
}

func TestIPMIBootDevice(t *testing.T) {
	assert.Equal(t, vm.BootNetwork, vm.IPMIBootDevice("pxe", false))
	assert.Equal(t, vm.BootCD, vm.IPMIBootDevice("cdrom", true))
	assert.Equal(t, vm.BootDisk, vm.IPMIBootDevice("cdrom", false), "no medium: the disk, as firmware falls through")
	for _, d := range []string{"default", "bios", "none", ""} {
		assert.Equal(t, vm.BootDisk, vm.IPMIBootDevice(d, true), d)
	}
}
