package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKipEnv(t *testing.T) {
	tests := []struct {
		name    string
		opts    nodeOptions
		want    []string
		wantErr bool
	}{
		{name: "no options, no variables"},
		{
			name: "a registry on the bridge and one elsewhere",
			opts: nodeOptions{insecureRegistries: []string{":5055", "reg.example:5000"}},
			want: []string{"KIP_CELLS_INSECURE_REGISTRIES=10.213.86.1:5000,10.213.86.1:5055,reg.example:5000"},
		},
		{
			name: "untainted",
			opts: nodeOptions{untainted: true},
			want: []string{"KIP_NODE_TAINT="},
		},
		{
			name: "both",
			opts: nodeOptions{insecureRegistries: []string{":5055"}, untainted: true},
			want: []string{"KIP_CELLS_INSECURE_REGISTRIES=10.213.86.1:5000,10.213.86.1:5055", "KIP_NODE_TAINT="},
		},
		{name: "no port", opts: nodeOptions{insecureRegistries: []string{"reg.example"}}, wantErr: true},
		{name: "empty port", opts: nodeOptions{insecureRegistries: []string{"reg.example:"}}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.kipEnv("10.213.86.1:5000", "10.213.86.1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("kipEnv: err = %v, want error %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("kipEnv (-want +got):\n%s", diff)
			}
		})
	}
}
