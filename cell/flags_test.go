package cell_test

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kipcell/kip/cell"
)

// The agent's memory and OOM score flags: their defaults, and what Load
// refuses.
func TestFlagsAgentMemoryAndOOMScore(t *testing.T) {
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, []byte(testBootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name            string
		args            []string
		wantAgentMemory int64
		wantOOMScoreAdj int
		wantErr         string
	}{
		{name: "defaults", wantAgentMemory: 0, wantOOMScoreAdj: -998},
		{name: "set", args: []string{"--agent-memory-mib", "256", "--oom-score-adj", "-999"}, wantAgentMemory: 256 << 20, wantOOMScoreAdj: -999},
		{name: "left as started", args: []string{"--oom-score-adj", "0"}, wantOOMScoreAdj: 0},
		{name: "no memory", args: []string{"--agent-memory-mib", "0"}, wantErr: "not a positive number of MiB"},
		{name: "out of range", args: []string{"--oom-score-adj", "-1001"}, wantErr: "not within -1000 and 1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f cell.Flags
			fs := flag.NewFlagSet("kip-cell", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs, func(string) string { return "" })
			err := fs.Parse(append([]string{"--bootstrap", bootstrap}, tc.args...))
			var cfg cell.Config
			if err == nil {
				cfg, err = f.Load()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.AgentMemory != tc.wantAgentMemory || cfg.OOMScoreAdj != tc.wantOOMScoreAdj {
				t.Errorf("agent memory %d, OOM score adjustment %d; want %d, %d", cfg.AgentMemory, cfg.OOMScoreAdj, tc.wantAgentMemory, tc.wantOOMScoreAdj)
			}
		})
	}
}

// --disk-path-root reaches the agent's Config (the cloud simulators' cells
// give it; a real instance does not).
func TestFlagsDiskPathRoot(t *testing.T) {
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	if err := os.WriteFile(bootstrap, []byte(testBootstrap), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--disk-path-root", "/tmp/simcells-disks-1/vm-a"}, "/tmp/simcells-disks-1/vm-a"},
	} {
		var f cell.Flags
		fs := flag.NewFlagSet("kip-cell", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs, func(string) string { return "" })
		if err := fs.Parse(append([]string{"--bootstrap", bootstrap}, tc.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.Load()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.DiskPathRoot != tc.want {
			t.Errorf("%v: DiskPathRoot %q, want %q", tc.args, cfg.DiskPathRoot, tc.want)
		}
	}
}
