package vm_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ironfleet/ironfleet/test/vm"
)

// seabiosToIPXE is what a serial console really carries (abridged from a QEMU 7.2 boot):
// a terminal reset, colour and cursor escapes, \r\n and bare \r line ends, iPXE's dots.
const seabiosToIPXE = "\x1bcSeaBIOS (version 1.16.2-debian-1.16.2-1)\r\n\r\n\r\n" +
	"iPXE (http://ipxe.org) 00:06.0 C000 PCI2.10 PnP PMM+06FCF070+06F0F070 C000\r\n" +
	"\x1b[2J\x1b[01;01H\x1b[=3h\x1b[1;37;40mBooting from ROM...\r" +
	"\x1b[0miPXE initialising devices...\x1b[32mok\x1b[0m\r\n\n\r" +
	"Configuring (net0 52:54:00:aa:00:01)......"

func TestConsoleLinesSplitOnEitherLineEndAndStripEscapes(t *testing.T) {
	assert.Equal(t, []string{
		"SeaBIOS (version 1.16.2-debian-1.16.2-1)",
		"iPXE (http://ipxe.org) 00:06.0 C000 PCI2.10 PnP PMM+06FCF070+06F0F070 C000",
		"Booting from ROM...",
		"iPXE initialising devices...ok",
		"Configuring (net0 52:54:00:aa:00:01)......",
	}, vm.ConsoleLines([]byte(seabiosToIPXE)))
	assert.Equal(t, "title", vm.StripANSI("\x1b]0;title\x07\x1b(Btitle\x1b7\x08"))
	assert.Empty(t, vm.ConsoleLines([]byte("\r\n\r\n  \x1b[0m\r")))
}

func TestTailConsoleFollowsAGrowingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lines := vm.TailConsole(ctx, path) // the log does not exist yet

	next := func() string {
		t.Helper()
		select {
		case l := <-lines:
			return l
		case <-time.After(5 * time.Second):
			t.Fatal("no line within 5 s")
			return ""
		}
	}
	firstLine := strings.Index(seabiosToIPXE, "\r\n") + 2
	require.NoError(t, os.WriteFile(path, []byte(seabiosToIPXE[:firstLine]), 0o644))
	assert.Equal(t, "SeaBIOS (version 1.16.2-debian-1.16.2-1)", next())

	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(seabiosToIPXE[firstLine:] + " ok\r\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, "iPXE (http://ipxe.org) 00:06.0 C000 PCI2.10 PnP PMM+06FCF070+06F0F070 C000", next())
	assert.Equal(t, "Booting from ROM...", next())
	assert.Equal(t, "iPXE initialising devices...ok", next())
	assert.Equal(t, "Configuring (net0 52:54:00:aa:00:01)...... ok", next(), "the dots line comes once it ends")

	require.NoError(t, os.WriteFile(path, []byte("Linux version 6.1\n"), 0o644)) // truncated: a new log
	assert.Equal(t, "Linux version 6.1", next())
	cancel()
	for range lines { // closed once ctx ends
	}
}
