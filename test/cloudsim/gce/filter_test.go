package gcesim

import (
	"testing"
)

func TestParseFilter(t *testing.T) {
	fields := map[string]string{"name": "cell-a", "status": "RUNNING", "labels.kip-cluster": "c1", "labels.kip-cell": "cell-a"}
	lookup := func(f string) (string, bool) { v, ok := fields[f]; return v, ok }
	tests := []struct {
		filter  string
		want    bool
		wantErr bool
	}{
		{filter: "", want: true},
		{filter: `labels.kip-cluster = "c1"`, want: true},
		{filter: `labels.kip-cluster="c2"`, want: false},
		{filter: `labels.kip-cluster = c1 labels.kip-cell = "cell-a"`, want: true},
		{filter: `(labels.kip-cluster = "c1") AND (status != RUNNING)`, want: false},
		{filter: `labels.kip-pool != "x"`, want: true},
		{filter: `labels.kip-pool:*`, want: false},
		{filter: `labels.kip-cell:*`, want: true},
		{filter: `name:cell`, want: true},
		{filter: `name = "quoted \"name\""`, want: false},
		{filter: `metadata.items = "x"`, wantErr: true},
		{filter: `labels.kip-cluster ~ "c1"`, wantErr: true},
		{filter: `labels.kip-cluster = "c1`, wantErr: true},
		{filter: `(name = "cell-b") OR (name = "cell-a")`, want: true},
		{filter: `(name = "cell-b") OR (name = "cell-c")`, want: false},
		{filter: `(name = "cell-b") OR (status = RUNNING) OR (name = "x")`, want: true},
		{filter: `(name = "cell-a") OR (name = "x") AND (status = RUNNING)`, wantErr: true},
		{filter: `(name = "cell-a") (status = RUNNING) OR (name = "x")`, wantErr: true},
		{filter: `OR (name = "cell-a")`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.filter, func(t *testing.T) {
			match, err := parseFilter(tt.filter, instanceFields)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseFilter(%q) accepted it, want an invalid filter", tt.filter)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFilter(%q): %v", tt.filter, err)
			}
			if got := match(lookup); got != tt.want {
				t.Errorf("match = %v, want %v", got, tt.want)
			}
		})
	}
}
