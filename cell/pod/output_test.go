package pod

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/kipcell/kip/cell/api/logs"
)

// TestOutputAfterTheLogClosedIsReported: output that reaches a closed log
// is lost, and the agent's log says so, once per stream.
func TestOutputAfterTheLogClosedIsReported(t *testing.T) {
	lf, err := logs.NewStore(t.TempDir()).Create("app", 0)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	stdout, stderr := outputs(lf, newAttachIO(false, false, false), slog.New(slog.NewTextHandler(&buf, nil)))
	if _, err := stdout.Write([]byte("kept\n")); err != nil {
		t.Fatalf("writing before the close: %v", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a warning before the close: %s", buf.String())
	}
	if err := lf.Close(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := stdout.Write([]byte("late\n")); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("writing after the close: %v, want os.ErrClosed", err)
		}
	}
	_, _ = stderr.Write([]byte("late too\n"))
	got := buf.String()
	if n := strings.Count(got, "after the log was closed"); n != 2 {
		t.Errorf("%d warnings, want one per stream:\n%s", n, got)
	}
	if !strings.Contains(got, "stream=stdout") || !strings.Contains(got, "stream=stderr") {
		t.Errorf("the warnings do not name the streams:\n%s", got)
	}
}
