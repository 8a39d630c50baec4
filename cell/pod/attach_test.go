package pod

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kipcell/kip/cell/runtime"
)

func recvChunk(t *testing.T, ch <-chan []byte) string {
	t.Helper()
	select {
	case b := <-ch:
		return string(b)
	case <-time.After(5 * time.Second):
		t.Fatal("no output")
	}
	return ""
}

// startStdinPod runs one container with stdin whose fake task echoes its
// stdin to stdout, and returns the manager.
func startStdinPod(t *testing.T, stdinOnce bool) (*Manager, chan struct{}) {
	t.Helper()
	rt := newFakeRuntime()
	stdinEOF := make(chan struct{})
	rt.onStart = func(spec runtime.ContainerSpec, _ *fakeTask) {
		if spec.Stdin == nil || !spec.TTY {
			t.Errorf("spec stdin %v tty %v, want both", spec.Stdin, spec.TTY)
			return
		}
		go func() {
			_, _ = io.Copy(spec.Stdout, spec.Stdin)
			close(stdinEOF)
		}()
	}
	m := newManager(t, rt)
	p := testPod(corev1.RestartPolicyAlways, "app")
	p.Spec.Containers[0].Stdin, p.Spec.Containers[0].TTY, p.Spec.Containers[0].StdinOnce = true, true, stdinOnce
	apply(t, m, 1, p)
	waitStatus(t, m, "running", func(s corev1.PodStatus) bool { return s.ContainerStatuses[0].State.Running != nil })
	t.Cleanup(func() {
		grace := time.Second
		if err := m.Delete(context.Background(), &grace); err != nil { //nolint:usetesting // a Cleanup: t.Context() has ended
			t.Errorf("Delete: %v", err)
		}
	})
	return m, stdinEOF
}

func TestAttachSequentialSessions(t *testing.T) {
	m, stdinEOF := startStdinPod(t, false)
	for _, word := range []string{"one", "two"} {
		at, err := m.Attach("app", true, true)
		if err != nil {
			t.Fatal(err)
		}
		if !at.TTY || !at.Stdin || at.Stderr != nil {
			t.Errorf("attachment tty %v stdin %v stderr %v; want a TTY with stdin and no stderr", at.TTY, at.Stdin, at.Stderr)
		}
		if err := at.WriteStdin([]byte(word)); err != nil {
			t.Fatal(err)
		}
		if got := recvChunk(t, at.Stdout); got != word {
			t.Errorf("echo = %q, want %q", got, word)
		}
		// Without stdinOnce neither the end of a session's stdin nor a
		// detach closes the container's stdin.
		if err := at.EndStdin(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := at.Detach(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := <-at.Stdout; ok {
			t.Error("output still open after Detach")
		}
	}
	select {
	case <-stdinEOF:
		t.Error("stdin closed without stdinOnce")
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := m.Attach("nope", true, true); err == nil {
		t.Error("Attach to an unknown container succeeded")
	}
}

func TestAttachStdinOnce(t *testing.T) {
	m, stdinEOF := startStdinPod(t, true)
	at, err := m.Attach("app", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := at.WriteStdin([]byte("x")); err != nil {
		t.Fatal(err)
	}
	recvChunk(t, at.Stdout)
	if err := at.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stdinEOF:
	case <-time.After(5 * time.Second):
		t.Fatal("stdin not closed after the first session detached (stdinOnce)")
	}
	at2, err := m.Attach("app", true, false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = at2.Detach(t.Context()) }()
	if err := at2.WriteStdin([]byte("y")); err == nil || !strings.Contains(err.Error(), "stdinOnce") {
		t.Errorf("write after stdinOnce = %v, want an error", err)
	}
}

func TestBroadcasterCutsSlowSubscribers(t *testing.T) {
	b := newBroadcaster()
	slow, fast := b.subscribe(), b.subscribe()
	for range attachBuffer + 1 {
		_, _ = b.Write([]byte("x"))
		select {
		case <-fast.ch:
		default:
		}
	}
	n := 0
	for range slow.ch {
		n++
	}
	if n != attachBuffer || !slow.overflowed() {
		t.Errorf("slow got %d chunks, overflowed %v; want %d and true", n, slow.overflowed(), attachBuffer)
	}
	if fast.overflowed() {
		t.Error("fast subscriber cut off")
	}
	b.close()
	if _, ok := <-fast.ch; ok {
		t.Error("subscription open after close")
	}
	if s := b.subscribe(); s == nil {
		t.Error("subscribe after close returned nil")
	} else if _, ok := <-s.ch; ok {
		t.Error("subscription after close is open")
	}
}
