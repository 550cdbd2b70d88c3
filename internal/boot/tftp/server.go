// Package tftp serves the first stage of a network boot: the iPXE binaries a PXE ROM loads, by
// name, read-only.
package tftp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	tftplib "github.com/pin/tftp/v3"
)

// Error kinds, each a metric label.
const (
	ErrorRefused  = "refused"  // a name that is not one of the served files
	ErrorMissing  = "missing"  // a served name with no file on disk
	ErrorWrite    = "write"    // a write request
	ErrorTransfer = "transfer" // the transfer failed (client gone, timeout)
)

// blockSize is the largest block offered to clients that ask (RFC 2348): fits a 1500-byte MTU,
// and cuts the ~1 MiB EFI binary from ~2,000 round trips to ~700.
const blockSize = 1468

// Server serves Files (base names) from Dir. Nothing else is served: names are matched
// exactly, never joined onto the directory as given, so "../x" or "/etc/passwd" is refused.
type Server struct {
	Dir   string
	Files []string
	// OnSent counts bytes sent; OnError counts errors by kind (either may be nil).
	OnSent  func(n int64)
	OnError func(kind string)
	Log     logr.Logger
}

// Serve serves read requests arriving on conn until ctx ends; it closes conn then.
//
// All transfers run on conn itself (pin/tftp's single-port mode): the library otherwise opens
// a socket per transfer from whatever OS thread runs it, which is outside the network
// namespace the caller opened conn in.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	srv := tftplib.NewServer(s.read, s.write)
	srv.SetBlockSize(blockSize)
	// A transfer whose last ACK the library dropped (single-port mode hands packets to a
	// transfer through a one-slot channel) lingers until it times out; the client has its file
	// by then. A short timeout bounds how long, and how long Shutdown waits for it.
	srv.SetTimeout(2 * time.Second)
	srv.EnableSinglePort()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(conn) }()
	select {
	case err := <-done:
		_ = conn.Close()
		if err != nil {
			return fmt.Errorf("serving TFTP: %w", err)
		}
		return nil
	case <-ctx.Done():
		srv.Shutdown() // in single-port mode only cancels: the read below unblocks it
		_ = conn.Close()
		<-done
		return nil
	}
}

func (s *Server) read(filename string, rf io.ReaderFrom) error {
	name, ok := s.served(filename)
	if !ok {
		s.count(ErrorRefused)
		s.Log.V(1).Info("TFTP read refused", "file", truncate(filename))
		return errors.New("file not found")
	}
	f, err := os.Open(filepath.Join(s.Dir, name))
	if err != nil {
		s.count(ErrorMissing)
		s.Log.Info("TFTP file missing", "file", name, "error", err.Error())
		return errors.New("file not found")
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		if ot, ok := rf.(tftplib.OutgoingTransfer); ok {
			ot.SetSize(st.Size())
		}
	}
	n, err := rf.ReadFrom(f)
	if s.OnSent != nil && n > 0 {
		s.OnSent(n)
	}
	if err != nil {
		s.count(ErrorTransfer)
		s.Log.Info("TFTP transfer failed", "file", name, "bytes", n, "error", err.Error())
		return err
	}
	return nil
}

func (s *Server) write(filename string, _ io.WriterTo) error {
	s.count(ErrorWrite)
	s.Log.V(1).Info("TFTP write refused", "file", truncate(filename))
	return errors.New("this server is read-only")
}

// served maps a requested name to a served file. PXE ROMs send the name from the DHCP reply,
// sometimes with a leading slash.
func (s *Server) served(filename string) (string, bool) {
	name := strings.TrimPrefix(filename, "/")
	for _, f := range s.Files {
		if name == f {
			return f, true
		}
	}
	return "", false
}

func (s *Server) count(kind string) {
	if s.OnError != nil {
		s.OnError(kind)
	}
}

// truncate bounds a client-chosen name before it is logged.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
