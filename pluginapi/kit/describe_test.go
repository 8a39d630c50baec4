package kit

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/kipcell/kip/pluginapi"
	"github.com/kipcell/kip/pluginapi/snapshot"
)

// reportVM is a view's vm as the contract's instance, its reason marked.
func reportVM(v vm) pluginapi.Instance {
	in := v.Instance
	in.StateReason = "reported"
	return in
}

func ids(insts []pluginapi.Instance) []string {
	var out []string
	for _, i := range insts {
		out = append(out, i.ID+"/"+i.StateReason)
	}
	return out
}

func TestListAndDescribe(t *testing.T) {
	errDown := errors.New("503")
	cloud := map[string]vm{"a": inst("a", pluginapi.StateRunning), "b": inst("b", pluginapi.StatePending)}
	view := snapshot.New(func(context.Context) (map[string]vm, error) { return cloud, nil }, time.Now, time.Minute)
	// Outside the cluster: o is a cell, n is not, x does not exist, bad
	// is not an ID of the cloud's form.
	outside := map[string]vm{"o": inst("o", pluginapi.StateRunning), "n": {Instance: pluginapi.Instance{ID: "n"}}}
	var asked []string
	get := func(ctx context.Context, id string) (vm, bool, error) {
		asked = append(asked, id)
		switch id {
		case "bad":
			return vm{}, false, nil
		case "down":
			return vm{}, false, errDown
		}
		v, ok := outside[id]
		return v, ok, nil
	}

	list, err := List(t.Context(), view, time.Second, reportVM)
	if err != nil || !slices.Equal(ids(list.Instances), []string{"a/reported", "b/reported"}) {
		t.Errorf("List() = %v, %v", list, err)
	}
	tests := []struct {
		name      string
		ids       []string
		want      []string
		wantAsked []string
		wantErr   string
	}{
		{"of the cluster", []string{"b", "a", "b"}, []string{"a/reported", "b/reported"}, nil, ""},
		{"outside the cluster", []string{"a", "o", "n", "x", "bad"}, []string{"a/reported", "o/reported"}, []string{"bad", "n", "o", "x"}, ""},
		{"a failed call", []string{"a", "down"}, nil, []string{"down"}, "describing instance down: 503"},
		{"none", nil, nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			asked = nil
			got, err := Describe(t.Context(), view, time.Second, tt.ids, reportVM, LookupEach(reportVM, get))
			if !slices.Equal(asked, tt.wantAsked) {
				t.Errorf("asked the cloud for %v, want %v", asked, tt.wantAsked)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr || !errors.Is(err, errDown) {
					t.Fatalf("Describe() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(ids(got.Instances), tt.want) {
				t.Errorf("Describe() = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
