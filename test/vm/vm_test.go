package vm_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/vm"
)

func TestVMStartsKillsAndReportsItsOwnExit(t *testing.T) {
	for _, fw := range []vm.Firmware{vm.BIOS, vm.UEFI} {
		t.Run(string(fw), func(t *testing.T) {
			n := newNetwork(t)
			m := newVM(t, testDefinition("box-"+string(fw), fw), n)
			exits := make(chan error, 1)
			m.OnExit(func(err error) { exits <- err })

			start := time.Now()
			require.NoError(t, m.Start(vm.BootNetwork))
			t.Logf("QEMU answered QMP %s after start", time.Since(start))
			require.True(t, m.Running())
			status, err := m.Status()
			require.NoError(t, err)
			assert.Equal(t, "running", status)
			assert.ErrorIs(t, m.Start(vm.BootNetwork), vm.ErrRunning)

			// The firmware reaches iPXE (QEMU's NIC ROM) and says so on the serial console.
			waitFor(t, 60*time.Second, "iPXE on the console", func() bool { return consoleHas(m, "iPXE") })
			t.Logf("iPXE on the console %s after start", time.Since(start))

			pid := m.PID()
			require.NoError(t, m.Kill())
			assert.False(t, m.Running())
			assert.ErrorIs(t, syscall.Kill(pid, 0), syscall.ESRCH, "QEMU is gone and reaped")
			select {
			case err := <-exits:
				t.Fatalf("Kill is not an exit by itself, but the hook heard %v", err)
			default:
			}

			// A QEMU that quits by itself is reported.
			require.NoError(t, m.Start(vm.BootDisk))
			_, _ = m.QMP("quit", nil) // the answer may be cut off by the exit
			select {
			case err := <-exits:
				assert.NoError(t, err, "quit is a clean exit")
			case <-time.After(30 * time.Second):
				t.Fatal("no exit notification after QMP quit")
			}
			assert.False(t, m.Running())
			_, err = os.Stat(m.ConsoleLog())
			assert.NoError(t, err)
		})
	}
}

// TestQEMUDiesWithItsParent starts a VM from a helper process, kills the helper with
// SIGKILL (no cleanup runs) and checks QEMU goes too: a killed test must not leave VMs.
func TestQEMUDiesWithItsParent(t *testing.T) {
	if os.Getenv("IRONFLEET_VM_HELPER") != "" {
		def := testDefinition("orphan", vm.BIOS)
		def.NICs = nil
		m, err := vm.New(def, vm.Options{Dir: os.Getenv("IRONFLEET_VM_HELPER")})
		if err == nil {
			err = m.Start(vm.BootDisk)
		}
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(m.PID())
		select {} // wait to be killed
	}
	requireQEMU(t)
	helper := exec.Command(os.Args[0], "-test.run=^TestQEMUDiesWithItsParent$")
	helper.Env = append(os.Environ(), "IRONFLEET_VM_HELPER="+t.TempDir())
	out, err := helper.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, helper.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	qemuPID, err := strconv.Atoi(strings.TrimSpace(line))
	require.NoError(t, err, "helper said %q", line)
	require.NoError(t, syscall.Kill(qemuPID, 0), "QEMU runs")

	require.NoError(t, helper.Process.Kill())
	_ = helper.Wait()
	waitFor(t, 10*time.Second, "QEMU died with its parent", func() bool {
		return errors.Is(syscall.Kill(qemuPID, 0), syscall.ESRCH)
	})
}
