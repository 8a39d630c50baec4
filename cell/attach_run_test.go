package cell_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kipcell/kip/cell/api"
)

// attachSession is one Attach stream with its output gathered.
type attachSession struct {
	stream api.ExecClient
	cancel context.CancelFunc
	out    chan string
	exit   chan int32
}

func attach(t *testing.T, a *agent, start *api.ExecStart, input ...*api.ExecInput) *attachSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	stream, err := a.client.Attach(ctx)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := stream.Send(&api.ExecInput{Start: start}); err != nil {
		cancel()
		t.Fatal(err)
	}
	for _, in := range input {
		if err := stream.Send(in); err != nil {
			cancel()
			t.Fatal(err)
		}
	}
	s := &attachSession{stream: stream, cancel: cancel, out: make(chan string, 100), exit: make(chan int32, 1)}
	go func() {
		for {
			o, err := stream.Recv()
			if err != nil {
				close(s.out)
				return
			}
			if b := append(o.Stdout, o.Stderr...); len(b) > 0 {
				s.out <- string(b)
			}
			if o.Exit != nil {
				s.exit <- o.Exit.Code
			}
		}
	}()
	return s
}

// waitOutput reads the session's output until it contains want.
func (s *attachSession) waitOutput(t *testing.T, want string) string {
	t.Helper()
	var b strings.Builder
	deadline := time.After(15 * time.Second)
	for !strings.Contains(b.String(), want) {
		select {
		case chunk, ok := <-s.out:
			if !ok {
				t.Fatalf("attach ended before %q; output %q", want, b.String())
			}
			b.WriteString(chunk)
		case <-deadline:
			t.Fatalf("no %q in attach output %q", want, b.String())
		}
	}
	return b.String()
}

// TestAgentAttach: attach with stdin to a real container, several
// sessions one after the other, stdinOnce closing stdin after the first,
// and a TTY with resize; the output also lands in the log.
func TestAgentAttach(t *testing.T) {
	e := newEnv(t)
	a := e.startAgent(t, "10.251.9.51")
	grace := int64(1)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "att", Namespace: "default", UID: "uid-att"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{
				{Name: "echo", Image: e.img.Busybox.Ref, Stdin: true, Command: []string{"sh", "-c", "while read l; do echo got-$l; done"}},
				{Name: "once", Image: e.img.Busybox.Ref, Stdin: true, StdinOnce: true, Command: []string{"wc", "-c"}},
				{Name: "term", Image: e.img.Busybox.Ref, Stdin: true, TTY: true, Command: []string{"sh"}},
			},
		},
	}
	e.applyPod(t, a, p, nil)
	watch(t, a, "all running", func(s *corev1.PodStatus) bool {
		for _, n := range []string{"echo", "once", "term"} {
			if containerStatus(s, n).State.Running == nil {
				return false
			}
		}
		return true
	})

	t.Run("sequential sessions share stdin", func(t *testing.T) {
		for _, word := range []string{"one", "two"} {
			s := attach(t, a, &api.ExecStart{Container: "echo", Stdin: true, Stdout: true, Stderr: true},
				&api.ExecInput{Stdin: []byte(word + "\n")}, &api.ExecInput{CloseStdin: true})
			s.waitOutput(t, "got-"+word)
			s.cancel()
		}
		if logs := readLogs(t, a, api.LogsOptions{Container: "echo", TailLines: -1}); logs != "got-one\ngot-two\n" {
			t.Errorf("echo log = %q", logs)
		}
	})

	t.Run("stdinOnce closes stdin after the first session", func(t *testing.T) {
		s := attach(t, a, &api.ExecStart{Container: "once", Stdin: true, Stdout: true},
			&api.ExecInput{Stdin: []byte("12345")}, &api.ExecInput{CloseStdin: true})
		s.waitOutput(t, "5")
		select {
		case code := <-s.exit:
			if code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no exit code after stdin closed")
		}
		s.cancel()
	})

	t.Run("tty with resize", func(t *testing.T) {
		s := attach(t, a, &api.ExecStart{Container: "term", Stdin: true, TTY: true, Stdout: true},
			&api.ExecInput{Resize: &api.TerminalSize{Width: 100, Height: 30}},
			&api.ExecInput{Stdin: []byte("stty size; tty\n")})
		s.waitOutput(t, "30 100")
		s.cancel()
		s = attach(t, a, &api.ExecStart{Container: "term", Stdin: true, TTY: true, Stdout: true},
			&api.ExecInput{Resize: &api.TerminalSize{Width: 90, Height: 20}},
			&api.ExecInput{Stdin: []byte("stty size; exit 6\n")})
		s.waitOutput(t, "20 90")
		select {
		case code := <-s.exit:
			if code != 6 {
				t.Errorf("exit code %d, want 6", code)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no exit code")
		}
		s.cancel()
		if logs := readLogs(t, a, api.LogsOptions{Container: "term", TailLines: -1}); !strings.Contains(logs, "/dev/pts/") {
			t.Errorf("term log lacks the TTY output: %q", logs)
		}
	})
}
