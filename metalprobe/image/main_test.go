package image

import (
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// guestfwdFlag, as the first argument, makes the test binary a one-connection relay instead
// of running tests: QEMU's user network runs it (guestfwd=...-cmd:, split into words without
// a shell) for each connection the guest opens to a forwarded address, with the connection on
// stdin and stdout, and it relays that to the test's server at the address after the "=". A
// guestfwd to a chardev would carry only one connection for the whole boot; /init and
// metalprobe open several.
const guestfwdFlag = "-ironfleet.guestfwd-to="

func TestMain(m *testing.M) {
	if len(os.Args) == 2 && strings.HasPrefix(os.Args[1], guestfwdFlag) {
		os.Exit(relay(strings.TrimPrefix(os.Args[1], guestfwdFlag)))
	}
	os.Exit(m.Run())
}

// relay copies stdin to target and target to stdout until both directions end. It writes
// nothing else: stderr is the guest's connection too.
func relay(target string) int {
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return 1
	}
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(conn, os.Stdin)
		_ = conn.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(os.Stdout, conn)
	_ = os.Stdout.Close()
	<-done
	return 0
}
