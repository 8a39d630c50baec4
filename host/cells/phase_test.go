package cells

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/kipcell/kip/host/metrics"
)

// TestPhaseMoves: before ending any move is allowed; a cell ending only
// ends, and one that ended stays so.
func TestPhaseMoves(t *testing.T) {
	tests := []struct {
		from, to cellPhase
		moves    bool
	}{
		{phaseAdmitted, phasePlacing, true},
		{phaseJoining, phaseLaunching, true}, // the pod's next cell
		{phaseJoining, phasePlacing, true},   // an adopted cell's next
		{phaseRunning, phaseEnding, true},
		{phaseAdmitted, phaseEnded, true}, // rejected
		{phaseEnding, phaseRunning, false},
		{phaseEnding, phaseEnding, false},
		{phaseEnding, phaseEnded, true},
		{phaseEnded, phaseEnding, false},
		{phaseEnded, phaseEnded, false},
	}
	for _, tt := range tests {
		c := &cell{d: &cellDeps{log: slog.New(slog.DiscardHandler)}}
		c.setID("kip-uid", 0)
		c.phase = tt.from
		want := tt.from
		if tt.moves {
			want = tt.to
		}
		if moved := c.enterLocked(tt.to); moved != tt.moves || c.phase != want {
			t.Errorf("%s → %s: moved %v, now %s; want %v, %s", tt.from, tt.to, moved, c.phase, tt.moves, want)
		}
	}
}

// TestPhaseMetric: every phase counts as one of metrics.CellPhases, in
// their order.
func TestPhaseMetric(t *testing.T) {
	var got []string
	for p := phaseAdmitted; p <= phaseEnded; p++ {
		if m := p.metric(); len(got) == 0 || got[len(got)-1] != m {
			got = append(got, m)
		}
	}
	if !slices.Equal(got, metrics.CellPhases) {
		t.Errorf("phases count as %q, want %q", got, metrics.CellPhases)
	}
}
