package testreport

import (
	"bytes"
	"io"
	"sync"
)

// prefixWriter writes each line written to it to w with prefix before it,
// a whole line at a time: the output of steps run at once (make e2e's
// cloud passes) interleaves by lines, each saying whose it is.
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix []byte
	line   []byte // the start of a line not ended yet
}

// newPrefixWriter returns w itself when prefix is empty.
func newPrefixWriter(w io.Writer, prefix string) io.Writer {
	if prefix == "" || w == nil {
		return w
	}
	return &prefixWriter{w: w, prefix: []byte(prefix)}
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.line = append(p.line, b...)
			break
		}
		out := append(append(append([]byte(nil), p.prefix...), p.line...), b[:i+1]...)
		p.line = p.line[:0]
		b = b[i+1:]
		if _, err := p.w.Write(out); err != nil {
			return n - len(b), err
		}
	}
	return n, nil
}

// Flush writes a last line that did not end, ended.
func (p *prefixWriter) Flush() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.line) == 0 {
		return nil
	}
	out := append(append(append([]byte(nil), p.prefix...), p.line...), '\n')
	p.line = p.line[:0]
	_, err := p.w.Write(out)
	return err
}

// flush flushes w if it is a prefixWriter.
func flush(w io.Writer) {
	if p, ok := w.(*prefixWriter); ok {
		_ = p.Flush()
	}
}
