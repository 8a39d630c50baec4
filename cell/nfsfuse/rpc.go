package nfsfuse

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ONC RPC version 2 (RFC 5531) over TCP with record marking, as NFSv3
// (RFC 1813), MOUNT v3 and the portmapper (RFC 1833) use it.

const (
	rpcCall       = 0
	rpcReply      = 1
	msgAccepted   = 0
	msgDenied     = 1
	authNone      = 0
	authSys       = 1
	lastFragment  = 1 << 31
	maxRecordSize = 4 << 20 // larger than any reply to the sizes we ask for
)

// cred is the AUTH_SYS credential a call carries: the FUSE caller's, so the
// server decides permissions as it does for a kernel client's process.
type cred struct {
	uid, gid uint32
	gids     []uint32
}

// rpcError is a call the server did not execute (an RPC-level refusal, not
// an NFS status); auth is a refused credential (AUTH_ERROR).
type rpcError struct {
	msg  string
	auth bool
}

func (e *rpcError) Error() string { return "rpc: " + e.msg }

// errClosed is a call on a client closed after the unmount: not retried.
var errClosed = errors.New("rpc: client closed")

// errTimedOut is a soft mount's call that failed retrans + 1 times.
var errTimedOut = errors.New("rpc: giving up (soft mount)")

// rpcClient makes calls to one TCP address. Calls are multiplexed by XID on
// one connection (not serialized); a connection that breaks is redialled and
// the calls in flight are sent again with the same XID, so that a server's
// duplicate request cache can recognize them.
type rpcClient struct {
	addr     string
	resvport bool          // bind a reserved source port (below 1024), as the kernel client does
	timeout  time.Duration // timeo: how long a call waits for its answer before it is sent again
	retrans  int           // soft mounts: how many times a call is sent again before it fails
	log      *slog.Logger
	machine  string

	// ready is set once the mount is set up: calls are retried from then
	// on (forever unless soft), while a server that does not answer during
	// setup fails the mount at once.
	ready atomic.Bool
	soft  bool

	xid atomic.Uint32

	mu     sync.Mutex
	conn   *rpcConn
	closed bool
}

func newRPCClient(addr string, s settings, log *slog.Logger) *rpcClient {
	host, _ := os.Hostname()
	c := &rpcClient{
		addr:     addr,
		resvport: s.resvport,
		timeout:  s.timeo,
		retrans:  s.retrans,
		soft:     s.soft,
		log:      log.With("server", addr),
		machine:  host,
	}
	c.xid.Store(rand.Uint32()) //nolint:gosec // G404: a transaction id needs to differ, not to be secret (RFC 5531)
	return c
}

// rpcConn is one TCP connection and the calls waiting on it.
type rpcConn struct {
	c       net.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[uint32]chan []byte
	dead    chan struct{} // closed once the connection failed
	err     error
}

func (rc *rpcConn) fail(err error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	select {
	case <-rc.dead:
		return
	default:
	}
	rc.err = err
	close(rc.dead)
	_ = rc.c.Close()
}

func (rc *rpcConn) readLoop() {
	r := bufio.NewReaderSize(rc.c, 256<<10)
	for {
		rec, err := readRecord(r)
		if err != nil {
			rc.fail(err)
			return
		}
		if len(rec) < 8 {
			continue
		}
		xid := binary.BigEndian.Uint32(rec)
		rc.mu.Lock()
		ch := rc.pending[xid]
		delete(rc.pending, xid)
		rc.mu.Unlock()
		if ch != nil {
			ch <- rec[4:]
		}
	}
}

// readRecord reads one RPC record: fragments until the last one.
func readRecord(r io.Reader) ([]byte, error) {
	var rec []byte
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		h := binary.BigEndian.Uint32(hdr[:])
		n := int(h &^ lastFragment)
		if len(rec)+n > maxRecordSize {
			return nil, fmt.Errorf("reading a reply: record of more than %d bytes", maxRecordSize)
		}
		start := len(rec)
		rec = append(rec, make([]byte, n)...)
		if _, err := io.ReadFull(r, rec[start:]); err != nil {
			return nil, err
		}
		if h&lastFragment != 0 {
			return rec, nil
		}
	}
}

func (c *rpcClient) close() {
	c.mu.Lock()
	c.closed = true
	conn := c.conn
	c.mu.Unlock()
	if conn != nil {
		conn.fail(errors.New("client closed"))
	}
}

// connection returns the live connection, dialling one when there is none.
func (c *rpcClient) connection(ctx context.Context) (*rpcConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.conn != nil {
		select {
		case <-c.conn.dead:
			c.conn = nil
		default:
			return c.conn, nil
		}
	}
	nc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	rc := &rpcConn{c: nc, pending: map[uint32]chan []byte{}, dead: make(chan struct{})}
	go rc.readLoop()
	c.conn = rc
	return rc, nil
}

// dial connects, from a reserved port when resvport is set and we are root:
// a Linux server refuses other ports unless the export says "insecure".
// Where every reserved port is taken it falls back to an ephemeral one.
func (c *rpcClient) dial(ctx context.Context) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if c.resvport && os.Geteuid() == 0 {
		for range 32 {
			d := net.Dialer{LocalAddr: &net.TCPAddr{Port: 665 + rand.IntN(1024-665)}} //nolint:gosec // G404: a free reserved port, not a secret
			nc, err := d.DialContext(dctx, "tcp", c.addr)
			if err == nil {
				return nc, nil
			}
			if !errors.Is(err, syscall.EADDRINUSE) && !errors.Is(err, syscall.EADDRNOTAVAIL) {
				return nil, err
			}
		}
	}
	var d net.Dialer
	return d.DialContext(dctx, "tcp", c.addr)
}

// call sends one call and returns the body of its reply (after the
// accept status). It retries a lost connection and an unanswered call:
// forever on a hard mount once set up (until ctx ends), retrans times on a
// soft one, and not at all while the mount is set up.
func (c *rpcClient) call(ctx context.Context, prog, vers, proc uint32, cr *cred, args []byte) ([]byte, error) {
	xid := c.xid.Add(1)
	var e enc
	e.u32(0) // record mark, filled below
	e.u32(xid)
	e.u32(rpcCall)
	e.u32(2)
	e.u32(prog)
	e.u32(vers)
	e.u32(proc)
	if cr == nil {
		e.u32(authNone)
		e.opaque(nil)
	} else {
		var a enc
		a.u32(uint32(time.Now().Unix()))
		a.str(c.machine)
		a.u32(cr.uid)
		a.u32(cr.gid)
		gids := cr.gids
		if len(gids) > 16 { // AUTH_SYS carries at most 16
			gids = gids[:16]
		}
		a.u32(uint32(len(gids)))
		for _, g := range gids {
			a.u32(g)
		}
		e.u32(authSys)
		e.opaque(a.b)
	}
	e.u32(authNone) // verifier
	e.opaque(nil)
	e.b = append(e.b, args...)
	binary.BigEndian.PutUint32(e.b, uint32(len(e.b)-4)|lastFragment)

	backoff := 100 * time.Millisecond
	for attempt := 0; ; attempt++ {
		reply, err := c.send(ctx, xid, e.b)
		if err == nil {
			if attempt > 0 {
				c.log.Info("server answering again", "attempts", attempt+1)
			}
			return parseReply(reply)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errClosed) {
			return nil, err
		}
		switch {
		case !c.ready.Load():
			return nil, err
		case c.soft && attempt >= c.retrans:
			return nil, fmt.Errorf("%w: %w", errTimedOut, err)
		}
		c.log.Warn("server not responding, still trying", "error", err, "attempt", attempt+1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

var errNoAnswer = errors.New("no answer within timeo")

// send writes the call on the current connection and waits for its answer,
// the connection's end, ctx's end or timeo.
func (c *rpcClient) send(ctx context.Context, xid uint32, msg []byte) ([]byte, error) {
	rc, err := c.connection(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", c.addr, err)
	}
	ch := make(chan []byte, 1)
	rc.mu.Lock()
	rc.pending[xid] = ch
	rc.mu.Unlock()
	defer func() {
		rc.mu.Lock()
		delete(rc.pending, xid)
		rc.mu.Unlock()
	}()
	rc.wmu.Lock()
	_ = rc.c.SetWriteDeadline(time.Now().Add(c.timeout))
	_, err = rc.c.Write(msg)
	rc.wmu.Unlock()
	if err != nil {
		rc.fail(err)
		return nil, fmt.Errorf("sending to %s: %w", c.addr, err)
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	select {
	case reply := <-ch:
		return reply, nil
	case <-rc.dead:
		return nil, fmt.Errorf("connection to %s lost: %w", c.addr, rc.err)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
		// A TCP connection that leaves a call unanswered for timeo is
		// dropped and the call sent on a new one, as the kernel client does.
		rc.fail(errNoAnswer)
		return nil, errNoAnswer
	}
}

// parseReply checks the reply header (after the XID) and returns the body.
func parseReply(b []byte) ([]byte, error) {
	d := dec{b: b}
	if d.u32() != rpcReply {
		return nil, &rpcError{msg: "not a reply"}
	}
	switch d.u32() {
	case msgAccepted:
		d.u32()         // verifier flavor
		d.opaque(400)   // verifier body
		stat := d.u32() // accept_stat
		if d.err != nil {
			return nil, d.err
		}
		switch stat {
		case 0:
			return d.b, nil
		case 1:
			return nil, &rpcError{msg: "program unavailable"}
		case 2:
			return nil, &rpcError{msg: fmt.Sprintf("program version mismatch (the server has %d to %d)", d.u32(), d.u32())}
		case 3:
			return nil, &rpcError{msg: "procedure unavailable"}
		case 4:
			return nil, &rpcError{msg: "garbage arguments"}
		default:
			return nil, &rpcError{msg: "system error"}
		}
	case msgDenied:
		if d.u32() == 0 {
			return nil, &rpcError{msg: "RPC version mismatch"}
		}
		return nil, &rpcError{msg: fmt.Sprintf("authentication error %d", d.u32()), auth: true}
	}
	return nil, &rpcError{msg: "malformed reply"}
}
