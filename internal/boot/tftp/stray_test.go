package tftp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawFetch reads name over conn with a plain RFC 1350 exchange (no options, 512-byte blocks),
// as the server at addr answers it. Like a PXE ROM it sends its request again when nothing
// answers it within deadline (a busy socket may have dropped it), up to three times.
func rawFetch(conn net.PacketConn, addr string, name string, deadline time.Duration) ([]byte, error) {
	to, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		return nil, err
	}
	rrq := append([]byte{0, 1}, name...)
	rrq = append(rrq, 0)
	rrq = append(append(rrq, "octet"...), 0)
	if _, err := conn.WriteTo(rrq, to); err != nil {
		return nil, err
	}
	var got bytes.Buffer
	buf := make([]byte, 1024)
	want := uint16(1)
	resent := 0
	for {
		if err := conn.SetReadDeadline(time.Now().Add(deadline)); err != nil {
			return nil, err
		}
		n, from, err := conn.ReadFrom(buf)
		var ne net.Error
		if err != nil && errors.As(err, &ne) && ne.Timeout() && want == 1 && resent < 3 {
			resent++
			if _, err := conn.WriteTo(rrq, to); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return got.Bytes(), err
		}
		if n < 4 {
			continue
		}
		switch binary.BigEndian.Uint16(buf) {
		case 5:
			return got.Bytes(), errors.New("TFTP error: " + string(buf[4:n]))
		case 3:
		default:
			continue
		}
		block := binary.BigEndian.Uint16(buf[2:])
		if block == want {
			got.Write(buf[4:n])
			want++
		}
		ack := []byte{0, 4, 0, 0}
		binary.BigEndian.PutUint16(ack[2:], block)
		if _, err := conn.WriteTo(ack, from); err != nil {
			return nil, err
		}
		if block == want-1 && n < 4+512 {
			return got.Bytes(), nil
		}
	}
}

// A stray byte from a source, then a read request from the same address and port: the request
// is answered (in pin/tftp's single-port mode the stray byte cut the source off for good).
func TestStrayPacketDoesNotBlockItsSource(t *testing.T) {
	addr, payload, counts := serve(t)
	to, err := net.ResolveUDPAddr("udp4", addr)
	require.NoError(t, err)
	for _, stray := range [][]byte{{0x42}, {0, 4, 0, 1}, {0, 3, 0, 1, 'x'}, {0, 1}, {0, 9, 9, 9}} {
		conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
		require.NoError(t, err)
		_, err = conn.WriteTo(stray, to)
		require.NoError(t, err)
		got, err := rawFetch(conn, addr, "undionly.kpxe", 3*time.Second)
		_ = conn.Close()
		require.NoError(t, err, "after a stray %x", stray)
		assert.Equal(t, payload, got, "after a stray %x", stray)
	}
	_, errs := counts.snapshot()
	assert.Equal(t, 5, errs[ErrorStray], "each stray packet is counted")
}

// Stray packets from many sources leave nothing behind: the heap does not grow with them.
func TestStrayPacketsFromManySourcesKeepNoState(t *testing.T) {
	addr, payload, _ := serve(t)
	to, err := net.ResolveUDPAddr("udp4", addr)
	require.NoError(t, err)
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// One fetch first, so that whatever a first transfer allocates for good is counted before.
	fetchOnce := func() {
		// From another address than the stray sources: none of their ports can be reused.
		conn, err := net.ListenPacket("udp4", "127.0.0.2:0")
		require.NoError(t, err)
		defer conn.Close()
		got, err := rawFetch(conn, addr, "undionly.kpxe", 3*time.Second)
		require.NoError(t, err)
		require.Equal(t, payload, got)
	}
	fetchOnce()
	before := heap()
	const sources = 20000
	for i := 0; i < sources; i++ {
		conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
		require.NoError(t, err)
		_, err = conn.WriteTo([]byte{0, 4, 0, byte(i)}, to)
		_ = conn.Close()
		require.NoError(t, err)
		// The server reads its socket in order: once a later request is answered, every
		// stray before it has been read. Batches small enough for the socket's buffer, so
		// that the strays reach the server rather than being dropped by the kernel.
		if i%200 == 199 {
			fetchOnce()
		}
	}
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("heap before %d, after %d stray sources: %d (%+d bytes)", before, sources, after, grown)
	assert.Less(t, grown, int64(512<<10), "the heap grew with the stray sources")
}

// A PXE ROM learns a file's size first: a read request with tsize, the OACK answered with an
// error, then the read request again from the same port. Both are served; neither counts as a
// failed transfer.
func TestTsizeProbeThenRead(t *testing.T) {
	addr, payload, counts := serve(t)
	to, err := net.ResolveUDPAddr("udp4", addr)
	require.NoError(t, err)
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer conn.Close()
	rrq := []byte("\x00\x01undionly.kpxe\x00octet\x00tsize\x000\x00")
	_, err = conn.WriteTo(rrq, to)
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(3*time.Second)))
	buf := make([]byte, 1024)
	n, from, err := conn.ReadFrom(buf)
	require.NoError(t, err)
	require.Equal(t, uint16(opOACK), binary.BigEndian.Uint16(buf))
	assert.Equal(t, "tsize\x00"+strconv.Itoa(len(payload))+"\x00", string(buf[2:n]))
	_, err = conn.WriteTo([]byte("\x00\x05\x00\x08size known\x00"), from)
	require.NoError(t, err)

	got, err := rawFetch(conn, addr, "undionly.kpxe", 3*time.Second)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	_, errs := counts.snapshot()
	assert.Zero(t, errs[ErrorTransfer])
}
