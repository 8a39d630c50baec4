package runtime

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestBindMounts(t *testing.T) {
	got := bindMounts([]Mount{
		{Source: "/state/volumes/cfg", Destination: "/etc/cfg", ReadOnly: true},
		{Source: "/state/volumes/scratch/sub", Destination: "/data"},
	})
	want := []specs.Mount{
		{Destination: "/etc/cfg", Type: "bind", Source: "/state/volumes/cfg", Options: []string{"rbind", "rprivate", "ro"}},
		{Destination: "/data", Type: "bind", Source: "/state/volumes/scratch/sub", Options: []string{"rbind", "rprivate", "rw"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("bindMounts (-want +got):\n%s", diff)
	}
}
