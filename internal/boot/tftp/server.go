// Package tftp serves the first stages of a network boot, read-only, by exact name: the iPXE
// binaries a PXE ROM loads, and the signed chain of Secure Boot servers (shim, GRUB, GRUB's
// configuration, the kernel and initramfs), as the caller's Opener gives them.
//
// It speaks TFTP itself (RFC 1350, with the blksize and tsize options of RFCs 2347-2349) on
// the one socket it is given, rather than through pin/tftp: that library either opens a socket
// per transfer (from whatever OS thread runs it, outside the network namespace the caller
// opened the socket in) or, in its single-port mode, keeps state for every source that sends it
// anything: one stray packet cut that source off for good and leaked memory (issue #38), and a
// packet arriving as a transfer ended could send on a closed channel. Here a source gets state
// only by sending a well-formed read request, for as long as its transfer runs.
package tftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
)

// Error kinds, each a metric label.
const (
	ErrorRefused  = "refused"  // a name that is not served, not to this client, or not octet mode
	ErrorMissing  = "missing"  // a served name with no file on disk (or that could not be made)
	ErrorWrite    = "write"    // a write request
	ErrorTransfer = "transfer" // the transfer failed (client gone, timeout)
	ErrorStray    = "stray"    // a packet that is neither a read request nor part of a transfer: dropped
	ErrorBusy     = "busy"     // a read request while maxTransfers run: dropped (the client asks again)
)

// blockSize is the largest block offered to clients that ask (RFC 2348): fits a 1500-byte MTU,
// and cuts the ~1 MiB EFI binary from ~2,000 round trips to ~700.
const blockSize = 1468

// maxTransfers bounds the transfers running at once, and so the state strangers can make the
// server keep: a rack's worth of PXE ROMs asking at once is well under it.
const maxTransfers = 256

// Opcodes (RFC 1350, 2347) and error codes.
const (
	opRRQ   = 1
	opWRQ   = 2
	opDATA  = 3
	opACK   = 4
	opERROR = 5
	opOACK  = 6

	errNotDefined   = 0
	errNotFound     = 1
	errAccess       = 2
	errIllegalOp    = 4
	errOptionDenied = 8
)

// ErrNotServed is what an Opener says of a name it does not serve; ErrDenied of one it serves,
// but not to this client (now). Both are answered "file not found" / "access violation" and
// counted as ErrorRefused; any other error of an Opener as ErrorMissing.
var (
	ErrNotServed = errors.New("not served")
	ErrDenied    = errors.New("denied")
)

// Opener gives what a read request of name (without a leading "/") from the client at addr is
// answered with: its content and its size in bytes. It runs in the transfer's goroutine, not
// in the server's read loop: it may take a while (an API call) without holding up others.
type Opener func(ctx context.Context, name string, client netip.Addr) (io.ReadCloser, int64, error)

// Dir serves the files names (base names) from dir. Nothing else is served: names are matched
// exactly, never joined onto the directory as given, so "../x" or "/etc/passwd" is refused.
func Dir(dir string, names ...string) Opener {
	return func(_ context.Context, name string, _ netip.Addr) (io.ReadCloser, int64, error) {
		if !slices.Contains(names, name) {
			return nil, 0, ErrNotServed
		}
		return OpenFile(filepath.Join(dir, name))
	}
}

// OpenFile opens a regular file for an Opener, with its size.
func OpenFile(path string) (io.ReadCloser, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, st.Size(), nil
}

// Server serves what Open gives, read-only.
type Server struct {
	Open Opener
	// OnSent counts bytes sent; OnError counts errors by kind (either may be nil).
	OnSent  func(n int64)
	OnError func(kind string)
	Log     logr.Logger

	mu        sync.Mutex
	transfers map[string]*transfer // by the client's address:port
}

// Serve serves read requests arriving on conn until ctx ends; it closes conn then. Every
// transfer runs on conn itself: no socket is opened, so all of them stay in the network
// namespace the caller opened conn in.
func (s *Server) Serve(ctx context.Context, conn net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer func() {
		cancel() // every transfer ends at once
		wg.Wait()
	}()
	s.mu.Lock()
	s.transfers = map[string]*transfer{}
	s.mu.Unlock()
	// One byte more than the largest packet read: a request that fills the buffer was cut.
	buf := make([]byte, 1501)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("serving TFTP: %w", err)
		}
		peer, ok := from.(*net.UDPAddr)
		if !ok || n == len(buf) {
			s.count(ErrorStray)
			continue
		}
		p := buf[:n]
		key := peer.String()
		s.mu.Lock()
		t := s.transfers[key]
		s.mu.Unlock()
		if t != nil && opcode(p) != opRRQ {
			t.deliver(p)
			continue
		}
		// A read request from a source with a transfer: the client started again (it gave up
		// on the transfer, or an answer to its request was lost). The new request wins.
		if t != nil {
			t.cancel()
		}
		t = s.start(ctx, conn, peer, p)
		if t == nil {
			continue
		}
		s.mu.Lock()
		s.transfers[key] = t
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.run()
			s.mu.Lock()
			if s.transfers[key] == t {
				delete(s.transfers, key)
			}
			s.mu.Unlock()
		}()
	}
}

// start answers a packet from a source without a transfer. Only a well-formed octet read
// request starts one, whose goroutine asks the Opener for the name (open): a name not served
// is answered with an error there and the transfer ends; a write request or another mode is
// answered here and leaves no state; anything else is dropped.
func (s *Server) start(ctx context.Context, conn net.PacketConn, peer *net.UDPAddr, p []byte) *transfer {
	switch opcode(p) {
	case opRRQ:
	case opWRQ:
		s.count(ErrorWrite)
		s.Log.V(1).Info("TFTP write refused", "client", peer.String())
		sendError(conn, peer, errAccess, "this server is read-only")
		return nil
	default:
		s.count(ErrorStray)
		s.Log.V(2).Info("TFTP stray packet dropped", "client", peer.String(), "bytes", len(p))
		return nil
	}
	req, err := parseRequest(p)
	if err != nil {
		s.count(ErrorStray)
		s.Log.V(1).Info("TFTP malformed read request dropped", "client", peer.String(), "error", err.Error())
		return nil
	}
	name := strings.TrimPrefix(req.filename, "/") // PXE ROMs send the DHCP reply's name, some with a leading slash
	if !strings.EqualFold(req.mode, "octet") {
		s.count(ErrorRefused)
		s.Log.V(1).Info("TFTP read refused", "client", peer.String(), "file", truncate(name), "mode", truncate(req.mode))
		sendError(conn, peer, errIllegalOp, "only octet mode is served")
		return nil
	}
	s.mu.Lock()
	busy := len(s.transfers) >= maxTransfers
	s.mu.Unlock()
	if busy {
		s.count(ErrorBusy)
		s.Log.Info("TFTP read request dropped: too many transfers running", "client", peer.String(), "running", maxTransfers)
		return nil
	}
	tctx, cancel := context.WithCancel(ctx)
	return &transfer{server: s, conn: conn, peer: peer, name: name, opts: req.options,
		in: make(chan []byte, 8), ctx: tctx, cancel: cancel}
}

// open asks the Opener for a transfer's content, answering the client with an error when
// there is none.
func (s *Server) open(t *transfer) bool {
	addr := t.peer.AddrPort().Addr().Unmap()
	r, size, err := s.Open(t.ctx, t.name, addr)
	switch {
	case err == nil:
		t.file, t.size = r, size
		return true
	case errors.Is(err, ErrNotServed):
		s.count(ErrorRefused)
		s.Log.V(1).Info("TFTP read refused", "client", t.peer.String(), "file", truncate(t.name))
		sendError(t.conn, t.peer, errNotFound, "file not found")
	case errors.Is(err, ErrDenied):
		s.count(ErrorRefused)
		s.Log.Info("TFTP read refused", "client", t.peer.String(), "file", truncate(t.name), "why", err.Error())
		sendError(t.conn, t.peer, errAccess, "access violation")
	default:
		s.count(ErrorMissing)
		s.Log.Info("TFTP file missing", "file", truncate(t.name), "error", err.Error())
		sendError(t.conn, t.peer, errNotFound, "file not found")
	}
	return false
}

// running is the number of transfers running.
func (s *Server) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.transfers)
}

func (s *Server) count(kind string) {
	if s.OnError != nil {
		s.OnError(kind)
	}
}

// request is a parsed read request.
type request struct {
	filename, mode string
	options        map[string]string // names lowercased
}

// parseRequest reads an RRQ: opcode, filename, 0, mode, 0, then option name/value pairs each
// ended by 0 (RFC 2347).
func parseRequest(p []byte) (request, error) {
	if len(p) < 2 || p[len(p)-1] != 0 {
		return request{}, errors.New("not ended by a zero byte")
	}
	fields := strings.Split(string(p[2:len(p)-1]), "\x00")
	if len(fields) < 2 || fields[0] == "" || fields[1] == "" {
		return request{}, errors.New("no file name or mode")
	}
	if len(fields)%2 != 0 {
		return request{}, errors.New("an option without a value")
	}
	r := request{filename: fields[0], mode: fields[1]}
	for i := 2; i+1 < len(fields); i += 2 {
		if r.options == nil {
			r.options = map[string]string{}
		}
		r.options[strings.ToLower(fields[i])] = fields[i+1]
	}
	return r, nil
}

func opcode(p []byte) uint16 {
	if len(p) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

// sendError sends an ERROR packet; a failure to send is the client's loss only.
func sendError(conn net.PacketConn, to net.Addr, code uint16, msg string) {
	p := make([]byte, 4, 5+len(msg))
	binary.BigEndian.PutUint16(p, opERROR)
	binary.BigEndian.PutUint16(p[2:], code)
	p = append(append(p, msg...), 0)
	_, _ = conn.WriteTo(p, to)
}

// truncate bounds a client-chosen name before it is logged.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
