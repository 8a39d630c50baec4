package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSteps: each step reaches the screen as it is, and demo.log with the
// seconds since kip-demo started, which is what says where a run's time
// went; lines that are only for the log stay off the screen.
func TestSteps(t *testing.T) {
	start := time.Date(2026, 12, 7, 22, 0, 0, 0, time.UTC)
	now := start
	var screen, log strings.Builder
	st := newSteps(&screen, &log, func() time.Time { return now })

	st.announce("starting containerd and the demo's registry")
	now = now.Add(1300 * time.Millisecond)
	st.logf("kip runs on %s", "kip")
	now = now.Add(42 * time.Second)
	st.announce("applying deploy/examples/hello.yaml")

	wantScreen := "starting containerd and the demo's registry\napplying deploy/examples/hello.yaml\n"
	if diff := cmp.Diff(wantScreen, screen.String()); diff != "" {
		t.Errorf("screen (-want +got):\n%s", diff)
	}
	wantLog := "kip-demo:   0.0s starting containerd and the demo's registry\n" +
		"kip-demo:   1.3s kip runs on kip\n" +
		"kip-demo:  43.3s applying deploy/examples/hello.yaml\n"
	if diff := cmp.Diff(wantLog, log.String()); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}
