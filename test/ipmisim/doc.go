// Package ipmisim runs OpenIPMI's ipmi_sim as the IPMI BMC of a test or the lab: the IPMI
// sibling of bmcsim. A BMC writes ipmi_sim's lan.conf, emu command file, a binary FRU and a
// fresh state directory into Options.Dir, starts ipmi_sim as a child (killed with this
// process, on Close and on Restart) listening for RMCP+ on 127.0.0.1, and keeps the host's
// power state and pending boot device itself.
//
// ipmi_sim asks a chassis_control program about power and boot. The BMC writes that program
// into Dir as a tiny bash script that forwards its arguments over bash's /dev/tcp to a TCP
// listener on 127.0.0.1 owned by the BMC, which answers ("get power" → "power:1") and turns
// the "set" commands into PowerActions for hooks (test/vm powers a real QEMU with them).
// A startcmd alone is not enough: ipmi_sim 2.0.33 then refuses Set System Boot Options
// parameter 5 (completion code 0xCC), so a boot device could never be set, and it would run
// the host itself (power = a process it started), where the harness has to choose the
// host's boot order at each power-on. The same script serves lan_config_program, so LAN
// parameter 5 answers the BMC's MAC.
//
// The boot device is next boot only: consumed by the next power-on or reset, like the most
// forgetful real BMC (ipmi_sim drops the persistent and EFI bits anyway).
//
// NewProxy is a UDP fault proxy to put between a client and a BMC: it drops requests or
// responses on demand, without root or tc.
package ipmisim
