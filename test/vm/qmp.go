package vm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// qmpCommandTimeout bounds one QMP command: QEMU answers the ones this package sends at once,
// so only a wedged QEMU passes it.
const qmpCommandTimeout = time.Minute

// qmpConn is a QMP monitor connection running one command at a time. It reads QEMU's
// answers on the caller's goroutine, each line into a buffer of its own, and skips the
// asynchronous events in between (DEVICE_TRAY_MOVED after a media change, RESET, ...).
//
// It replaces go-qemu's SocketMonitor, whose reader goroutine hands a command's answer over
// in bufio.Scanner's buffer and scans the next line into that same buffer: an event right
// behind an answer (as after eject or system_reset) could overwrite the answer while it was
// being decoded, which the race detector showed.
type qmpConn struct {
	mu     sync.Mutex // one command at a time
	conn   net.Conn
	r      *bufio.Reader
	nextID uint64
}

// qmpError is an error QEMU answered a command with.
type qmpError struct {
	Class string `json:"class"`
	Desc  string `json:"desc"`
}

func (e *qmpError) Error() string { return e.Class + ": " + e.Desc }

// dialQMP connects to a QMP socket, reads the greeting and leaves negotiation mode, all
// within timeout.
func dialQMP(socket string, timeout time.Duration) (*qmpConn, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	q := &qmpConn{conn: conn, r: bufio.NewReader(conn)}
	if err := q.handshake(time.Now().Add(timeout)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return q, nil
}

func (q *qmpConn) handshake(deadline time.Time) error {
	if err := q.conn.SetDeadline(deadline); err != nil {
		return err
	}
	line, err := q.r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("read the QMP greeting: %w", err)
	}
	var greeting struct {
		QMP *json.RawMessage `json:"QMP"`
	}
	if err := json.Unmarshal(line, &greeting); err != nil || greeting.QMP == nil {
		return fmt.Errorf("not a QMP greeting: %q", line)
	}
	_, err = q.exchange("qmp_capabilities", nil, deadline)
	return err
}

// run executes one command (args may be nil) and returns its "return" value.
func (q *qmpConn) run(command string, args any) (json.RawMessage, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.exchange(command, args, time.Now().Add(qmpCommandTimeout))
}

// exchange sends a command and reads lines until its answer; the caller holds q.mu or owns
// q alone. Each command carries an id, so an answer a timed-out command left behind is never
// taken for a later command's.
func (q *qmpConn) exchange(command string, args any, deadline time.Time) (json.RawMessage, error) {
	q.nextID++
	id := q.nextID
	req := map[string]any{"execute": command, "id": id}
	if args != nil {
		req["arguments"] = args
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if err := q.conn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := q.conn.Write(append(data, '\n')); err != nil {
		return nil, err
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return nil, err
		}
		var msg struct {
			Event  string          `json:"event"`
			ID     *uint64         `json:"id"`
			Return json.RawMessage `json:"return"`
			Error  *qmpError       `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, fmt.Errorf("read the answer %q: %w", line, err)
		}
		if msg.Event != "" || msg.ID == nil || *msg.ID != id {
			continue // an event, or the late answer of an earlier command
		}
		if msg.Error != nil {
			return nil, msg.Error
		}
		if msg.Return == nil {
			return nil, fmt.Errorf("an answer without return or error: %q", line)
		}
		return msg.Return, nil
	}
}

// close ends the connection; a command waiting for its answer fails.
func (q *qmpConn) close() error {
	err := q.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
