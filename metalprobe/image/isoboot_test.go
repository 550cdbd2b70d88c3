package image

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/internal/bootmedia"
	"github.com/ironfleet/ironfleet/internal/ignition"
	"github.com/ironfleet/ironfleet/test/ciskip"
	"github.com/ironfleet/ironfleet/test/vm"
)

// TestProbeISOBootsTheEmbedWithoutANetwork boots a boot's ISO (the build's probe.iso with an
// embed from bootmedia.Embed: a valid discovery ignition whose registry does not exist, and a
// boot URL) as a QEMU CD-ROM, on BIOS (pc, SeaBIOS, isolinux), on UEFI (q35, OVMF, shim and
// GRUB) and on UEFI with Secure Boot enforced (Microsoft's keys), with no NIC at all, and reads the serial console: the boot loader ran, the kernel booted,
// /init found the embed's files (ignition.MediaConsoleLine; InitStarted from the boot media,
// so the boot URL was read and accepted) and parsed the ignition (it goes on to load the
// modules, which it does only then), and no token reached the console. The VM is stopped
// there: without a NIC /init can go no further.
func TestProbeISOBootsTheEmbedWithoutANetwork(t *testing.T) {
	qemu := requireQEMU(t)
	dir, _ := testImage(t)
	tmpl, err := bootmedia.LoadTemplate(dir)
	require.NoError(t, err)
	const probeToken, bootToken = "probe-tok3n-iso", "boot-tok3n-iso"
	ign, err := ignition.Render(ignition.Config{
		RegistryURL: "https://registry.invalid", Token: probeToken,
		SystemUUID: vmUUID, Mode: ignition.ModeDiscovery,
	})
	require.NoError(t, err)
	embed, err := tmpl.Embed(ign, "http://boot.invalid/boot/"+bootToken)
	require.NoError(t, err)

	// The boot's ISO, as the boot service serves it.
	work := t.TempDir()
	isoPath := filepath.Join(work, "boot.iso")
	r, err := tmpl.Open(embed)
	require.NoError(t, err)
	out, err := os.Create(isoPath)
	require.NoError(t, err)
	n, err := io.Copy(out, r)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	require.NoError(t, r.Close())
	require.Equal(t, tmpl.Size(), n)

	for _, fw := range []struct {
		name       string
		args       []string
		loader     string // what the boot loader prints on the serial console
		secureBoot bool
	}{
		{name: "BIOS", args: []string{"-machine", "pc", "-boot", "order=d"}, loader: "ISOLINUX 6.04"},
		{name: "UEFI", args: uefiArgs(t, work, false), loader: "Welcome to GRUB!"},
		// Debian's OVMF with Microsoft's keys, Secure Boot on: the firmware runs shim only
		// because Microsoft signed it, shim runs GRUB because Debian did, GRUB boots the kernel
		// because shim verified Debian's signature on it.
		{name: "UEFISecureBoot", args: uefiArgs(t, work, true), loader: "Welcome to GRUB!", secureBoot: true},
	} {
		t.Run(fw.name, func(t *testing.T) {
			console := filepath.Join(work, fw.name+"-console.log")
			args := append([]string{
				"-accel", "tcg", "-cpu", "max", "-smp", "2", "-m", "512",
				"-nodefaults", "-nic", "none", "-display", "none", "-no-reboot",
				"-serial", "file:" + console,
				"-cdrom", isoPath,
			}, fw.args...)
			start := time.Now()
			log := bootUntil(t, qemu, args, console, 4*time.Minute, func(log string) bool {
				return regexp.MustCompile(`ironfleet-init: loaded \d+ of \d+ kernel modules`).MatchString(log) ||
					strings.Contains(log, ignition.ConsolePrefix+string(ignition.StageFailed))
			})
			t.Logf("%s: QEMU start to /init's modules %s (TCG)", fw.name, time.Since(start).Round(10*time.Millisecond))

			lines := consoleLines(log)
			assert.Contains(t, log, fw.loader, "the boot loader's banner")
			assert.Contains(t, lines, ignition.MediaConsoleLine, "/init found the embed; console:\n%s", tail(log, 30))
			assert.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(ignition.ConsolePrefix+string(ignition.StageInitStarted))+
				` kernel \S+, boot service \S+, ignition from the boot media`), log)
			assert.NotContains(t, log, ignition.ConsolePrefix+string(ignition.StageFailed), "console:\n%s", tail(log, 30))
			assert.NotContains(t, log, "Initramfs unpacking failed")
			assert.Regexp(t, `ironfleet-init: loaded \d+ of \d+ kernel modules`, log, "the ignition parsed")
			// Every module the VM needs loads, under Secure Boot too: the kernel, locked down,
			// takes them because Debian signed them. On BIOS all but efivarfs, which needs EFI
			// firmware. The rest are skipped: drivers for PCI devices the VM does not have.
			if m := regexp.MustCompile(`ironfleet-init: loaded (\d+) of (\d+) kernel modules(?: \((\d+) for hardware this machine does not have\))?`).FindStringSubmatch(log); m != nil {
				loaded, _ := strconv.Atoi(m[1])
				all, _ := strconv.Atoi(m[2])
				skipped, _ := strconv.Atoi(m[3])
				assert.NotZero(t, skipped, "the VM has none of the servers' SAS HBAs and 100G NICs")
				all -= skipped
				if fw.name == "BIOS" {
					all-- // efivarfs
				}
				assert.Equal(t, all, loaded, "modules loaded of the %s in the initramfs (%d skipped)", m[2], skipped)
			}
			for _, secret := range []string{probeToken, bootToken} {
				assert.NotContains(t, log, secret, "a token reached the console")
			}
			if fw.name != "BIOS" {
				on, err := vm.SecureBootEnabled(filepath.Join(work, fw.name+"-OVMF_VARS.fd"))
				require.NoError(t, err)
				assert.Equal(t, fw.secureBoot, on, "Secure Boot in the firmware's variable store after the boot")
			}
		})
	}
}

// uefiArgs are QEMU's arguments for a q35 machine with Debian's OVMF (as test/vm runs it:
// the code read-only, a copy of the variable store, <name>-OVMF_VARS.fd in work) booting from
// the CD-ROM; with secureBoot, its Secure Boot build and Microsoft's keys, Secure Boot on.
func uefiArgs(t *testing.T, work string, secureBoot bool) []string {
	t.Helper()
	def := vm.Definition{Firmware: vm.UEFI, SecureBoot: secureBoot}
	vars, err := os.ReadFile(vm.OVMFVarsTemplate(def))
	ciskip.Unless(t, err == nil, "OVMF is not installed (apt-get install --no-install-recommends ovmf): %v", err)
	name, machine, code := "UEFI", "q35", vm.DefaultOVMFCode
	var secure []string
	if secureBoot {
		name, machine, code = "UEFISecureBoot", "q35,smm=on", vm.SecureBootOVMFCode
		secure = []string{"-global", "driver=cfi.pflash01,property=secure,value=on"}
	}
	varsCopy := filepath.Join(work, name+"-OVMF_VARS.fd")
	require.NoError(t, os.WriteFile(varsCopy, vars, 0o600))
	return append([]string{"-machine", machine,
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,unit=1,file=" + varsCopy}, secure...)
}

// bootUntil runs QEMU and polls its serial console log until done says so, failing the test
// at the deadline or when QEMU exits first; it stops QEMU and returns the log.
func bootUntil(t *testing.T, qemu string, args []string, consoleLog string, deadline time.Duration, done func(string) bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.Command(qemu, args...)
	var qemuErr strings.Builder
	cmd.Stderr = &qemuErr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	read := func() string {
		data, _ := os.ReadFile(consoleLog)
		return strings.ReplaceAll(string(data), "\r", "")
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if log := read(); done(log) {
			stop()
			return read()
		}
		select {
		case err := <-exited:
			t.Fatalf("QEMU exited (%v) before the console showed what was awaited: %s\nconsole:\n%s", err, qemuErr.String(), tail(read(), 40))
		case <-ctx.Done():
			stop()
			t.Fatalf("not there within %s; console:\n%s", deadline, tail(read(), 40))
		case <-tick.C:
		}
	}
}

// consoleLines are the console's lines, trimmed, without terminal escape sequences.
func consoleLines(log string) []string {
	escapes := regexp.MustCompile(`\x1b\[[0-9;=?]*[A-Za-z]`)
	var lines []string
	for _, l := range strings.Split(escapes.ReplaceAllString(log, ""), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
