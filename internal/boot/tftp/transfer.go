package tftp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// A transfer waits this long for each acknowledgement, and sends a packet this many times more
// before giving up: a client gone mid-transfer holds its slot for at most ~12 s.
const (
	ackTimeout = 2 * time.Second
	retries    = 5
)

var (
	errCanceled = errors.New("canceled") // shutdown, or the client asked again
	// errDeclined is the client answering the options with an error before any data: PXE
	// ROMs do it to learn a file's size (tsize), then ask again.
	errDeclined = errors.New("the client declined the options")
)

// transfer sends one file to one client (address and port), block by block, each sent again
// until acknowledged.
type transfer struct {
	server *Server
	conn   net.PacketConn
	peer   *net.UDPAddr
	name   string
	file   io.ReadCloser // set by Server.open
	size   int64
	opts   map[string]string

	// in gets the client's packets from the server's read loop. It is never closed: a packet
	// arriving as the transfer ends is dropped with the channel, not sent on a closed one.
	in     chan []byte
	ctx    context.Context
	cancel context.CancelFunc
}

// deliver hands the transfer a packet of its client; when the transfer is behind, the packet
// is dropped and the client sends it again.
func (t *transfer) deliver(p []byte) {
	select {
	case t.in <- append([]byte(nil), p...):
	default:
	}
}

func (t *transfer) run() {
	defer t.cancel()
	s := t.server
	if !s.open(t) {
		return
	}
	defer t.file.Close()
	n, err := t.send()
	if s.OnSent != nil && n > 0 {
		s.OnSent(n)
	}
	switch {
	case err == nil, errors.Is(err, errCanceled), errors.Is(err, errDeclined):
	default:
		s.count(ErrorTransfer)
		s.Log.Info("TFTP transfer failed", "client", t.peer.String(), "file", t.name, "bytes", n, "error", err.Error())
	}
}

// send negotiates the options the client asked for, then sends the file; it returns the bytes
// of the file sent.
func (t *transfer) send() (int64, error) {
	blk := 512
	var oack []byte
	if v, ok := t.opts["blksize"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 8 {
			blk = min(n, blockSize)
			oack = appendOption(oack, "blksize", strconv.Itoa(blk))
		}
	}
	if _, ok := t.opts["tsize"]; ok {
		oack = appendOption(oack, "tsize", strconv.FormatInt(t.size, 10))
	}
	if len(oack) > 0 {
		p := binary.BigEndian.AppendUint16(nil, opOACK)
		if err := t.exchange(append(p, oack...), 0); err != nil {
			var ce clientError
			if errors.As(err, &ce) {
				return 0, fmt.Errorf("%w: %w", errDeclined, err)
			}
			return 0, err
		}
	}
	buf := make([]byte, 4+blk)
	binary.BigEndian.PutUint16(buf, opDATA)
	var sent int64
	for block := uint16(1); ; block++ { // wraps after 65,535 blocks, as clients expect
		l, err := io.ReadFull(t.file, buf[4:])
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			sendError(t.conn, t.peer, errNotDefined, "read error")
			return sent, fmt.Errorf("reading %s: %w", t.name, err)
		}
		binary.BigEndian.PutUint16(buf[2:], block)
		if err := t.exchange(buf[:4+l], block); err != nil {
			return sent, err
		}
		sent += int64(l)
		if l < blk {
			return sent, nil
		}
	}
}

// exchange sends p until the client acknowledges block.
func (t *transfer) exchange(p []byte, block uint16) error {
	for try := 0; try <= retries; try++ {
		if _, err := t.conn.WriteTo(p, t.peer); err != nil {
			return fmt.Errorf("sending block %d: %w", block, err)
		}
		timer := time.NewTimer(ackTimeout)
		acked, err := t.awaitAck(block, timer.C)
		timer.Stop()
		if err != nil || acked {
			return err
		}
	}
	return fmt.Errorf("block %d not acknowledged after %d tries", block, retries+1)
}

// awaitAck waits for the acknowledgement of block: true when it came, false when expired fired
// first. An acknowledgement of an earlier block is a duplicate and is ignored: answering it
// would double every packet after it (the Sorcerer's Apprentice bug, RFC 1123 4.2.3.1).
func (t *transfer) awaitAck(block uint16, expired <-chan time.Time) (bool, error) {
	for {
		select {
		case <-t.ctx.Done():
			return false, errCanceled
		case <-expired:
			return false, nil
		case p := <-t.in:
			switch opcode(p) {
			case opACK:
				if len(p) >= 4 && binary.BigEndian.Uint16(p[2:]) == block {
					return true, nil
				}
			case opERROR:
				return false, newClientError(p)
			}
		}
	}
}

// clientError is an ERROR packet from the client: it ends the transfer.
type clientError struct {
	code uint16
	msg  string
}

func newClientError(p []byte) clientError {
	e := clientError{}
	if len(p) >= 4 {
		e.code = binary.BigEndian.Uint16(p[2:])
		e.msg = truncate(string(trimZero(p[4:])))
	}
	return e
}

func (e clientError) Error() string {
	if e.code == errOptionDenied {
		return "the client refused the options: " + e.msg
	}
	return fmt.Sprintf("the client ended the transfer (error %d): %s", e.code, e.msg)
}

func trimZero(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

func appendOption(b []byte, name, value string) []byte {
	b = append(append(b, name...), 0)
	return append(append(b, value...), 0)
}
