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
	"strconv"
	"sync"
	"time"
)

// MaxLineSize is the longest content written as one log line; longer lines
// are split into partial (P) lines, as the kubelet does.
const MaxLineSize = 16 << 10

// Stream names, as written in the files.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Store hands out log files under a directory and knows which of them are
// still being written, so that a follow can wait for more.
type Store struct {
	dir string
	now func() time.Time

	mu   sync.Mutex
	live map[string]*File
}

// NewStore returns a store keeping its files under dir.
func NewStore(dir string) *Store {
	return &Store{dir: dir, now: time.Now, live: map[string]*File{}}
}

// Path is the file of a container's attempt.
func (s *Store) Path(container string, attempt int) string {
	return filepath.Join(s.dir, container, strconv.Itoa(attempt)+".log")
}

// Create creates (truncating) the file of a container's attempt and
// removes the files of attempts older than the previous one.
func (s *Store) Create(container string, attempt int) (*File, error) {
	lf, err := s.open(container, attempt, os.O_TRUNC)
	if err != nil {
		return nil, err
	}
	for old := attempt - 2; old >= 0; old-- {
		if err := os.Remove(s.Path(container, old)); errors.Is(err, os.ErrNotExist) {
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
	lf := &File{path: path, f: f, now: s.now, changed: make(chan struct{}), done: make(chan struct{}), store: s}
	s.mu.Lock()
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
type File struct {
	path  string
	now   func() time.Time
	store *Store

	mu      sync.Mutex
	f       *os.File
	partial map[string][]byte
	changed chan struct{} // closed and replaced on every write
	done    chan struct{} // closed by Close
	closed  bool
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
	buf := append(f.partial[stream], p...)
	var out bytes.Buffer
	ts := f.now().UTC().Format(time.RFC3339Nano)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		writeEntry(&out, ts, stream, 'F', buf[:i])
		buf = buf[i+1:]
	}
	for len(buf) >= MaxLineSize {
		writeEntry(&out, ts, stream, 'P', buf[:MaxLineSize])
		buf = buf[MaxLineSize:]
	}
	f.partial[stream] = append([]byte(nil), buf...)
	if out.Len() > 0 {
		if _, err := f.f.Write(out.Bytes()); err != nil {
			return 0, fmt.Errorf("writing log: %w", err)
		}
		close(f.changed)
		f.changed = make(chan struct{})
	}
	return len(p), nil
}

func writeEntry(w *bytes.Buffer, ts, stream string, tag byte, content []byte) {
	w.WriteString(ts)
	w.WriteByte(' ')
	w.WriteString(stream)
	w.WriteByte(' ')
	w.WriteByte(tag)
	w.WriteByte(' ')
	w.Write(content)
	w.WriteByte('\n')
}

// Close writes what is left of unfinished lines as partial lines and ends
// the file: followers stop once they have read it.
func (f *File) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	var out bytes.Buffer
	ts := f.now().UTC().Format(time.RFC3339Nano)
	for _, stream := range []string{Stdout, Stderr} {
		if p := f.partial[stream]; len(p) > 0 {
			writeEntry(&out, ts, stream, 'P', p)
		}
	}
	_, werr := f.f.Write(out.Bytes())
	cerr := f.f.Close()
	f.closed = true
	close(f.changed)
	close(f.done)
	f.store.mu.Lock()
	delete(f.store.live, f.path)
	f.store.mu.Unlock()
	if err := errors.Join(werr, cerr); err != nil {
		return fmt.Errorf("closing log: %w", err)
	}
	return nil
}

// wait returns a channel closed at the next write or at Close.
func (f *File) wait() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// Options select what Read writes, as in core/v1 PodLogOptions.
type Options struct {
	Follow bool
	// TailLines: negative means all lines.
	TailLines int64
	// Since: only lines written at or after it; zero means all.
	Since      time.Time
	Timestamps bool
	// LimitBytes: zero or negative means no limit.
	LimitBytes int64
}

// Entry is one parsed log line.
type Entry struct {
	Time    time.Time
	Stream  string
	Partial bool
	Content []byte
}

// ParseLine parses one line of a log file (without its newline).
func ParseLine(line []byte) (Entry, error) {
	parts := bytes.SplitN(line, []byte{' '}, 4)
	if len(parts) < 3 {
		return Entry{}, fmt.Errorf("parsing log line %q: too few fields", line)
	}
	t, err := time.Parse(time.RFC3339Nano, string(parts[0]))
	if err != nil {
		return Entry{}, fmt.Errorf("parsing log line time: %w", err)
	}
	e := Entry{Time: t, Stream: string(parts[1]), Partial: string(parts[2]) == "P"}
	if len(parts) == 4 {
		e.Content = parts[3]
	}
	return e, nil
}

// format renders an entry the way kubectl logs prints it.
func format(e Entry, timestamps bool) []byte {
	var b bytes.Buffer
	if timestamps {
		b.WriteString(e.Time.Format(time.RFC3339Nano))
		b.WriteByte(' ')
	}
	b.Write(e.Content)
	if !e.Partial {
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// ErrNotFound is returned by Read when the log file does not exist.
var ErrNotFound = errors.New("log not found")

// Read writes the log at path to w according to opts, formatted as kubectl
// logs prints it. With Follow it keeps writing until the file is closed
// (the attempt ended) or ctx ends.
func (s *Store) Read(ctx context.Context, path string, opts Options, w io.Writer) error {
	lw := &limitWriter{w: w, left: opts.LimitBytes}
	err := s.Entries(ctx, path, opts, func(e Entry) error {
		return lw.write(format(e, opts.Timestamps))
	})
	return ignoreLimit(err)
}

// Entries calls emit for each entry of the log at path selected by opts
// (Timestamps and LimitBytes are the caller's business). An error from emit
// ends the read and is returned.
func (s *Store) Entries(ctx context.Context, path string, opts Options, emit func(Entry) error) error {
	live := s.liveFile(path)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("opening %s: %w", path, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("opening log: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	keep := func(l []byte) (Entry, bool) {
		e, err := ParseLine(l)
		if err != nil || (!opts.Since.IsZero() && e.Time.Before(opts.Since)) {
			return Entry{}, false
		}
		return e, true
	}

	// First: everything there now, honouring tail.
	var changed <-chan struct{}
	if live != nil {
		changed = live.wait()
	}
	lines, rest, err := readComplete(r, nil)
	if err != nil {
		return err
	}
	var selected []Entry
	for _, l := range lines {
		if e, ok := keep(l); ok {
			selected = append(selected, e)
		}
	}
	if opts.TailLines >= 0 && int64(len(selected)) > opts.TailLines {
		selected = selected[int64(len(selected))-opts.TailLines:]
	}
	for _, e := range selected {
		if err := emit(e); err != nil {
			return err
		}
	}
	if !opts.Follow || live == nil {
		return nil
	}
	// Then what is written until the file is closed.
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
		changed = live.wait()
		closed := false
		select {
		case <-live.done:
			closed = true
		default:
		}
		lines, rest, err = readComplete(r, rest)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if e, ok := keep(l); ok {
				if err := emit(e); err != nil {
					return err
				}
			}
		}
		if closed {
			return nil
		}
	}
}

// readComplete reads the complete lines available now; an incomplete last
// line is returned as rest, to be continued on the next call.
func readComplete(r *bufio.Reader, rest []byte) (lines [][]byte, newRest []byte, err error) {
	for {
		chunk, err := r.ReadBytes('\n')
		rest = append(rest, chunk...)
		if errors.Is(err, io.EOF) {
			return lines, rest, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading log: %w", err)
		}
		lines = append(lines, rest[:len(rest)-1])
		rest = nil
	}
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
	left int64
}

func (l *limitWriter) write(p []byte) error {
	limited := l.left > 0
	if limited && int64(len(p)) >= l.left {
		p = p[:l.left]
		l.left = -1
	}
	if len(p) > 0 {
		if _, err := l.w.Write(p); err != nil {
			return fmt.Errorf("sending log: %w", err)
		}
	}
	if limited && l.left < 0 {
		return errLimit
	}
	if limited {
		l.left -= int64(len(p))
	}
	return nil
}
