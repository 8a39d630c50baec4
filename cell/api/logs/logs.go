package logs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MaxLineSize is the longest content written as one log record; longer
// lines are split into partial (P) records, as the kubelet does.
const MaxLineSize = 16 << 10

// Stream names, as written in the files.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Rotation bounds an attempt's log on disk, as the kubelet's
// containerLogMaxSize and containerLogMaxFiles do.
type Rotation struct {
	// MaxSize is the size past which the current file is rotated.
	MaxSize int64
	// MaxFiles is how many files an attempt keeps, the current one
	// included; at least 2.
	MaxFiles int
}

// DefaultRotation is the kubelet's default: 10 MiB, 5 files.
var DefaultRotation = Rotation{MaxSize: 10 << 20, MaxFiles: 5}

// flushSize is how much a write gathers before it goes to the file, and
// the size of a reader's buffer: a record longer than readSize is served
// in pieces.
const (
	flushSize = 64 << 10
	readSize  = 64 << 10
)

// Store hands out log files under a directory and knows which of them are
// still being written, so that a follow can wait for more.
type Store struct {
	dir string
	rot Rotation
	now func() time.Time

	mu   sync.Mutex
	live map[string]*File
}

// Option sets up a Store.
type Option func(*Store)

// WithRotation sets the store's rotation (SetRotation).
func WithRotation(r Rotation) Option {
	return func(s *Store) { s.rot = r.orDefault() }
}

// SetRotation sets the rotation of the files the store creates or opens
// from now on; a zero field keeps the default, and MaxFiles is at least
// 2. Files already open keep theirs.
func (s *Store) SetRotation(r Rotation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rot = r.orDefault()
}

// orDefault is r with DefaultRotation's value for a zero field and
// MaxFiles at least 2.
func (r Rotation) orDefault() Rotation {
	if r.MaxSize <= 0 {
		r.MaxSize = DefaultRotation.MaxSize
	}
	if r.MaxFiles <= 0 {
		r.MaxFiles = DefaultRotation.MaxFiles
	}
	r.MaxFiles = max(r.MaxFiles, 2)
	return r
}

// NewStore returns a store keeping its files under dir, rotated with
// DefaultRotation unless an option says otherwise.
func NewStore(dir string, opts ...Option) *Store {
	s := &Store{dir: dir, rot: DefaultRotation, now: time.Now, live: map[string]*File{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Path is the current file of a container's attempt. Files rotated out of
// it are beside it, named by rotatedPath.
func (s *Store) Path(container string, attempt int) string {
	return filepath.Join(s.ContainerDir(container), strconv.Itoa(attempt)+".log")
}

// ContainerDir is the directory of all a container's files: every
// attempt's, rotated ones too.
func (s *Store) ContainerDir(container string) string {
	return filepath.Join(s.dir, container)
}

// rotatedSuffix joins a current file's path and its generation in the
// name of a rotated file: 0.log.rotated-3 is the fourth file of attempt 0.
const rotatedSuffix = ".rotated-"

func rotatedPath(path string, gen int) string {
	return path + rotatedSuffix + strconv.Itoa(gen)
}

// rotatedGens lists the generations of the files rotated out of path,
// oldest first.
func rotatedGens(path string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Dir(path))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing log files: %w", err)
	}
	prefix := filepath.Base(path) + rotatedSuffix
	var gens []int
	for _, e := range entries {
		if rest, ok := strings.CutPrefix(e.Name(), prefix); ok {
			if g, err := strconv.Atoi(rest); err == nil && g >= 0 {
				gens = append(gens, g)
			}
		}
	}
	slices.Sort(gens)
	return gens, nil
}

// removeFiles removes the current file of path and those rotated out of
// it; it reports whether the current file was there.
func removeFiles(path string) bool {
	gens, _ := rotatedGens(path)
	for _, g := range gens {
		_ = os.Remove(rotatedPath(path, g))
	}
	return !errors.Is(os.Remove(path), os.ErrNotExist)
}

// Create creates (truncating) the file of a container's attempt and
// removes the files of attempts older than the previous one.
func (s *Store) Create(container string, attempt int) (*File, error) {
	removeFiles(s.Path(container, attempt))
	lf, err := s.open(container, attempt, os.O_TRUNC)
	if err != nil {
		return nil, err
	}
	for old := attempt - 2; old >= 0; old-- {
		if !removeFiles(s.Path(container, old)) {
			break
		}
	}
	return lf, nil
}

// Append opens the file of a container's attempt to write on at its end:
// the attempt an earlier agent wrote, which this agent took over.
func (s *Store) Append(container string, attempt int) (*File, error) {
	return s.open(container, attempt, os.O_APPEND)
}

func (s *Store) open(container string, attempt, flag int) (*File, error) {
	path := s.Path(container, attempt)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("creating log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening log file: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("opening log file: %w", err)
	}
	gen := 0
	if gens, err := rotatedGens(path); err == nil && len(gens) > 0 {
		gen = gens[len(gens)-1] + 1
	}
	s.mu.Lock()
	lf := &File{
		path: path, rot: s.rot, f: f, size: fi.Size(), gen: gen, now: s.now,
		changed: make(chan struct{}), done: make(chan struct{}), store: s,
	}
	s.live[path] = lf
	s.mu.Unlock()
	return lf, nil
}

// RemoveAll deletes every log file.
func (s *Store) RemoveAll() error {
	if err := os.RemoveAll(s.dir); err != nil {
		return fmt.Errorf("removing logs: %w", err)
	}
	return nil
}

func (s *Store) liveFile(path string) *File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[path]
}

// File is one attempt's log, written by the container's stdout and stderr.
// What it holds in memory is bounded: an unfinished line of each stream
// (at most MaxLineSize) and one write's records (about flushSize).
type File struct {
	path  string
	rot   Rotation
	now   func() time.Time
	store *Store

	mu      sync.Mutex
	f       *os.File
	size    int64 // of the current file
	gen     int   // the current file's generation: rotated, it becomes rotatedPath(path, gen)
	partial map[string][]byte
	out     bytes.Buffer
	changed chan struct{} // closed and replaced on every write
	done    chan struct{} // closed by Close
	closed  bool
	// lost counts the bytes of records a failed write dropped (a full
	// disk), lostErr the last failure: Close reports them.
	lost    int64
	lostErr error
}

// Path is the file's path.
func (f *File) Path() string { return f.path }

// Stream returns a writer for one stream (Stdout or Stderr). Writes are
// split into lines; each line gets the time it was completed.
func (f *File) Stream(name string) io.Writer { return streamWriter{f: f, name: name} }

type streamWriter struct {
	f    *File
	name string
}

func (w streamWriter) Write(p []byte) (int, error) { return w.f.write(w.name, p) }

func (f *File) write(stream string, p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return 0, os.ErrClosed
	}
	if f.partial == nil {
		f.partial = map[string][]byte{}
	}
	partial := f.partial[stream]
	ts := f.now().UTC().Format(time.RFC3339Nano)
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		line := p
		if i >= 0 {
			line = p[:i]
		}
		if room := MaxLineSize - len(partial); len(line) > room {
			// The line outgrows a record: a partial one, full.
			f.record(ts, stream, 'P', partial, p[:room])
			partial, p = partial[:0], p[room:]
		} else if i < 0 {
			partial, p = append(partial, p...), nil
		} else {
			f.record(ts, stream, 'F', partial, line)
			partial, p = partial[:0], p[i+1:]
		}
		if f.out.Len() >= flushSize {
			f.flushLocked()
		}
	}
	f.partial[stream] = partial
	f.flushLocked()
	return n, nil
}

// record adds one record, its content head and tail, to f.out.
func (f *File) record(ts, stream string, tag byte, head, tail []byte) {
	f.out.WriteString(ts)
	f.out.WriteByte(' ')
	f.out.WriteString(stream)
	f.out.WriteByte(' ')
	f.out.WriteByte(tag)
	f.out.WriteByte(' ')
	f.out.Write(head)
	f.out.Write(tail)
	f.out.WriteByte('\n')
}

// flushLocked writes f.out to the file, tells followers, and rotates the
// file once it is past its size. What it cannot write (a full disk) is
// dropped and counted (lost), as a kubelet's runtime drops log lines it
// cannot write: the container's writes never fail nor wait for the disk,
// which would stall the container on its own output.
func (f *File) flushLocked() {
	if f.out.Len() == 0 {
		return
	}
	n, err := f.f.Write(f.out.Bytes())
	if err != nil && n > 0 {
		// Not half a record: back to where the write began.
		if f.f.Truncate(f.size) == nil {
			if _, serr := f.f.Seek(f.size, io.SeekStart); serr == nil {
				n = 0
			}
		}
	}
	f.size += int64(n)
	if err != nil {
		f.lost += int64(f.out.Len() - n)
		f.lostErr = err
	}
	f.out.Reset()
	if f.out.Cap() > 4*flushSize {
		f.out = bytes.Buffer{}
	}
	close(f.changed)
	f.changed = make(chan struct{})
	if f.size >= f.rot.MaxSize {
		// A failed rotation leaves the current file growing; the next
		// write tries again.
		_ = f.rotateLocked()
	}
}

// rotateLocked renames the current file to its rotated name, starts a new
// one and removes the rotated files past the rotation's count. A reader
// that opened the renamed file goes on reading it (see follower).
func (f *File) rotateLocked() error {
	rotated := rotatedPath(f.path, f.gen)
	if err := os.Rename(f.path, rotated); err != nil {
		return fmt.Errorf("rotating log: %w", err)
	}
	nf, err := os.OpenFile(f.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		_ = os.Rename(rotated, f.path)
		return fmt.Errorf("rotating log: %w", err)
	}
	_ = f.f.Close()
	f.f, f.size = nf, 0
	f.gen++
	for g := f.gen - f.rot.MaxFiles; g >= 0; g-- {
		if err := os.Remove(rotatedPath(f.path, g)); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	return nil
}

// Close writes what is left of unfinished lines as partial lines and ends
// the file: followers stop once they have read it.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	ts := f.now().UTC().Format(time.RFC3339Nano)
	for _, stream := range []string{Stdout, Stderr} {
		if p := f.partial[stream]; len(p) > 0 {
			f.record(ts, stream, 'P', p, nil)
		}
	}
	f.partial = nil
	f.flushLocked()
	var werr error
	if f.lost > 0 {
		werr = fmt.Errorf("writing log: %d bytes of the container's output lost: %w", f.lost, f.lostErr)
	}
	cerr := f.f.Close()
	f.closed = true
	close(f.done)
	// Wake the followers even when nothing was left to flush: one that
	// has read everything waits on changed, and must see the end.
	close(f.changed)
	f.changed = make(chan struct{})
	f.store.mu.Lock()
	delete(f.store.live, f.path)
	f.store.mu.Unlock()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("closing log: %w", err)
	}
	return nil
}

// wait returns a channel closed at the next write or at Close, and the
// generation of the current file.
func (f *File) wait() (<-chan struct{}, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed, f.gen
}

// Options select what Read writes, as in core/v1 PodLogOptions.
type Options struct {
	Follow bool
	// TailLines: negative means all lines. A line is a record: a line
	// longer than MaxLineSize counts as several, as on a kubelet.
	TailLines int64
	// Since: only lines written at or after it; zero means all.
	Since      time.Time
	Timestamps bool
	// LimitBytes: zero or negative means no limit.
	LimitBytes int64
}

// Entry is one parsed log record, or a piece of one: Partial says that
// the line goes on in the next entry.
type Entry struct {
	Time    time.Time
	Stream  string
	Partial bool
	Content []byte
}

// ParseLine parses one line of a log file (without its newline). The
// entry's content is a slice of line.
func ParseLine(line []byte) (Entry, error) {
	ts, rest, ok1 := bytes.Cut(line, []byte{' '})
	stream, rest, ok2 := bytes.Cut(rest, []byte{' '})
	if !ok1 || !ok2 || len(rest) == 0 {
		return Entry{}, fmt.Errorf("parsing log line %.80q: too few fields", line)
	}
	tag, content, _ := bytes.Cut(rest, []byte{' '})
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return Entry{}, fmt.Errorf("parsing log line time: %w", err)
	}
	e := Entry{Time: t, Partial: string(tag) == "P", Content: content}
	switch string(stream) {
	case Stdout:
		e.Stream = Stdout
	case Stderr:
		e.Stream = Stderr
	default:
		e.Stream = string(stream)
	}
	return e, nil
}

// ErrNotFound is returned by Read when the log file does not exist.
var ErrNotFound = errors.New("log not found")

// Read writes the log at path (the files rotated out of it, then itself)
// to w according to opts, formatted as kubectl logs prints it: with
// Timestamps, each line starts with the time of its first record, as on a
// kubelet. With Follow it keeps writing until the file is closed (the
// attempt ended) or ctx ends. It holds a few buffers, never the log: w
// gets what it has read before each wait.
func (s *Store) Read(ctx context.Context, path string, opts Options, w io.Writer) error {
	lw := newLimitWriter(w, opts.LimitBytes)
	bw := bufio.NewWriterSize(lw, 32<<10)
	lineStart := true
	err := s.entries(ctx, path, opts, func(e Entry) error {
		if opts.Timestamps && lineStart {
			if _, err := bw.WriteString(e.Time.Format(time.RFC3339Nano) + " "); err != nil {
				return err
			}
		}
		lineStart = !e.Partial
		if _, err := bw.Write(e.Content); err != nil {
			return err
		}
		if !e.Partial {
			return bw.WriteByte('\n')
		}
		return nil
	}, bw.Flush)
	if err == nil {
		err = bw.Flush()
	}
	return ignoreLimit(err)
}

// entries calls emit for each entry of the log at path selected by opts
// (Timestamps and LimitBytes are the caller's business), and idle before
// it waits for more. An error from emit or idle ends the read and is
// returned.
func (s *Store) entries(ctx context.Context, path string, opts Options, emit func(Entry) error, idle func() error) error {
	live := s.liveFile(path)
	segs, changed, gen, err := openSegments(path, live, -1)
	if err != nil {
		return err
	}
	if len(segs) == 0 {
		return fmt.Errorf("opening %s: %w", path, ErrNotFound)
	}
	r := &follower{since: opts.Since, emit: emit, segs: segs}
	defer r.close()
	if opts.TailLines >= 0 {
		if err := r.skipToTail(opts.TailLines); err != nil {
			return err
		}
	}
	if err := r.readAll(); err != nil {
		return err
	}
	if !opts.Follow || live == nil {
		return nil
	}
	for {
		if err := idle(); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		var now int
		changed, now = live.wait()
		// Everything written before now is in the files: a rotation
		// renames a file after its last write.
		closed := false
		select {
		case <-live.done:
			closed = true
		default:
		}
		if err := r.readAll(); err != nil {
			return err
		}
		if now != gen {
			// The file r has open was rotated: it has all it will get.
			// On with the files rotated since and the current one.
			more, _, g, err := openSegments(path, live, gen)
			if err != nil {
				return err
			}
			r.segs, gen = append(r.segs, more...), g
			if err := r.readAll(); err != nil {
				return err
			}
		}
		if closed {
			return nil
		}
	}
}

// openSegments opens the files of the log at path, oldest first: those
// rotated out of it with a generation above after, then the current one.
// A live file's lock is held meanwhile, so that no rotation falls between
// listing and opening, and its channel of changes and current generation
// are returned with them. Files rotated out of existence are left out.
func openSegments(path string, live *File, after int) (segs []*segment, changed <-chan struct{}, gen int, err error) {
	if live != nil {
		live.mu.Lock()
		defer live.mu.Unlock()
		changed, gen = live.changed, live.gen
	}
	gens, err := rotatedGens(path)
	if err != nil {
		return nil, nil, 0, err
	}
	var names []string
	for _, g := range gens {
		if g > after {
			names = append(names, rotatedPath(path, g))
		}
	}
	names = append(names, path)
	for _, name := range names {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			for _, s := range segs {
				_ = s.f.Close()
			}
			return nil, nil, 0, fmt.Errorf("opening log: %w", err)
		}
		segs = append(segs, &segment{f: f})
	}
	return segs, changed, gen, nil
}

// segment is one open file of a log and where its reading is.
type segment struct {
	f   *os.File
	off int64 // where reading starts
	br  *bufio.Reader
}

// follower reads a log's segments in order, emitting records as entries.
// Only the last segment can grow; the ones before it are complete.
type follower struct {
	since time.Time
	emit  func(Entry) error
	segs  []*segment

	// rest is the start of a record not yet ended by a newline (at most
	// readSize bytes: a longer record is emitted in pieces).
	rest []byte
	// cont: the record being emitted in pieces, and whether it is kept.
	cont     bool
	contHead Entry
	contKeep bool
}

func (r *follower) close() {
	for _, s := range r.segs {
		_ = s.f.Close()
	}
}

// readAll reads the segments to their end; all but the last are done with
// and closed.
func (r *follower) readAll() error {
	for len(r.segs) > 0 {
		s := r.segs[0]
		if s.br == nil {
			if _, err := s.f.Seek(s.off, io.SeekStart); err != nil {
				return fmt.Errorf("reading log: %w", err)
			}
			s.br = bufio.NewReaderSize(s.f, readSize)
		}
		if err := r.readSegment(s.br); err != nil {
			return err
		}
		if len(r.segs) == 1 {
			return nil
		}
		// A complete file: what did not end in a newline never will.
		r.rest, r.cont = r.rest[:0], false
		_ = s.f.Close()
		r.segs = r.segs[1:]
	}
	return nil
}

func (r *follower) readSegment(br *bufio.Reader) error {
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			if err := r.piece(r.join(chunk[:len(chunk)-1]), true); err != nil {
				return err
			}
		case errors.Is(err, bufio.ErrBufferFull):
			if err := r.piece(r.join(chunk), false); err != nil {
				return err
			}
		case errors.Is(err, io.EOF):
			// The start of a record still being written, shorter than the
			// reader's buffer: kept until its end comes.
			r.rest = append(r.rest, chunk...)
			if len(r.rest) >= readSize {
				if err := r.piece(r.rest, false); err != nil {
					return err
				}
				r.rest = r.rest[:0]
			}
			return nil
		default:
			return fmt.Errorf("reading log: %w", err)
		}
	}
}

// join puts what is left of the last read before chunk.
func (r *follower) join(chunk []byte) []byte {
	if len(r.rest) == 0 {
		return chunk
	}
	b := append(r.rest, chunk...)
	r.rest = r.rest[:0]
	return b
}

// piece emits one piece of a record: the record's end when last, else a
// piece of a record longer than the reader's buffer.
func (r *follower) piece(b []byte, last bool) error {
	if r.cont {
		r.cont = !last
		if !r.contKeep {
			return nil
		}
		e := r.contHead
		e.Content = b
		e.Partial = e.Partial || !last
		return r.emit(e)
	}
	e, err := ParseLine(b)
	keep := err == nil && (r.since.IsZero() || !e.Time.Before(r.since))
	if !last {
		r.cont, r.contHead, r.contKeep = true, e, keep
		e.Partial = true
	}
	if !keep {
		return nil
	}
	return r.emit(e)
}

// skipToTail moves the start of reading to the last n records (of those
// at or after since), reading the files backwards from their current end.
func (r *follower) skipToTail(n int64) error {
	var found int64
	for i := len(r.segs) - 1; i >= 0; i-- {
		s := r.segs[i]
		fi, err := s.f.Stat()
		if err != nil {
			return fmt.Errorf("reading log: %w", err)
		}
		bs := &backScanner{f: s.f}
		// Only complete records count; a last one being written is read
		// when it is done.
		end, err := bs.lastNewline(fi.Size())
		if err != nil {
			return err
		}
		for end >= 0 && found < n {
			start, err := bs.lastNewline(end)
			if err != nil {
				return err
			}
			if !r.since.IsZero() {
				t, err := recordTime(s.f, start+1)
				if err == nil && t.Before(r.since) {
					// Older records are older still.
					n = found
					break
				}
			}
			found++
			end = start
		}
		if found >= n {
			s.off = end + 1
			for _, old := range r.segs[:i] {
				_ = old.f.Close()
			}
			r.segs = r.segs[i:]
			return nil
		}
	}
	return nil
}

// recordTime reads the time of the record starting at off.
func recordTime(f *os.File, off int64) (time.Time, error) {
	var buf [64]byte
	n, err := f.ReadAt(buf[:], off)
	if n == 0 {
		return time.Time{}, err
	}
	ts, _, _ := bytes.Cut(buf[:n], []byte{' '})
	return time.Parse(time.RFC3339Nano, string(ts))
}

// backScanner finds newlines in a file from its end, a block at a time.
type backScanner struct {
	f   *os.File
	buf []byte
	off int64 // buf holds the file's bytes from off
}

// lastNewline returns the offset of the last newline before end, or -1.
func (b *backScanner) lastNewline(end int64) (int64, error) {
	const block = 32 << 10
	for end > 0 {
		if end <= b.off || end > b.off+int64(len(b.buf)) {
			start := max(0, end-block)
			if b.buf == nil {
				b.buf = make([]byte, block)
			}
			b.buf = b.buf[:end-start]
			if _, err := b.f.ReadAt(b.buf, start); err != nil {
				return 0, fmt.Errorf("reading log: %w", err)
			}
			b.off = start
		}
		if i := bytes.LastIndexByte(b.buf[:end-b.off], '\n'); i >= 0 {
			return b.off + int64(i), nil
		}
		end = b.off
	}
	return -1, nil
}

var errLimit = errors.New("log byte limit reached")

func ignoreLimit(err error) error {
	if errors.Is(err, errLimit) {
		return nil
	}
	return err
}

// limitWriter stops after left bytes when left > 0.
type limitWriter struct {
	w    io.Writer
	left int64 // bytes still allowed when limited
	// limited: left counts; done: the limit was reached.
	limited, done bool
}

func newLimitWriter(w io.Writer, limit int64) *limitWriter {
	return &limitWriter{w: w, left: limit, limited: limit > 0}
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.done {
		return 0, errLimit
	}
	n := len(p)
	if l.limited && int64(len(p)) >= l.left {
		p, l.done = p[:l.left], true
	}
	if len(p) > 0 {
		if _, err := l.w.Write(p); err != nil {
			return 0, fmt.Errorf("sending log: %w", err)
		}
	}
	if l.done {
		return len(p), errLimit
	}
	l.left -= int64(len(p))
	return n, nil
}
