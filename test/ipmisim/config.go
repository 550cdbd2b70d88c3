package ipmisim

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// The files a BMC writes into Options.Dir besides lan.conf and sim.emu.
const (
	controlScript = "control"
	fruFile       = "fru.bin"
)

// fruSize is FRU device 0's size as ipmi_sim reports it; the image is padded to it.
const fruSize = 256

// writeFiles writes what does not depend on the ports: the control program, the FRU and
// the emu command file.
func (b *BMC) writeFiles() error {
	_, port, _ := net.SplitHostPort(b.control.Addr().String())
	script := "#!/bin/bash\n" +
		"# Written by Ironfleet's test/ipmisim: ipmi_sim's chassis_control and lan_config_program.\n" +
		"# Forwards its arguments to the harness owning this BMC and prints the answer.\n" +
		"exec 3<>/dev/tcp/127.0.0.1/" + port + " || exit 1\n" +
		"printf '%s\\n' \"$*\" >&3\n" +
		"while IFS= read -r line <&3; do printf '%s\\n' \"$line\"; done\n"
	if err := os.WriteFile(filepath.Join(b.opts.Dir, controlScript), []byte(script), 0o755); err != nil {
		return fmt.Errorf("ipmisim: write the control program: %w", err)
	}
	fru, err := EncodeFRU(b.opts.FRU)
	if err != nil {
		return fmt.Errorf("ipmisim: %w", err)
	}
	if len(fru) > fruSize {
		return fmt.Errorf("ipmisim: FRU of %d bytes is longer than %d", len(fru), fruSize)
	}
	fru = append(fru, make([]byte, fruSize-len(fru))...)
	fruPath := filepath.Join(b.opts.Dir, fruFile)
	if err := os.WriteFile(fruPath, fru, 0o644); err != nil {
		return fmt.Errorf("ipmisim: write the FRU: %w", err)
	}
	o := b.opts
	if o.FirmwareMinor < 0 || o.FirmwareMinor > 99 || o.FirmwareMajor < 0 || o.FirmwareMajor > 127 {
		return fmt.Errorf("ipmisim: firmware %d.%d: major must be 0-127, minor 0-99", o.FirmwareMajor, o.FirmwareMinor)
	}
	// mc_add <ipmb> <device id> <sdrs> <device revision> <fw major> <fw minor> <support>
	// <manufacturer id> <product id>. The minor revision goes out as BCD, as Get Device ID has
	// it: 8 → 0x08 ("9.08"), 12 → 0x12.
	emu := fmt.Sprintf("mc_setbmc 0x20\n"+
		"mc_add 0x20 0 no-device-sdrs 0x23 %d 0x%02d 0x9f 0x%x 0x%x\n"+
		"mc_add_fru_data 0x20 0 %d file 0 %s\n"+
		"mc_enable 0x20\n",
		o.FirmwareMajor, o.FirmwareMinor, o.ManufacturerID, o.ProductID, fruSize, quote(fruPath))
	if err := os.WriteFile(b.emu, []byte(emu), 0o644); err != nil {
		return fmt.Errorf("ipmisim: write %s: %w", b.emu, err)
	}
	return nil
}

// writeConf writes lan.conf for the current ports.
func (b *BMC) writeConf() error {
	o := b.opts
	host, port, _ := net.SplitHostPort(b.udpAddr)
	control := filepath.Join(o.Dir, controlScript)
	var c strings.Builder
	fmt.Fprintf(&c, "# Written by Ironfleet's test/ipmisim.\nname %s\nset_working_mc 0x20\n", quote("ironfleet-ipmisim"))
	fmt.Fprintf(&c, "  startlan 1\n    addr %s %s\n    priv_limit admin\n", host, port)
	for _, who := range []string{"callback", "user", "operator", "admin"} {
		fmt.Fprintf(&c, "    allowed_auths_%s md5\n", who)
	}
	if o.GUID != "" {
		g, err := SMBIOSGUID(o.GUID)
		if err != nil {
			return fmt.Errorf("ipmisim: GUID: %w", err)
		}
		fmt.Fprintf(&c, "    guid %s\n", g)
	}
	fmt.Fprintf(&c, "    lan_config_program %s\n  endlan\n", quote(control+" lan"))
	fmt.Fprintf(&c, "  chassis_control %s\n", quote(control+" chassis"))
	if b.vmAddr != "" {
		_, vmPort, _ := net.SplitHostPort(b.vmAddr)
		fmt.Fprintf(&c, "  serial 15 127.0.0.1 %s codec VM\n", vmPort)
	}
	fmt.Fprintf(&c, "  user 2 true %s %s admin 10 md5\n", quote(o.Username), quote(o.Password))
	if err := os.WriteFile(b.conf, []byte(c.String()), 0o600); err != nil {
		return fmt.Errorf("ipmisim: write %s: %w", b.conf, err)
	}
	return nil
}

// quote is a lan.conf/emu string: ipmi_sim takes "..." with no escapes, so a value with a
// double quote cannot be written.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, "") + `"` }
