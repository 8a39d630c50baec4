package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/kipcell/kip/cell/api"
	"github.com/kipcell/kip/cell/pod"
)

// Attach implements api.Cell: it streams what the container's
// running main process writes from now on (stdout and stderr apart, or
// the terminal's output with tty: true) and its exit code once it ends.
// For a container with stdin: true the session's stdin goes to the
// process, resizes go to its terminal, and with stdinOnce the process's
// stdin is closed when the first session closes its stdin or detaches.
// Asking for stdin of a container without it only logs: the output
// still flows, as kubectl then warns on its own.
func (s *Server) Attach(ctx context.Context, stream api.ExecStream) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.Start
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message must carry start")
	}
	name := start.Container
	if name == "" {
		name = s.cfg.Pod.DefaultContainer()
	}
	at, err := s.cfg.Pod.Attach(name, start.Stdout, start.Stderr)
	if err != nil {
		if errors.Is(err, pod.ErrNoContainer) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	log := s.log.With("container", name)
	defer func() {
		if err := at.Detach(context.WithoutCancel(ctx)); err != nil {
			log.WarnContext(ctx, "detaching", "error", err)
		}
	}()
	wantStdin := start.Stdin
	if wantStdin && !at.Stdin {
		log.InfoContext(ctx, "attach asked for stdin of a container without stdin: true; ignoring it")
		wantStdin = false
	}
	log.InfoContext(ctx, "attached", "stdin", wantStdin, "tty", at.TTY)
	go s.attachInput(ctx, stream, at, first, wantStdin)

	out := &execSender{stream: stream}
	stdout, stderr := at.Stdout, at.Stderr
	for stdout != nil || stderr != nil {
		select {
		case b, ok := <-stdout:
			if !ok {
				stdout = nil
				continue
			}
			if err := out.send(&api.ExecOutput{Stdout: b}); err != nil {
				return err
			}
		case b, ok := <-stderr:
			if !ok {
				stderr = nil
				continue
			}
			if err := out.send(&api.ExecOutput{Stderr: b}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		}
	}
	if err := at.Err(); err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	select {
	case <-at.Exited():
		return out.send(&api.ExecOutput{Exit: &api.ExitStatus{Code: at.ExitCode()}})
	case <-ctx.Done():
		return nil
	}
}

// attachInput forwards stdin, resizes and the end of stdin to the
// attached process until the host stops sending.
func (s *Server) attachInput(ctx context.Context, stream api.ExecStream, at *pod.Attachment, first *api.ExecInput, stdin bool) {
	log := s.log
	handle := func(in *api.ExecInput) {
		if r := in.Resize; r != nil {
			if err := at.Resize(ctx, r.Width, r.Height); err != nil {
				log.WarnContext(ctx, "resizing attached terminal", "error", err)
			}
		}
		if !stdin {
			return
		}
		if len(in.Stdin) > 0 {
			if err := at.WriteStdin(in.Stdin); err != nil {
				log.InfoContext(ctx, "writing attached stdin", "error", err)
				stdin = false
			}
		}
		if in.CloseStdin {
			if err := at.EndStdin(ctx); err != nil {
				log.WarnContext(ctx, "closing attached stdin", "error", err)
			}
			stdin = false
		}
	}
	handle(first)
	for {
		in, err := stream.Recv()
		if err != nil {
			return
		}
		handle(in)
	}
}
