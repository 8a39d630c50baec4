package pod

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/kipcell/kip/cell/api/logs"
)

// outputs are the writers a container attempt's stdout and stderr go to:
// its log file and its attach sessions; without a log file (a resumed
// attempt whose log could not be opened), the attach sessions alone.
func outputs(lf *logs.File, aio *attachIO, log *slog.Logger) (stdout, stderr io.Writer) {
	if lf == nil {
		return aio.stdout, aio.stderr
	}
	return io.MultiWriter(&lateOutput{w: lf.Stream(logs.Stdout), stream: logs.Stdout, log: log}, aio.stdout),
		io.MultiWriter(&lateOutput{w: lf.Stream(logs.Stderr), stream: logs.Stderr, log: log}, aio.stderr)
}

// lateOutput says, once, that output reached a container's log after the
// log was closed. The runtime drains an attempt's output before it is
// deleted, and the log is closed only after that, so this output is lost
// against the rules: the warning is how such a loss shows.
type lateOutput struct {
	w      io.Writer
	stream string
	log    *slog.Logger
	once   sync.Once
}

func (l *lateOutput) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if errors.Is(err, os.ErrClosed) {
		l.once.Do(func() {
			l.log.Warn("container output reached its log after the log was closed: it is lost", "stream", l.stream, "bytes", len(p))
		})
	}
	return n, err
}
