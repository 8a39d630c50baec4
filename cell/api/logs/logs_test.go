package logs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestWriteAndRead(t *testing.T) {
	s := NewStore(t.TempDir())
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	f, err := s.Create("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	out, errw := f.Stream(Stdout), f.Stream(Stderr)
	_, _ = out.Write([]byte("one\ntw"))
	_, _ = errw.Write([]byte("err1\n"))
	_, _ = out.Write([]byte("o\nthree\n"))
	_, _ = out.Write([]byte("unfinished"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	read := func(opts Options) string {
		var b strings.Builder
		if err := s.Read(t.Context(), f.Path(), opts, &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"all", Options{TailLines: -1}, "one\nerr1\ntwo\nthree\nunfinished"},
		{"tail 2", Options{TailLines: 2}, "three\nunfinished"},
		{"tail 0", Options{TailLines: 0}, ""},
		{"since", Options{TailLines: -1, Since: time.Date(2026, 1, 2, 3, 4, 8, 0, time.UTC)}, "two\nthree\nunfinished"},
		{"limit", Options{TailLines: -1, LimitBytes: 6}, "one\ner"},
		{"timestamps", Options{TailLines: 1, Timestamps: true}, "2026-01-02T03:04:10Z unfinished"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, read(tt.opts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if err := s.Read(t.Context(), s.Path("app", 7), Options{}, &strings.Builder{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Read of a missing file = %v, want ErrNotFound", err)
	}
}

func TestLongLinesArePartial(t *testing.T) {
	s := NewStore(t.TempDir())
	f, _ := s.Create("app", 0)
	long := strings.Repeat("x", MaxLineSize+10)
	_, _ = f.Stream(Stdout).Write([]byte(long + "\n"))
	_ = f.Close()
	var b strings.Builder
	if err := s.Read(t.Context(), f.Path(), Options{TailLines: -1}, &b); err != nil {
		t.Fatal(err)
	}
	if b.String() != long+"\n" {
		t.Errorf("long line came back as %d bytes", b.Len())
	}
}

func TestFollowEndsWithTheAttempt(t *testing.T) {
	s := NewStore(t.TempDir())
	f, _ := s.Create("app", 0)
	w := f.Stream(Stdout)
	_, _ = w.Write([]byte("before\n"))
	got := make(chan string)
	go func() {
		var b strings.Builder
		_ = s.Read(t.Context(), f.Path(), Options{Follow: true, TailLines: -1}, &b)
		got <- b.String()
	}()
	time.Sleep(50 * time.Millisecond)
	_, _ = w.Write([]byte("during\n"))
	_, _ = w.Write([]byte("last"))
	_ = f.Close()
	select {
	case s := <-got:
		if s != "before\nduring\nlast" {
			t.Errorf("followed %q", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end when the file closed")
	}
}

func TestOldAttemptsArePruned(t *testing.T) {
	s := NewStore(t.TempDir())
	for i := range 4 {
		f, err := s.Create("app", i)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	for i, want := range []bool{false, false, true, true} {
		err := s.Read(t.Context(), s.Path("app", i), Options{}, &strings.Builder{})
		if exists := err == nil; exists != want {
			t.Errorf("attempt %d kept = %v, want %v", i, exists, want)
		}
	}
}

func TestAppendKeepsWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	// The first agent writes, then dies without closing; the next one,
	// with a store of its own, goes on in the same file.
	first, err := NewStore(dir).Create("app", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = first.Stream(Stdout).Write([]byte("before\n"))
	s := NewStore(dir)
	f, err := s.Append("app", 1)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Stream(Stdout).Write([]byte("after\n"))
	var b strings.Builder
	if err := s.Read(t.Context(), s.Path("app", 1), Options{TailLines: -1}, &b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("before\nafter\n", b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_ = f.Close()
	_ = first.Close()
}

// files lists the names in dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func readAll(t *testing.T, s *Store, path string, opts Options) string {
	t.Helper()
	var b strings.Builder
	if err := s.Read(t.Context(), path, opts, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// lines returns "line 0000\n" … for [from, to).
func lines(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "line %04d\n", i)
	}
	return b.String()
}

func TestRotation(t *testing.T) {
	// Each record is 20 (time) + 10 (stream, tag) + 10 (line) bytes = 40:
	// a file is rotated after three of them.
	rot := Rotation{MaxSize: 100, MaxFiles: 3}
	tests := []struct {
		name      string
		lines     int
		opts      Options
		want      string
		wantFiles []string
	}{
		{"fits in one file", 2, Options{TailLines: -1}, lines(0, 2), []string{"0.log"}},
		{"rotated once", 4, Options{TailLines: -1}, lines(0, 4), []string{"0.log", "0.log.rotated-0"}},
		{"oldest files removed", 20, Options{TailLines: -1}, lines(12, 20),
			[]string{"0.log", "0.log.rotated-4", "0.log.rotated-5"}},
		{"tail within the current file", 20, Options{TailLines: 2}, lines(18, 20), nil},
		{"tail across files", 20, Options{TailLines: 5}, lines(15, 20), nil},
		{"tail longer than what is kept", 20, Options{TailLines: 100}, lines(12, 20), nil},
		{"limit", 20, Options{TailLines: -1, LimitBytes: 14}, "line 0012\nline", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), WithRotation(rot))
			s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
			f, err := s.Create("app", 0)
			if err != nil {
				t.Fatal(err)
			}
			w := f.Stream(Stdout)
			for i := range tt.lines {
				fmt.Fprintf(w, "line %04d\n", i)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, readAll(t, s, f.Path(), tt.opts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if tt.wantFiles != nil {
				if diff := cmp.Diff(tt.wantFiles, files(t, filepath.Dir(f.Path()))); diff != "" {
					t.Errorf("files (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSinceAndTailAcrossFiles(t *testing.T) {
	s := NewStore(t.TempDir(), WithRotation(Rotation{MaxSize: 100, MaxFiles: 10}))
	clock := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	s.now = func() time.Time { clock = clock.Add(time.Second); return clock }
	f, _ := s.Create("app", 0)
	for i := range 12 { // line i written at 3:04:(i+1)
		fmt.Fprintf(f.Stream(Stdout), "line %04d\n", i)
	}
	_ = f.Close()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) // lines 4 and after
	tests := []struct {
		name string
		opts Options
		want string
	}{
		{"since", Options{TailLines: -1, Since: since}, lines(4, 12)},
		{"since and a longer tail", Options{TailLines: 20, Since: since}, lines(4, 12)},
		{"since and a shorter tail", Options{TailLines: 3, Since: since}, lines(9, 12)},
		{"since after everything", Options{TailLines: 3, Since: clock.Add(time.Hour)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, readAll(t, s, f.Path(), tt.opts)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestFollowAcrossRotations: a follower gets every line once, in order,
// while the file it reads is rotated under it many times.
func TestFollowAcrossRotations(t *testing.T) {
	const n = 3000
	s := NewStore(t.TempDir(), WithRotation(Rotation{MaxSize: 500, MaxFiles: n}))
	f, _ := s.Create("app", 0)
	w := f.Stream(Stdout)
	fmt.Fprint(w, lines(0, 10))
	got := make(chan string)
	started := make(chan struct{})
	go func() {
		b := &startWriter{started: started}
		err := s.Read(t.Context(), f.Path(), Options{Follow: true, TailLines: 5}, b)
		if err != nil {
			b.WriteString(err.Error())
		}
		got <- b.String()
	}()
	<-started // the tail has been read
	for i := 10; i < n; i++ {
		fmt.Fprintf(w, "line %04d\n", i)
		if i%500 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	_ = f.Close()
	select {
	case s := <-got:
		if diff := cmp.Diff(lines(5, n), s); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("follow did not end when the file closed")
	}
}

// TestLongLines: a line longer than MaxLineSize, written in pieces of any
// size, is kept as records of at most MaxLineSize and read back whole,
// with one timestamp.
func TestLongLines(t *testing.T) {
	long := strings.Repeat("0123456789", 300_000) // 3 MB
	tests := []struct {
		name   string
		writes []int // sizes of the writes of long, then a newline if ended
		ended  bool
	}{
		{"one write with its newline", []int{len(long)}, true},
		{"small writes", []int{1000, 7, 30_000, len(long) - 31_007}, true},
		{"a write larger than a flush", []int{1 << 20, len(long) - 1<<20}, true},
		{"without a newline", []int{len(long)}, false},
		{"exactly MaxLineSize", []int{MaxLineSize}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(t.TempDir())
			f, _ := s.Create("app", 0)
			w := f.Stream(Stdout)
			off := 0
			for _, n := range tt.writes {
				_, _ = w.Write([]byte(long[off : off+n]))
				off += n
			}
			want := long[:off]
			if tt.ended {
				_, _ = w.Write([]byte("\n"))
				want += "\n"
			}
			_, _ = w.Write([]byte("next\n"))
			_ = f.Close()
			data, err := os.ReadFile(f.Path())
			if err != nil {
				t.Fatal(err)
			}
			for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
				e, err := ParseLine([]byte(l))
				if err != nil || len(e.Content) > MaxLineSize {
					t.Fatalf("record of %d bytes: %v", len(e.Content), err)
				}
			}
			if got := readAll(t, s, f.Path(), Options{TailLines: -1}); got != want+"next\n" {
				t.Errorf("read %d bytes, want %d", len(got), len(want)+5)
			}
			stamped := readAll(t, s, f.Path(), Options{TailLines: -1, Timestamps: true})
			if c := strings.Count(stamped, "Z "); c != 2 && tt.ended || c != 1 && !tt.ended {
				t.Errorf("%d timestamps in the log read with timestamps", c)
			}
		})
	}
}

// TestMemoryDoesNotGrowWithTheLog: writing and reading a log many times
// larger than any buffer (not rotated here, as a log an older agent left)
// keeps the heap small.
func TestMemoryDoesNotGrowWithTheLog(t *testing.T) {
	const size = 64 << 20
	chunk := []byte(strings.Repeat(strings.Repeat("x", 99)+"\n", 320)) // 32000 bytes
	tests := []struct {
		name  string
		chunk []byte
	}{
		{"lines", chunk},
		{"one line", bytes.ReplaceAll(chunk, []byte("\n"), []byte("y"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), WithRotation(Rotation{MaxSize: 1 << 40}))
			// A frequent GC keeps HeapInuse near what is live.
			defer debug.SetGCPercent(debug.SetGCPercent(20))
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := heapPeak()
			f, _ := s.Create("app", 0)
			w := f.Stream(Stdout)
			for written := 0; written < size; written += len(tt.chunk) {
				_, _ = w.Write(tt.chunk)
			}
			_, _ = w.Write([]byte("LAST"))
			_ = f.Close()
			for _, opts := range []Options{{TailLines: -1}, {TailLines: 1}, {TailLines: 1000, Timestamps: true}} {
				var out tailWriter
				if err := s.Read(t.Context(), f.Path(), opts, &out); err != nil {
					t.Fatal(err)
				}
				if !strings.HasSuffix(string(out.last), "LAST") {
					t.Errorf("%+v: the log ends with %q", opts, out.last)
				}
			}
			grown := int64(stop()) - int64(before.HeapInuse)
			if grown > 16<<20 {
				t.Errorf("writing and reading %d MiB grew the heap by %d MiB", size>>20, grown>>20)
			}
			t.Logf("the heap grew by %d KiB at most", grown>>10)
		})
	}
}

// heapPeak samples HeapInuse until stop is called, which returns the
// highest value seen.
func heapPeak() (stop func() uint64) {
	done := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			top = max(top, ms.HeapInuse)
			select {
			case <-done:
				peak <- top
				return
			case <-tick.C:
			}
		}
	}()
	return func() uint64 { close(done); return <-peak }
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct{ last []byte }

func (w *tailWriter) Write(p []byte) (int, error) {
	w.last = append(w.last, p...)
	if len(w.last) > 64 {
		w.last = append(w.last[:0], w.last[len(w.last)-64:]...)
	}
	return len(p), nil
}

// startWriter closes started at its first write.
type startWriter struct {
	strings.Builder
	started chan struct{}
}

func (w *startWriter) Write(p []byte) (int, error) {
	if w.Len() == 0 {
		close(w.started)
	}
	return w.Builder.Write(p)
}

// TestTakeOverAndPruningWithRotatedFiles: an agent that appends to an
// attempt an earlier one rotated goes on with the next generation, and
// pruning an old attempt removes its rotated files too.
func TestTakeOverAndPruningWithRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	rot := WithRotation(Rotation{MaxSize: 100, MaxFiles: 10})
	fixed := func(s *Store) *Store {
		s.now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
		return s
	}
	first := fixed(NewStore(dir, rot))
	old, _ := first.Create("app", 0)
	fmt.Fprint(old.Stream(Stdout), lines(0, 1))
	_ = old.Close()
	before, _ := first.Create("app", 1)
	fmt.Fprint(before.Stream(Stdout), lines(0, 4)) // rotated once, at three lines
	// The first agent dies without closing; the next one goes on.
	s := fixed(NewStore(dir, rot))
	f, err := s.Append("app", 1)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f.Stream(Stdout), lines(4, 8)) // line 4 fills 1.log, rotated again
	_ = f.Close()
	_ = before.Close()
	if diff := cmp.Diff(lines(0, 8), readAll(t, s, s.Path("app", 1), Options{TailLines: -1})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	next, _ := s.Create("app", 2)
	_ = next.Close()
	last, _ := s.Create("app", 3) // removes attempt 1 and its rotated files
	_ = last.Close()
	want := []string{"2.log", "3.log"}
	if diff := cmp.Diff(want, files(t, filepath.Join(dir, "app"))); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

// TestAFullDiskDropsOutput: while the disk is full (/dev/full answers every
// write with ENOSPC), a container's output is dropped, not refused: its
// writes succeed, so the container never stalls on its own output; what
// is written once there is room again is read as before, and Close says
// how much was lost.
func TestAFullDiskDropsOutput(t *testing.T) {
	s := NewStore(t.TempDir())
	f, err := s.Create("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := f.Stream(Stdout)
	if _, err := out.Write([]byte("before\n")); err != nil {
		t.Fatal(err)
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	disk := f.f
	f.f = full
	f.mu.Unlock()
	for i := range 3 {
		if n, err := out.Write([]byte(strings.Repeat("lost ", 1000) + "\n")); n != 5001 || err != nil {
			t.Errorf("write %d on a full disk = %d, %v; want 5001, nil", i, n, err)
		}
	}
	f.mu.Lock()
	f.f = disk
	f.mu.Unlock()
	_ = full.Close()
	if _, err := out.Write([]byte("after\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err == nil || !strings.Contains(err.Error(), "lost") || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close = %v, want the bytes lost and ENOSPC", err)
	}
	var b strings.Builder
	if err := s.Read(t.Context(), f.Path(), Options{TailLines: -1}, &b); err != nil {
		t.Fatal(err)
	}
	if b.String() != "before\nafter\n" {
		t.Errorf("log = %q, want before and after", b.String())
	}
}

// TestFollowEndsWhenAQuietFileCloses: a follower that has read everything
// ends when the attempt ends with nothing more written, as when a
// container exits after its last line was flushed: Close wakes it.
func TestFollowEndsWhenAQuietFileCloses(t *testing.T) {
	s := NewStore(t.TempDir())
	f, err := s.Create("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f.Stream(Stdout), lines(0, 3))
	got := make(chan string)
	started := make(chan struct{})
	go func() {
		b := &startWriter{started: started}
		if err := s.Read(t.Context(), f.Path(), Options{Follow: true, TailLines: -1}, b); err != nil {
			b.WriteString(err.Error())
		}
		got <- b.String()
	}()
	<-started // read up to the end; next, it waits for more
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if s != lines(0, 3) {
			t.Errorf("followed %q, want %q", s, lines(0, 3))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("follow did not end when the file closed")
	}
}
