package nfsfuse

import (
	"encoding/binary"
	"errors"
)

// XDR (RFC 4506) is written by hand here: the few shapes NFSv3 uses are
// unsigned integers, hypers, booleans, opaques and strings, and a reflection
// codec would hide the optional ("discriminated union") fields that the
// replies are full of.

// enc appends XDR values to a buffer.
type enc struct{ b []byte }

func (e *enc) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *enc) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }

func (e *enc) boolean(v bool) {
	if v {
		e.u32(1)
	} else {
		e.u32(0)
	}
}

// opaque writes variable-length opaque data: its length, the bytes, and
// zero padding to a multiple of four.
func (e *enc) opaque(p []byte) {
	e.u32(uint32(len(p)))
	e.fixed(p)
}

// fixed writes fixed-length opaque data (no length), padded.
func (e *enc) fixed(p []byte) {
	e.b = append(e.b, p...)
	e.b = append(e.b, make([]byte, (4-len(p)%4)%4)...)
}

func (e *enc) str(s string) { e.opaque([]byte(s)) }

// errShort is a reply that ended before its last field.
var errShort = errors.New("decoding the reply: truncated")

// dec reads XDR values from a reply; the first error sticks and every later
// read returns zero, so a decoder checks err once at the end.
type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || len(d.b) < n {
		d.err = errShort
		d.b = nil
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *dec) u32() uint32 {
	p := d.take(4)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (d *dec) u64() uint64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

func (d *dec) boolean() bool { return d.u32() != 0 }

func (d *dec) fixed(n int) []byte {
	p := d.take(n)
	d.take((4 - n%4) % 4)
	if d.err != nil {
		return nil
	}
	return append([]byte(nil), p...)
}

// opaque reads variable-length opaque data no longer than limit.
func (d *dec) opaque(limit int) []byte {
	n := d.u32()
	if d.err == nil && n > uint32(limit) {
		d.err = errors.New("decoding the reply: opaque longer than its limit")
		return nil
	}
	return d.fixed(int(n))
}

func (d *dec) str(limit int) string { return string(d.opaque(limit)) }
