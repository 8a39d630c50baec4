package kit

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
)

// vm is a view's instance: the contract's instance, as a cloud's view
// embeds it.
type vm struct {
	pluginapi.Instance
}

func snap(insts ...vm) map[string]vm {
	m := map[string]vm{}
	for _, i := range insts {
		m[i.ID] = i
	}
	return m
}

// launchedNow is the launch time of inst's instances: the tests' now, so
// that their boots are not timed.
var launchedNow = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func inst(id string, state pluginapi.InstanceState) vm {
	return vm{Instance: pluginapi.Instance{ID: id, CellID: "cell-" + id, State: state, StateReason: "reason " + string(state), LaunchedAt: launchedNow}}
}

func TestChangesDiff(t *testing.T) {
	now := launchedNow
	booted := inst("b", pluginapi.StatePending)
	booted.LaunchedAt = now.Add(-20 * time.Second)
	running := booted
	running.State, running.StateReason = pluginapi.StateRunning, ""
	tests := []struct {
		name       string
		goneReason string
		polls      []map[string]vm
		want       []string // the events of the last poll, and the hooks' calls
		wantBoot   time.Duration
	}{
		{
			name:  "the first poll sends nothing",
			polls: []map[string]vm{snap(inst("a", pluginapi.StateRunning))},
			want:  []string{"each a"},
		},
		{
			name:  "new instances and changes, by ID",
			polls: []map[string]vm{snap(inst("b", pluginapi.StatePending), inst("c", pluginapi.StateRunning)), snap(inst("c", pluginapi.StateRunning), inst("b", pluginapi.StateRunning), inst("a", pluginapi.StatePending))},
			want: []string{
				"each a", "state-change a cell-a pending reason pending", "changed a new",
				"each b", "state-change b cell-b running reason running", "changed b from pending",
				"each c",
			},
		},
		{
			name:     "a boot is timed",
			polls:    []map[string]vm{snap(booted), snap(running)},
			want:     []string{"each b", "state-change b cell-b running ", "changed b from pending"},
			wantBoot: 20 * time.Second,
		},
		{
			name:       "an instance gone",
			goneReason: "deleted",
			polls:      []map[string]vm{snap(inst("a", pluginapi.StateRunning), inst("t", pluginapi.StateTerminated)), snap()},
			want:       []string{"state-change a cell-a terminated deleted", "gone a running"},
		},
		{
			name:  "an instance gone, not reported",
			polls: []map[string]vm{snap(inst("a", pluginapi.StateRunning)), snap()},
			want:  nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			record := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
			b := &Base{Now: func() time.Time { return now }}
			c := Changes[vm]{
				Base: b, GoneReason: tt.goneReason,
				Send: func(e *pluginapi.Event) error {
					if e.Time != now {
						t.Errorf("event at %v, want %v", e.Time, now)
					}
					record("%s %s %s %s %s", e.Type, e.InstanceID, e.CellID, e.State, e.Reason)
					return nil
				},
				Instance: func(v *vm) *pluginapi.Instance { return &v.Instance },
				Each:     func(cur vm, _ time.Time) error { record("each %s", cur.ID); return nil },
				Changed: func(old vm, seen bool, cur vm, _ time.Time) error {
					if !seen {
						record("changed %s new", cur.ID)
					} else {
						record("changed %s from %s", cur.ID, old.State)
					}
					return nil
				},
				Gone: func(old, gone vm, _ time.Time) error {
					if gone.State != pluginapi.StateTerminated || gone.StateReason != tt.goneReason {
						t.Errorf("gone = %+v", gone)
					}
					record("gone %s %s", old.ID, old.State)
					return nil
				},
			}
			for _, s := range tt.polls {
				got = nil
				if err := c.Diff(s); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("last poll:\n got %q\nwant %q", got, tt.want)
			}
			if boot, known := b.Boots.Quickest(); boot != tt.wantBoot || known != (tt.wantBoot != 0) {
				t.Errorf("boots = %v, %v; want %v", boot, known, tt.wantBoot)
			}
		})
	}
}

// Changes of pluginapi.Instance needs no Instance; a failed send ends the
// poll with its error.
func TestChangesOfInstances(t *testing.T) {
	errSend := errors.New("stream closed")
	var sent []string
	c := Changes[pluginapi.Instance]{Base: &Base{Now: time.Now}, Send: func(e *pluginapi.Event) error {
		sent = append(sent, e.InstanceID)
		return errSend
	}}
	a := pluginapi.Instance{ID: "a", State: pluginapi.StatePending}
	if err := c.Diff(map[string]pluginapi.Instance{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Diff(map[string]pluginapi.Instance{"a": a}); !errors.Is(err, errSend) {
		t.Errorf("Diff() = %v, want the send's error", err)
	}
	if !slices.Equal(sent, []string{"a"}) {
		t.Errorf("sent %v, want [a]", sent)
	}
}
