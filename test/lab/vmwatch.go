package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/vm"
)

// BootStage reads how far a VM's boot has got from one line of its serial console: the
// firmware's network boot, iPXE, its DHCP (or, under Secure Boot, shim and GRUB; or the
// firmware's CD boot and the ISO's loader, for virtual media), the kernel, then the probe's own
// stages as /init prints them. "" for a line
// that says nothing new.
func BootStage(line string) string {
	if stage, _ := ignition.ParseConsoleLine(line); stage != "" {
		return "probe: " + string(stage)
	}
	switch {
	case strings.Contains(line, "Start PXE over IPv4"), strings.Contains(line, "PXE-"):
		return "firmware PXE"
	case strings.Contains(line, "Station IP address"):
		return "firmware: DHCP"
	case strings.Contains(line, "Start HTTP Boot over IPv4"):
		return "firmware HTTP boot"
	case strings.Contains(line, "URI: http") && strings.Contains(line, ".iso"):
		return "firmware HTTP boot: loading the ISO over HTTP (the URI its BMC set)"
	case strings.Contains(line, "URI: http"):
		return "firmware HTTP boot: loading iPXE over HTTP"
	case strings.Contains(line, "BdsDxe: starting") && strings.Contains(line, "Uri(http") && strings.Contains(line, ".iso"):
		return "firmware: booting the ISO from a RAM disk"
	case strings.Contains(line, "NBP filename is shimx64.efi"):
		return "firmware PXE: shim (the signed chain) over TFTP"
	case strings.Contains(line, "Fetching Netboot Image grubx64.efi"):
		return "shim: GRUB over TFTP"
	case strings.Contains(line, "Ironfleet: booting the metalprobe"):
		return "GRUB: kernel + initramfs over TFTP"
	case strings.Contains(line, "Access Denied"), strings.Contains(line, "Verification failed"):
		return "firmware: loader refused (Secure Boot)"
	case strings.Contains(line, "secureboot: Secure boot enabled"):
		return "kernel: Secure Boot enforced"
	case strings.HasPrefix(line, "iPXE ") && strings.Contains(line, "ipxe.org"):
		return "iPXE"
	case strings.Contains(line, "Configuring (net"):
		return "iPXE: DHCP"
	case strings.Contains(line, "/artifacts/vmlinuz"):
		return "iPXE: loading kernel + initramfs over HTTP"
	case strings.Contains(line, "Booting from DVD/CD"), strings.Contains(line, "BdsDxe: loading") && strings.Contains(line, "DVD-ROM"):
		return "firmware: CD (virtual media)"
	case strings.HasPrefix(line, "ISOLINUX "):
		return "isolinux"
	case strings.Contains(line, "Welcome to GRUB!"):
		return "GRUB"
	case strings.Contains(line, "Linux version"):
		return "kernel"
	case strings.Contains(line, ignition.MediaConsoleLine):
		return "probe: ignition from the boot media"
	}
	return ""
}

// WatchVMs prints each VM's boot stage as its console shows it, until ctx ends.
func (l *Lab) WatchVMs(ctx context.Context, out io.Writer) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, h := range l.VMs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := ""
			for line := range vm.TailConsole(ctx, h.Machine.ConsoleLog()) {
				stage := BootStage(line)
				if stage == "" || stage == last {
					continue
				}
				last = stage
				mu.Lock()
				fmt.Fprintf(out, "%s  vm     %-36s boot: %s\n", time.Now().Format("15:04:05"), h.Def.Name+" ("+strings.ToLower(h.Def.SMBIOS.UUID)[:8]+"…)", stage)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}
