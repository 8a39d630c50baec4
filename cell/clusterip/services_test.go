package clusterip

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder is a Programmer that records the keys of every table it is
// given, and fails while fail is set.
type recorder struct {
	programmed [][]string
	fail       error
}

func (r *recorder) Program(_ context.Context, services []Service) error {
	if r.fail != nil {
		return r.fail
	}
	keys := []string{}
	for _, s := range services {
		keys = append(keys, s.Key())
	}
	r.programmed = append(r.programmed, keys)
	return nil
}

func svc(ns, name string) Service { return Service{Namespace: ns, Name: name} }

func TestProxyApply(t *testing.T) {
	type step struct {
		u Update
		// fail makes the Programmer fail this step.
		fail bool
		// want is the table and revision Apply returns; wantErr what it
		// fails with; programmed the keys the Programmer got, if it ran.
		wantTable  string
		wantRev    uint64
		wantErr    error
		programmed []string
	}
	full := Update{Table: "t1", Revision: 3, Services: []Service{svc("b", "x"), svc("a", "y")}}
	tests := []struct {
		name  string
		steps []step
	}{
		{"a whole table, then a delta on it", []step{
			{u: full, wantTable: "t1", wantRev: 3, programmed: []string{"a/y", "b/x"}},
			{u: Update{Table: "t1", Revision: 5, Base: 3, Services: []Service{svc("c", "z")}, Removed: []string{"b/x"}},
				wantTable: "t1", wantRev: 5, programmed: []string{"a/y", "c/z"}},
		}},
		{"a delta before any table is refused", []step{
			{u: Update{Table: "t1", Revision: 5, Base: 3}, wantErr: ErrBaseMismatch},
		}},
		{"a delta against another revision is refused", []step{
			{u: full, wantTable: "t1", wantRev: 3, programmed: []string{"a/y", "b/x"}},
			{u: Update{Table: "t1", Revision: 6, Base: 4}, wantTable: "t1", wantRev: 3, wantErr: ErrBaseMismatch},
		}},
		{"a delta from another host's table is refused, its whole table is taken", []step{
			{u: full, wantTable: "t1", wantRev: 3, programmed: []string{"a/y", "b/x"}},
			{u: Update{Table: "t2", Revision: 4, Base: 3}, wantTable: "t1", wantRev: 3, wantErr: ErrBaseMismatch},
			{u: Update{Table: "t2", Revision: 1, Services: []Service{svc("d", "w")}}, wantTable: "t2", wantRev: 1, programmed: []string{"d/w"}},
		}},
		{"the same or an older revision changes nothing", []step{
			{u: full, wantTable: "t1", wantRev: 3, programmed: []string{"a/y", "b/x"}},
			{u: full, wantTable: "t1", wantRev: 3},
			{u: Update{Table: "t1", Revision: 2}, wantTable: "t1", wantRev: 3},
		}},
		{"a failed sync keeps the table for the retry", []step{
			{u: full, wantTable: "t1", wantRev: 3, programmed: []string{"a/y", "b/x"}},
			{u: Update{Table: "t1", Revision: 4, Base: 3, Removed: []string{"a/y"}}, fail: true, wantTable: "t1", wantRev: 3, wantErr: errBoom},
			{u: Update{Table: "t1", Revision: 4, Base: 3, Removed: []string{"a/y"}}, wantTable: "t1", wantRev: 4, programmed: []string{"b/x"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			p := New(rec)
			for i, s := range tt.steps {
				rec.fail, rec.programmed = nil, nil
				if s.fail {
					rec.fail = errBoom
				}
				table, rev, err := p.Apply(t.Context(), s.u)
				if !errors.Is(err, s.wantErr) || (err != nil && s.wantErr == nil) {
					t.Fatalf("step %d: Apply = %v, want %v", i, err, s.wantErr)
				}
				if table != s.wantTable || rev != s.wantRev {
					t.Errorf("step %d: Apply says table %q revision %d, want %q %d", i, table, rev, s.wantTable, s.wantRev)
				}
				var want [][]string
				if s.programmed != nil {
					want = [][]string{s.programmed}
				}
				if diff := cmp.Diff(want, rec.programmed); diff != "" {
					t.Errorf("step %d: programmed (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

var errBoom = errors.New("iptables-restore: line 3 failed")

// TestProxyHoldsTheTableUntilItsProgrammer: a Proxy made without a
// Programmer (the agent before it knows the pod's network namespace)
// takes the host's whole table and deltas without programming them;
// SetProgrammer programs the table it holds, whole, and the next delta
// goes through it.
func TestProxyHoldsTheTableUntilItsProgrammer(t *testing.T) {
	p := New(nil)
	if table, rev, err := p.Apply(t.Context(), Update{Table: "t1", Revision: 3, Services: []Service{svc("b", "x"), svc("a", "y")}}); err != nil || table != "t1" || rev != 3 {
		t.Fatalf("Apply of the whole table without a programmer = %q %d %v", table, rev, err)
	}
	if _, rev, err := p.Apply(t.Context(), Update{Table: "t1", Revision: 4, Base: 3, Removed: []string{"b/x"}, Services: []Service{svc("c", "z")}}); err != nil || rev != 4 {
		t.Fatalf("Apply of a delta without a programmer = %d %v", rev, err)
	}
	r := &recorder{}
	if err := p.SetProgrammer(t.Context(), r); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Apply(t.Context(), Update{Table: "t1", Revision: 5, Base: 4, Removed: []string{"c/z"}}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]string{{"a/y", "c/z"}, {"a/y"}}, r.programmed); diff != "" {
		t.Errorf("programmed (-want +got):\n%s", diff)
	}
	r.fail = errors.New("iptables-restore: line 3 failed")
	if err := p.SetProgrammer(t.Context(), r); !errors.Is(err, r.fail) {
		t.Errorf("SetProgrammer with a failing programmer = %v, want its error", err)
	}
}
