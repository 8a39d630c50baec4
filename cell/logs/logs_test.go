package logs

import (
	"errors"
	"strings"
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
